"""`memory-governor install HARNESS` / `uninstall HARNESS`: the hooks in a harness's settings.

Each harness's setup module (governor/harnesses/<name>/setup.py) says which files change and
how (one that installs into other programs' configs lists them as CLIENTS: `--client`); this command shows (`--dry-run`) or applies the change with the promises of
governor.harnesses.settings: idempotent, atomic, backed up, other hooks kept, invalid files
refused.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

import click

from governor import harnesses, install_extra
from governor.harnesses import installs
from governor.harnesses.managed import Layout
from governor.harnesses.settings import Change, SettingsError, apply
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
_SCOPE = click.option("--scope", type=click.Choice(["project", "user", "local", "managed"]), default=None,
                      help="project: in the project's settings (committed); local: its uncommitted settings; "
                      "user: your own, for every project; managed (claude-code, codex; as root): the machine's managed "
                      "settings, a boundary no user file crosses. Default: the harness's (or client's) first.")  # fmt: skip
_ROOT = click.option("--root", type=click.Path(file_okay=False), default=None,
                     help="managed: put /etc/<harness> and /etc/memory-governor under this prefix instead "
                     "(a staging tree, or a test); the root check is then not made.")  # fmt: skip
_POLICY = click.option("--policy", "policy_file", type=click.Path(dir_okay=False, exists=True), default=None,
                       help="managed: the policy to enforce (copied to /etc/memory-governor/policy.yaml); default: "
                       "the one there, else the shipped default.")  # fmt: skip
_LEDGER_URL = click.option("--ledger-url", default=None, metavar="URL",
                           help="managed: the Redis every user's managed hooks keep the ledger on (redis://…; "
                           "\"\" for each user's own SQLite file again); default: as it is.")  # fmt: skip
_SERVICE = click.option("--service/--no-service", default=None,
                        help="managed: the wall (the default). Every hook asks one decision service, run as its own "
                        "system user (--service-user, made if missing) with state no user can reach; the install "
                        "writes its systemd unit and starts it where systemd runs. Unanswered, governed calls are "
                        "refused. --no-service: the seatbelt tier, each user's hook deciding with that user's own "
                        "state (a service an earlier install put up is removed).")  # fmt: skip
_SERVICE_START = click.option("--no-service-start", "service_start", is_flag=True, flag_value=False, default=True,
                              help="managed: write the service's unit, start nothing (an image being built; the "
                              "machine's init starts the service).")  # fmt: skip
_SERVICE_USER = click.option("--service-user", default="memory-governor", show_default=True,
                             help="managed: the decision service's system user.")  # fmt: skip
_CLIENT = click.option("--client", help="mcp-proxy: the MCP client whose configuration starts the memory server "
                       "(claude-desktop, cursor, windsurf, claude-code, gemini-cli, vscode).")  # fmt: skip
_PROJECT = click.option("--project", type=click.Path(file_okay=False), help="The project directory (default: here).")
_DRY_RUN = click.option("--dry-run", is_flag=True, help="Show the settings that would be written; change nothing.")


def _where(command: Callable[..., Any]) -> Callable[..., Any]:
    """What install and uninstall both take: the harness, its scope (and client), the project, --dry-run, --root."""
    for option in (_ROOT, _DRY_RUN, _PROJECT, _CLIENT, _SCOPE, _HARNESS):  # innermost first, as stacked
        command = option(command)
    return command


@click.command("install")
@_where
@_POLICY
@_LEDGER_URL
@_SERVICE
@_SERVICE_USER
@_SERVICE_START
def install(harness: str, scope: str | None, client: str | None, project: str | None, dry_run: bool,
            root: str | None, policy_file: str | None, ledger_url: str | None, service: bool | None,
            service_user: str, service_start: bool) -> int:  # fmt: skip
    """Install the hooks into a harness's settings (mcp-proxy: the proxy into an MCP client's)."""
    if scope == "managed":
        return _install_managed(harness, root, policy_file, ledger_url, dry_run,
                                service_user if service is not False else None, service_start)  # fmt: skip
    if service is not None:
        raise click.BadParameter("only the managed scope has a decision service", param_hint="--service")
    if ledger_url is not None:
        raise click.BadParameter("only the managed scope keeps a ledger URL (elsewhere: MEMORY_GOVERNOR_LEDGER_URL)",
                                 param_hint="--ledger-url")  # fmt: skip
    setup, scope, options = _setup(harness, scope, client)
    root = _project(project)
    # The hooks cover the tools the policy files name now, held back or not: coverage only widens.
    sources = Sources(os.environ, root)
    policy, notices = compiled.from_files(sources, state_dir(os.environ))
    enforcing, notices = acceptance.enforced(policy, notices, sources, state_dir(os.environ))
    if enforcing.held is not None:
        notices.append(acceptance.held_notice(sources, state_dir(os.environ), enforcing.held))
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
@_where
def uninstall(harness: str, scope: str | None, client: str | None, project: str | None, dry_run: bool,
              root: str | None) -> int:  # fmt: skip
    """Remove memory-governor's hooks from a harness's settings, keeping all others."""
    if scope == "managed":
        return _uninstall_managed(harness, root, dry_run)
    setup, scope, options = _setup(harness, scope, client)
    root = _project(project)
    try:
        for change in setup.plan_uninstall(scope, root, **options):
            apply(change, dry_run, click.echo)
        if not dry_run and not options:
            installs.forget([state_dir(os.environ), default_state_dir(os.environ)], harness, root, scope)
    except (SettingsError, OSError) as err:
        raise click.ClickException(str(err)) from err
    return 0


# -- the managed scope (governor.harnesses.managed, and each harness's managed module) ------


def _managed(harness: str) -> tuple[Layout, ModuleType]:
    """The harness's managed layout (governor.harnesses.<name>.managed.LAYOUT) and its setup module."""
    managed = harnesses.part(harness, "managed")
    setup = harnesses.part(harness, "setup")
    if managed is None or setup is None:
        having = [n for n in harnesses.names() if harnesses.part(n, "managed") is not None]
        raise click.BadParameter(f"{harness} has no managed scope (these have one: {', '.join(having)})",
                                 param_hint="--scope")  # fmt: skip
    return managed.LAYOUT, setup


