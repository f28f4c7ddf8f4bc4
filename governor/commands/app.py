"""The command group. Each command lives in its own module under governor/commands."""

from __future__ import annotations

import click

from governor import __version__


def _managed_root(_ctx: click.Context, _param: click.Parameter, value: str) -> None:
    if value == "/":
        return  # where it looks already
    from governor.harnesses.claude_code import managed

    managed.ROOT = value


# Each command's module is imported when that command runs (or `--help` lists them all): a command
# that needs no policy model (`--version`, classify, count, serve, status) never loads pydantic.
COMMANDS = {
    "policy": ("policy", "group"),
    "install": ("install", "install"),
    "uninstall": ("install", "uninstall"),
    "serve": ("serve", "command"),
    "service": ("service", "group"),
    "proxy": ("proxy", "command"),
    "classify": ("classify", "command"),
    "count": ("tokens", "count"),
    "brief": ("tokens", "brief"),
    "demo": ("demo", "command"),
    "doctor": ("doctor", "command"),
    "harnesses": ("harnesses", "command"),
    "report": ("review", "report"),
    "replay": ("review", "replay"),
    "test": ("review", "test"),
    "status": ("ledger", "status"),
    "gc": ("ledger", "gc"),
}


def _version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from governor import commit

    found = commit()
    built = ""
    if found:
        clean = found.removesuffix(".dirty")
        built = f" (commit {clean}{', with uncommitted changes' if clean != found else ''})"
    click.echo(f"memory-governor {__version__}{built}")
    ctx.exit()


class _Commands(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        from importlib import import_module

        command = getattr(import_module(f"governor.commands.{where[0]}"), where[1])
        assert isinstance(command, click.Command) and command.name == cmd_name, cmd_name
        return command


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Show the version (and the commit, for a copy built from a git checkout) and exit.")  # fmt: skip
@click.option("--managed-root", default="/", hidden=True, expose_value=False, callback=_managed_root,
              help="Where the review tools look for a managed install's /etc folders (a staging tree, a test).")  # fmt: skip
def cli() -> None:
    """Per-turn limits on what a coding agent's memory server injects into its context."""
