"""The hook process: harness JSON on stdin, one answer on stdout, exit 0, always.

Run as `memory-governor hook <harness>`, or, faster, as the installer writes it:
`<python> -I -S <package>/governor/runtime/entry.py <harness>` (isolated from the user's
environment, no site, no click), which starts `main` here; a managed install adds `--managed
<folder>` (governor.policy.managed). It asks the warm local server
first (governor.runtime.server) and decides in this process when the server is not there, so a
governed call never goes ungoverned because the fast path is down.

Whatever happens here, the process prints one JSON object or nothing and exits 0: a crash
or a non-zero exit would let the call through silently.
"""

import os
import sys

MAX_INPUT = 64 * 1024 * 1024


def _read_stdin() -> bytes:
    data = sys.stdin.buffer.read(MAX_INPUT + 1)
    return data


SAFETY_NET_SECONDS = 5.0  # CPU seconds; under the 10 s a harness waits before it kills the hook


def _arm_safety_net() -> None:
    """Deciding in this process: past SAFETY_NET_SECONDS of CPU the decision is interrupted
    (even inside a regular expression) and on_error applies to this call, so no input can
    keep a hook busy until its harness gives up on it and lets the call through unsaid.
    The engine's own deadline (runtime.decision_deadline_ms) is checked between its steps."""
    import _signal  # type: ignore[import-not-found]  # not `signal`, which builds its enums at import

    def stop(_signum: int, _frame: object) -> None:
        from governor.engine.decide import DecisionTimeout

        raise DecisionTimeout(f"the decision used more than {SAFETY_NET_SECONDS:g} s of CPU")

    _signal.signal(_signal.SIGVTALRM, stop)
    _signal.setitimer(_signal.ITIMER_VIRTUAL, SAFETY_NET_SECONDS)


def _disarm_safety_net() -> None:
    import _signal

    _signal.setitimer(_signal.ITIMER_VIRTUAL, 0)


def run(harness: str, exits: bool = False) -> int:
    """One hook event. `exits`: the process ends right after (os._exit), so the ledger is left
    open for the exit to release: closing the last connection checkpoints the WAL (an fsync)."""
    out = b""
    err = b""
    try:
        raw = _read_stdin()
        answer = None
        env = os.environ
        from governor.policy import managed

        if managed.active():  # nothing the model can set in the environment moves a managed hook
            env = managed.environment(os.environ)  # type: ignore[assignment]
        if env.get("MEMORY_GOVERNOR_WARM_SERVER", "auto") != "off":
            try:
                from governor.runtime.client import ask

                answer = ask(harness, raw, env)
            except Exception as failure:  # the fast path is down: decide here, and say why
                reason = type(failure).__name__
                err = f"memory-governor: warm server unavailable ({reason}); deciding in-process\n".encode()
                answer = None
        if answer is None:
            from governor.engine.tokens import load_quickly
            from governor.runtime.runner import respond
            from governor.state import cache_dir

            config = managed.active()
            if config:  # only the table the install wrote there: the user's state directory is theirs
                load_quickly(config, build=False)
            else:
                load_quickly(cache_dir(env))  # no tiktoken start-up for one decision
            if exits:
                from governor.runtime.runner import leave_open

                leave_open()
            client = sys.modules.get("governor.runtime.client")  # imported only when the warm path was tried
            stranger = getattr(client, "stranger", None)
            if stranger and getattr(client, "stranger_is_new", False):
                from governor.runtime.runner import log_error

                log_error(env, stranger)
            _arm_safety_net()
            outcome = respond(harness, raw, env, told=(stranger,) if stranger else ())
            _disarm_safety_net()
            out, err = outcome.stdout(), err + outcome.stderr()
            path = b"decided in this process"
        else:
            out, err = answer
            path = b"answered by the warm server"
        if env.get("MEMORY_GOVERNOR_TRACE"):
            if "governor.policy.files" in sys.modules:  # the compiler (and pydantic) loaded: a policy compiled
                err += b"memory-governor: compiled the policy\n"
            err += b"memory-governor: " + path + b"\n"
    except BaseException as failure:
        err = f"memory-governor: internal error ({type(failure).__name__}: {failure}); no decision made\n".encode(
            "utf-8", "backslashreplace"
        )
        out = b""
    try:
        if out:
            sys.stdout.buffer.write(out)
            sys.stdout.buffer.flush()
        if err:
            sys.stderr.buffer.write(err)
            sys.stderr.buffer.flush()
    except BaseException:
        pass
    return 0


def main(argv: list[str]) -> None:
    """The hook command (entry.py): `<harness> [--managed FOLDER]`, `--serve [idle seconds]` (the
    warm server, as a hook starts it: runtime.client) or `--describe [FOLDER]` (for a client inside
    a harness: OpenCode's plugin). Never returns: a hook's answer is written and flushed, then
    os._exit (no interpreter teardown, no WAL checkpoint)."""
    if argv[:1] == ["--serve"]:
        from governor.runtime.server import main as serve

        sys.exit(serve(dict(os.environ), float(argv[1]) if len(argv) > 1 else None))
    if argv[:1] == ["--describe"]:
        import json

        from governor.runtime.client import describe

        print(json.dumps(describe(os.environ, argv[1] if len(argv) > 1 else os.getcwd())))
        sys.exit(0)
    from governor.runtime import bundle

    finder = bundle.install(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if argv[1:2] == ["--managed"] and len(argv) > 2:  # the hook command a managed install writes
        from governor.policy.managed import enter

        enter(argv[2])
    code = 0
    try:
        code = run(argv[0] if argv else "claude-code", exits=True)
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)  # the answer is written: a harness reading to the end of it need not wait
        os.dup2(quiet, 2)  # for what follows
        runner = sys.modules.get("governor.runtime.runner")  # decided here (not by the warm server)
        if runner is not None:
            runner.before_exit()  # after the answer: the ledger tidied for the next hook
        bundle.refresh(finder)  # after the answer, and only when a module was imported the usual way
    finally:
        os._exit(code)  # whatever happened after the answer, the exit its harness expects