def _managed_prefix(layout: Layout, root: str | None) -> str:
    if root is None and os.geteuid() != 0:
        raise click.ClickException(
            f"the managed scope writes {os.path.dirname(layout.paths()['settings'])} and /etc/memory-governor: run "
            "it as root (sudo), from a root-owned environment such as /opt/memory-governor"
        )
    return os.path.abspath(root or "/")


def _install_managed(harness: str, root: str | None, policy_file: str | None, ledger_url: str | None,
                     dry_run: bool, service_user: str | None = None, service_start: bool = True) -> int:  # fmt: skip
    import tempfile

    from governor.harnesses import managed as shared
    from governor.harnesses.settings import read_text
    from governor.policy import managed as policy_managed
    from governor.policy.files import compile_sources

    layout, setup = _managed(harness)
    prefix = _managed_prefix(layout, root)
    unsafe = policy_managed.ownership_problems(shared.environment_paths())
    if unsafe:
        message = (
            "the hooks would run a governor that someone other than root can change: "
            + "; ".join(unsafe[:3])
            + (f" (and {len(unsafe) - 3} more)" if len(unsafe) > 3 else "")
            + ". Install it in a root-owned environment (sudo python3 -m venv /opt/memory-governor; "
            "sudo /opt/memory-governor/bin/pip install <path-to-clone>) and run that one's memory-governor"
        )
        if root is None:
            raise click.ClickException(message)
        click.echo(f"warning: {message}", err=True)
    where = layout.paths(prefix)
    text = layout.policy_text(prefix, read_text(policy_file) if policy_file else None)
    # What will be enforced, compiled before anything is written: a policy that does not compile is refused.
    with tempfile.TemporaryDirectory() as scratch:
        with open(policy_managed.policy_path(scratch), "w", encoding="utf-8") as handle:
            handle.write(text)
        blob, problems = compile_sources(policy_managed.sources({}, scratch, scratch))
    if blob is None:
        raise click.ClickException(f"the managed policy is invalid: {problems[0]}; nothing was changed")
    from governor.runtime import service

    if ledger_url:
        _check_ledger(ledger_url, blob)
        power = service.open_redis(ledger_url) if service_user is not None else None
        if power is not None:
            click.echo(f"warning: the ledger's Redis lets a client with no credentials {power}, so the wall "
                       f"does not cover it: {service.redis_fix()}", err=True)  # fmt: skip

    walled = policy_managed.service(where["config"]) is not None  # an earlier install put the wall up
    earlier = os.path.exists(where["compiled"])  # an earlier managed install, of any harness
    user = _wall_user(service_user, root, prefix, dry_run) if service_user is not None else None
    try:
        unit = str(blob["policy"]["token_counter"])
        created = layout.will_create(prefix, unit)
        if not dry_run:
            layout.make_folders(prefix)
        _apply_managed(layout.plan_policy(prefix, text), dry_run)
        _apply_managed(layout.plan_environment(prefix, ledger_url), dry_run)
        if not dry_run:  # compiled where it is, so its signature is what every hook compares with
            blob, problems = shared.compile_for_install(where["config"])
            if blob is None:
                raise click.ClickException(f"the managed policy is invalid: {problems[0]}")
        for change in layout.plan_install(prefix, text, blob, created, setup.our_hooks, setup.is_ours):
            _apply_managed(change, dry_run)
        if not dry_run:  # the hooks count with this table, never with one in a user's state directory
            table = shared.write_table(where["config"], unit)
            click.echo(f"{table}: the tokenizer table every hook counts with" if table else
                       f"no tokenizer table for {unit}: the hooks count without one")  # fmt: skip
        if service_user is not None:
            if earlier and not walled:
                click.echo("the earlier managed install had no decision service: this one puts up the wall "
                           "(--no-service keeps the seatbelt tier)")  # fmt: skip
            _install_service(prefix, where, service_user, user, dry_run, service_start)
        elif walled:
            _remove_service(prefix, where, dry_run)
    except (SettingsError, OSError, ValueError) as err:
        raise click.ClickException(str(err)) from err
    if not dry_run:
        click.echo(
            f"managed: every user's {harness} sessions on this machine now enforce {where['policy']}; "
            "no user, project or local file switches these hooks off. Check it: memory-governor doctor"
        )
    if service_user is None:
        click.echo(f"--no-service: {service.SEATBELT}")
    return 0


