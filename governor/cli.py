"""The `memory-governor` command.

`memory-governor hook <harness>` runs on every governed tool call, so it is dispatched here
before click (and everything the other commands need) is imported.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) in (2, 3) and args[0] == "hook" and not any(a.startswith("-") for a in args[1:]):
        from governor.runtime.hook import run  # `hook <harness> [<Event>]`

        return int(run(args[1], event=args[2] if len(args) == 3 else None))
    if args[:2] == ["hook", "--describe"] and len(args) <= 3:  # as entry.py --describe (a project's launcher)
        import json
        import os

        from governor.runtime.client import describe

        print(json.dumps(describe(os.environ, args[2] if len(args) == 3 else os.getcwd())))
        return 0
    _count_quickly()
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


def _count_quickly() -> None:
    """A command counts as a hook deciding alone does: with the tokenizer table in the state
    directory's cache (built there by the first command or hook that needs it), exact, loaded in
    milliseconds instead of tiktoken's second (governor.engine.tokens.load_quickly). The long-lived
    ones (serve, proxy) move to tiktoken once it has loaded on a thread (load_fully). Only in a
    state directory that is the user's own; as root, only in one no one else can write to (a
    command run with sudo and a user's HOME counts with tiktoken and reads no table there)."""
    import os

    from governor.engine.tokens import load_quickly
    from governor.state import cache_dir, state_dir

    state = state_dir(os.environ)
    if os.geteuid() == 0:  # an administrator's command (sudo may keep a user's HOME): root's folders only
        from governor.policy.managed import ownership_problems

        there = state
        while not os.path.lexists(there) and os.path.dirname(there) != there:
            there = os.path.dirname(there)
        if ownership_problems([there]):
            return
    else:
        try:
            if os.stat(state).st_uid != os.geteuid():
                return
        except OSError:
            pass  # none yet: this user's command makes it
    load_quickly(cache_dir(os.environ))


if __name__ == "__main__":
    raise SystemExit(main())
