"""`memory-governor install HARNESS` / `uninstall HARNESS`: the hooks in a harness's settings.

Each harness's setup module (governor/harnesses/<name>/setup.py) says which files change and
how; this command shows (`--dry-run`) or applies the change with the promises of
governor.harnesses.settings: idempotent, atomic, backed up, other hooks kept, invalid files
refused.
"""

from __future__ import annotations

import os
from types import ModuleType

import click

from governor import harnesses
from governor.harnesses.settings import SettingsError, apply
from governor.policy import compiled
from governor.state import state_dir


def _project(project: str | None) -> str:
    return os.path.abspath(project or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())


def _setup(harness: str, scope: str) -> ModuleType:
    setup = harnesses.part(harness, "setup")
    if setup is None:
        raise click.ClickException(f"{harness} cannot be installed: it has no setup module")
    if scope not in setup.SCOPES:
        raise click.BadParameter(f"{harness} has no {scope!r} scope: use one of {', '.join(setup.SCOPES)}",
                                 param_hint="--scope")  # fmt: skip
    return setup


_HARNESS = click.argument("harness", type=click.Choice(harnesses.names()))
_SCOPE = click.option("--scope", type=click.Choice(["project", "user", "local"]), default="project", show_default=True,
                      help="project: in the project's settings (committed); local: its uncommitted settings; "
                      "user: your own, for every project.")  # fmt: skip
_PROJECT = click.option("--project", type=click.Path(file_okay=False), help="The project directory (default: here).")
_DRY_RUN = click.option("--dry-run", is_flag=True, help="Show the settings that would be written; change nothing.")


@click.command("install")
@_HARNESS
@_SCOPE
@_PROJECT
@_DRY_RUN
def install(harness: str, scope: str, project: str | None, dry_run: bool) -> int:
    """Install the hooks into a harness's settings."""
    setup = _setup(harness, scope)
    root = _project(project)
    policy, notices = compiled.load(os.environ, root, state_dir(os.environ))
    for notice in notices:
        click.echo(notice, err=True)
    try:
        for change in setup.plan_install(policy.data, scope, root):
            apply(change, dry_run, click.echo)
    except (SettingsError, OSError) as err:
        raise click.ClickException(str(err)) from err
    return 0


@click.command("uninstall")
@_HARNESS
@_SCOPE
@_PROJECT
@_DRY_RUN
def uninstall(harness: str, scope: str, project: str | None, dry_run: bool) -> int:
    """Remove memory-governor's hooks from a harness's settings, keeping all others."""
    setup = _setup(harness, scope)
    try:
        for change in setup.plan_uninstall(scope, _project(project)):
            apply(change, dry_run, click.echo)
    except (SettingsError, OSError) as err:
        raise click.ClickException(str(err)) from err
    return 0
