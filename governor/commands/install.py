"""`memory-governor install HARNESS` / `uninstall HARNESS`: the hooks in a harness's settings.

Each harness's setup module (governor/harnesses/<name>/setup.py) says which files change and
how (one that installs into other programs' configs lists them as CLIENTS: `--client`); this command shows (`--dry-run`) or applies the change with the promises of
governor.harnesses.settings: idempotent, atomic, backed up, other hooks kept, invalid files
refused.
"""

from __future__ import annotations

import os
from types import ModuleType

import click

from governor import harnesses
from governor.harnesses import installs
from governor.harnesses.settings import SettingsError, apply
from governor.policy import acceptance, compiled
from governor.policy.sources import Sources
from governor.state import default_state_dir, state_dir


def _project(project: str | None) -> str:
    return os.path.abspath(project or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())


def _setup(harness: str, scope: str | None, client: str | None) -> tuple[ModuleType, str, dict[str, str]]:
    """The harness's setup module, the scope (its first when none is given), and the options its
    plans take: a setup that installs into other programs' configs (CLIENTS) needs --client."""
    setup = harnesses.part(harness, "setup")
    if setup is None:
        raise click.ClickException(f"{harness} cannot be installed: it has no setup module")
    clients = getattr(setup, "CLIENTS", None)
    if clients is None and client:
        raise click.BadParameter(
            f"{harness} installs into its own settings: it takes no --client", param_hint="--client"
        )
    if clients is not None and client not in clients:
        raise click.BadParameter(f"{harness} needs --client, one of: {', '.join(clients)}", param_hint="--client")
    scopes = setup.scopes(client) if clients is not None else setup.SCOPES
    scope = scope or scopes[0]
    if scope not in scopes:
        where = f"{harness} --client {client}" if client else harness
        raise click.BadParameter(f"{where} has no {scope!r} scope: use one of {', '.join(scopes)}",
                                 param_hint="--scope")  # fmt: skip
    return setup, scope, ({"client": client} if clients is not None and client else {})


_HARNESS = click.argument("harness", type=click.Choice(harnesses.names()))
_SCOPE = click.option("--scope", type=click.Choice(["project", "user", "local"]), default=None,
                      help="project: in the project's settings (committed); local: its uncommitted settings; "
                      "user: your own, for every project. Default: the harness's (or client's) first.")  # fmt: skip
_CLIENT = click.option("--client", help="mcp-proxy: the MCP client whose configuration starts the memory server "
                       "(claude-desktop, cursor, windsurf, claude-code, gemini-cli, vscode).")  # fmt: skip
_PROJECT = click.option("--project", type=click.Path(file_okay=False), help="The project directory (default: here).")
_DRY_RUN = click.option("--dry-run", is_flag=True, help="Show the settings that would be written; change nothing.")


@click.command("install")
@_HARNESS
@_SCOPE
@_CLIENT
@_PROJECT
@_DRY_RUN
def install(harness: str, scope: str | None, client: str | None, project: str | None, dry_run: bool) -> int:
    """Install the hooks into a harness's settings (mcp-proxy: the proxy into an MCP client's)."""
    setup, scope, options = _setup(harness, scope, client)
    root = _project(project)
    # The hooks cover the tools the policy files name now, held back or not: coverage only widens.
    sources = Sources(os.environ, root)
    policy, notices = compiled.from_files(sources, state_dir(os.environ))
    _, notices = acceptance.enforced(policy, notices, sources, state_dir(os.environ))
    for notice in notices:
        click.echo(notice, err=True)
    try:
        written = []
        for change in setup.plan_install(policy.data, scope, root, **options):
            apply(change, dry_run, click.echo)
            written.append(change.path)
        if not dry_run and not options:  # what a SessionStart compares with (governor.harnesses.installs)
            settings = getattr(setup, "settings_path", None)  # every scope's: one can switch off another's hooks
            written += [settings(other, root) for other in setup.SCOPES] if settings else []
            installs.record([state_dir(os.environ), default_state_dir(os.environ)], harness, root, scope, written)
    except (SettingsError, OSError) as err:
        raise click.ClickException(str(err)) from err
    return 0


@click.command("uninstall")
@_HARNESS
@_SCOPE
@_CLIENT
@_PROJECT
@_DRY_RUN
def uninstall(harness: str, scope: str | None, client: str | None, project: str | None, dry_run: bool) -> int:
    """Remove memory-governor's hooks from a harness's settings, keeping all others."""
    setup, scope, options = _setup(harness, scope, client)
    try:
        for change in setup.plan_uninstall(scope, _project(project), **options):
            apply(change, dry_run, click.echo)
    except (SettingsError, OSError) as err:
        raise click.ClickException(str(err)) from err
    return 0