def _wall_user(name: str, root: str | None, prefix: str, dry_run: bool) -> Any:
    """The decision service's user, found (or, installing on / as root, made) before anything is
    written: an install under --root makes no user, so one that is missing there is refused. None:
    a dry run on / where the install would make it."""
    from governor.runtime import service

    try:
        return service.service_user(name, root is None and not dry_run, prefix)
    except ValueError as err:
        if root is None and dry_run:
            click.echo(f"{name}: the system user the install would make for the decision service")
            return None
        if root is None:
            raise click.ClickException(f"{err}; nothing was changed") from err
        tree = os.path.join(prefix, "etc", "passwd")
        make = (f"useradd --root {prefix} --system --user-group {name}" if os.path.isfile(tree) else
                f"useradd --system --user-group {name}, with the uid it has in the image")  # fmt: skip
        raise click.ClickException(
            f"{err}, and an install under --root makes no user: make it first ({make}), name an existing "
            "one (--service-user), or install without the wall (--no-service); nothing was changed"
        ) from err


def _install_service(prefix: str, where: dict[str, str], name: str, user: Any, dry_run: bool,
                     start: bool) -> None:  # fmt: skip
    """The wall (governor.runtime.service): service.json and unit for `user` (made by _wall_user),
    the administrator's environment kept from users, and the service started where systemd runs
    (else how to)."""
    from governor.runtime import service

    if user is None:  # a dry run: the user is made first, service.json names its uid
        for path in service.service_paths(prefix).values():
            click.echo(f"{path}: would be written for the decision service, once {name} is made")
        return
    if not dry_run:
        os.makedirs(os.path.dirname(service.service_paths(prefix)["unit"]), mode=0o755, exist_ok=True)
    for change in service.plan_service(prefix, user):
        _apply_managed(change, dry_run)
    if not dry_run:
        service.keep_environment_from_users(where, user)
        click.echo(service.start_service(prefix, user.pw_name, start))


