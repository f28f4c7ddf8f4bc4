"""The `memory-governor` command.

`memory-governor hook <harness>` runs on every governed tool call, so it is dispatched here
before click (and everything the other commands need) is imported.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "hook":
        from governor.runtime.entry import run

        return int(run(args[1]))
    import click

    from governor.commands.app import cli

    try:
        result = cli.main(args=args, prog_name="memory-governor", standalone_mode=False)
    except click.ClickException as err:
        err.show()
        return err.exit_code
    except click.Abort:
        click.echo("Aborted.", err=True)
        return 1
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    raise SystemExit(main())
