"""The command group. Each command lives in its own module under governor/commands."""

from __future__ import annotations

import click

from governor import __version__


def _managed_root(_ctx: click.Context, _param: click.Parameter, value: str) -> None:
    from governor.harnesses.claude_code import managed

    managed.ROOT = value


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="memory-governor")
@click.option("--managed-root", default="/", hidden=True, expose_value=False, callback=_managed_root,
              help="Where the review tools look for a managed install's /etc folders (a staging tree, a test).")  # fmt: skip
def cli() -> None:
    """Per-turn limits on what a coding agent's memory server injects into its context."""


def _register() -> None:
    from governor.commands import (
        classify,
        demo,
        doctor,
        harnesses,
        install,
        ledger,
        policy,
        proxy,
        review,
        serve,
        tokens,
    )

    cli.add_command(policy.group)
    cli.add_command(install.install)
    cli.add_command(install.uninstall)
    cli.add_command(serve.command)
    cli.add_command(proxy.command)
    cli.add_command(classify.command)
    cli.add_command(tokens.count)
    cli.add_command(tokens.brief)
    cli.add_command(demo.command)
    cli.add_command(doctor.command)
    cli.add_command(harnesses.command)
    cli.add_command(review.report)
    cli.add_command(review.replay)
    cli.add_command(review.test)
    cli.add_command(ledger.status)
    cli.add_command(ledger.gc)


_register()