def _remove_service(prefix: str, where: dict[str, str], dry_run: bool) -> None:
    """--no-service over the wall: the service stopped where systemd runs, service.json and its unit
    removed, and the administrator's environment every user's hook's to read again."""
    from governor.runtime import service

    if dry_run:
        for path in service.service_paths(prefix).values():
            if os.path.exists(path):
                click.echo(f"{path}: would be removed (--no-service)")
        return
    for path in service.stop_service(prefix):
        click.echo(f"{path}: removed (--no-service)")
    service.give_environment_to_users(where)
    click.echo("the decision service is taken down: every managed hook on this machine decides with its "
               "user's own state again")  # fmt: skip


def _check_ledger(url: str, blob: dict[str, Any]) -> None:
    """The Redis every managed hook will keep its counts on: a URL it cannot use is refused, one that
    does not answer now is said (it may be started later; until then each hook fails as on_error says)."""
    from governor.engine.ledger import LedgerError
    from governor.engine.redis_ledger import masked
    from governor.engine.stores import open_ledger

    if not url.startswith(("redis://", "rediss://")):
        raise click.BadParameter(f"{masked(url)} is no Redis URL (redis://[user:password@]host:port/db, or "
                                 "rediss://); nothing was changed", param_hint="--ledger-url")  # fmt: skip
    import importlib.util
    import tempfile

    if importlib.util.find_spec("redis") is None:
        raise click.ClickException(f"the ledger on Redis needs redis-py in the governor's environment "
                                   f"({install_extra('redis')}); nothing was changed")  # fmt: skip
    settings = blob["policy"]["ledger"]
    try:
        with tempfile.TemporaryDirectory() as scratch:
            ledger = open_ledger(scratch, settings["busy_timeout_ms"], url, settings["retention_days"])
            try:
                ok, found = ledger.check()
            finally:
                ledger.close()
    except (LedgerError, OSError) as err:
        click.echo(f"warning: {masked(url)} does not answer now ({err}); every managed hook will use it", err=True)
        return
    if not ok:
        click.echo(f"warning: {masked(url)}: {found}", err=True)


def _apply_managed(change: Change, dry_run: bool) -> None:
    new = not os.path.exists(change.path)
    apply(change, dry_run, click.echo)
    if not dry_run and new and change.after is not None:
        os.chmod(change.path, 0o644)  # every user's hook reads it, whatever the umask


def _uninstall_managed(harness: str, root: str | None, dry_run: bool) -> int:
    from governor.harnesses import managed as shared

    layout, setup = _managed(harness)
    prefix = _managed_prefix(layout, root)
    record = layout.read_record(prefix)
    try:
        for change in layout.plan_uninstall(prefix, setup.is_ours):
            apply(change, dry_run, click.echo)
    except (SettingsError, OSError) as err:
        raise click.ClickException(str(err)) from err
    if not dry_run and not shared.others_installed(layout.paths(prefix)):
        from governor.runtime import service

        for path in service.stop_service(prefix):
            click.echo(f"{path}: removed")
    if not dry_run:
        for table in layout.remove_tables(prefix, record):
            click.echo(f"{table}: removed")
        for folder in layout.remove_folders(prefix, record):
            click.echo(f"{folder}: removed (the install made it)")
    return 0
