"""The hook process: harness JSON on stdin, one answer on stdout, exit 0, always.

Run as `memory-governor hook <harness>`, or, faster, as the installer writes it:
`<python> -I -S <package>/governor/runtime/entry.py <harness>` (isolated from the user's
environment, no site, no click), which starts `main` here; a managed install adds `--managed
<folder>` (governor.policy.managed). A harness whose payload does not name its event (Antigravity)
names it in the command, `<harness> <Event>`: the hook then reads `{"event": <Event>, "payload":
<stdin>}` (governor.harnesses.payload.wrap), and a harness that blocks a call it gets no answer for
gets its adapter's `neutral` answer whatever happens here. It asks the warm local server
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


WATCHDOG_SECONDS = 8.0  # wall clock from the hook's start; under the 10 s every installer gives a hook


def _managed_config() -> str | None:
    """The managed folder this hook enforces, or None. Only `main` enters managed mode (`--managed`),
    importing governor.policy.managed to do it: a hook of an ordinary install never imports it."""
    managed = sys.modules.get("governor.policy.managed")
    return managed.active() if managed is not None else None


def _managed() -> bool:
    return bool(_managed_config())


class Watchdog:
    """Answers for the hook when its decision has not finished WATCHDOG_SECONDS after it started,
    whatever holds it up: a FIFO or a lock put where the governor reads or writes, a server that
    does not answer. The CPU safety net cannot see a wait (a blocked open() uses no CPU), so this
    is a thread on the wall clock: past the deadline it writes what `runner.unanswered` says (a
    governed call refused, and why; nothing for anything else) and ends the process, before the
    harness gives up on the hook and runs the call unsaid. Whichever of it and the hook answers
    first answers alone (`claim`)."""

    def __init__(self, harness: str) -> None:
        import _thread

        self.harness = harness
        self.raw: bytes | None = None
        self.env: object = os.environ
        self.outcome: object = None  # runner.Outcome, once the hook decides in its own process
        self.event: str | None = None  # the event the command names (`<harness> <Event>`)
        self.done = _thread.allocate_lock()
        self.done.acquire()
        self.answering = _thread.allocate_lock()
        from governor import waiting_threads

        waiting_threads.add(_thread.start_new_thread(self._watch, ()))

    def claim(self) -> bool:
        """True for the first to answer (the hook, or the watchdog); the other writes nothing."""
        return self.answering.acquire(False)

    def finish(self) -> None:
        self.done.release()

    def _watch(self) -> None:
        if self.done.acquire(timeout=WATCHDOG_SECONDS) or not self.claim():
            return
        out = err = b""
        try:
            from governor.runtime.runner import unanswered

            env = self.env
            if env is os.environ and _managed():  # behind the wall the hook kept the environment as it came
                from governor.policy.managed import environment

                env = environment(os.environ)
            late = unanswered(self.harness, self.raw, env, self.outcome, WATCHDOG_SECONDS)  # type: ignore[arg-type]
            out, err = late.stdout(), late.stderr()
        except BaseException as failure:
            err = f"memory-governor: no decision in {WATCHDOG_SECONDS:g} s ({type(failure).__name__})\n".encode()
            out = _neutral(self.harness, self.event)
        try:
            os.write(1, out)
            os.write(2, err)
        finally:
            os._exit(0)


def _neutral(harness: str, event: str | None) -> bytes:
    """The answer of a harness that blocks a call it gets no answer for (its adapter's `neutral`:
    no objection, leaving the call to the user's own review), when nothing was decided; else none."""
    try:
        from governor import harnesses

        neutral = getattr(harnesses.adapter(harness), "neutral", None)
        if neutral is None:
            return b""
        import json

        return (json.dumps(neutral(event)) + "\n").encode()
    except BaseException:
        return b""


def run(harness: str, exits: bool = False, watch: Watchdog | None = None, event: str | None = None) -> int:
    """One hook event. `exits`: the process ends right after (os._exit), so the ledger is left
    open for the exit to release: closing the last connection checkpoints the WAL (an fsync).
    `watch`: the process's watchdog, told what was read and decided as it goes. `event`: the event
    the command names, for a harness whose payload does not."""
    out = b""
    err = b""
    if watch is not None:
        watch.event = event
    try:
        raw = _read_stdin()
        if event is not None:
            from governor.harnesses.payload import wrap

            raw = wrap(event, raw)
        answer = None
        env = os.environ
        config = _managed_config()
        wall = None
        if config:
            from governor.policy import managed

            wall = managed.service(config)  # the wall: the decision service decides
            if wall is None:  # nothing the model can set in the environment moves a managed hook
                env = managed.environment(os.environ)  # type: ignore[assignment]
        if watch is not None:
            watch.raw, watch.env = raw, env
        if wall is not None:  # the service makes the hook's environment a managed one itself (runtime.service)
            from governor.policy import managed

            managed.behind_wall()
            if harness == "claude-code" and b"exceeds maximum allowed tokens. Output has been saved to" in raw:
                from governor.harnesses.claude_code import carry_spill

                raw = carry_spill(raw)  # the service cannot open a file under a private home: read here, as the user
            from governor.runtime.client import ask_service

            answer, why = ask_service(harness, raw, env, wall)
            if answer is None:  # nothing else decides: a governed call is refused, and the user told
                from governor.runtime.failures import ServiceUnavailable
                from governor.runtime.runner import unanswered

                late = unanswered(harness, raw, managed.environment(env), None, ServiceUnavailable(why))
                answer = late.stdout(), late.stderr()
        elif env.get("MEMORY_GOVERNOR_WARM_SERVER", "auto") != "off":
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

            config = _managed_config()
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
                from governor.runtime.failures import log_error

                log_error(env, stranger)
            from governor.runtime.runner import Outcome

            outcome = Outcome()
            if watch is not None:
                watch.outcome = outcome
            _arm_safety_net()
            respond(harness, raw, env, told=(stranger,) if stranger else (), out=outcome)
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
        out = _neutral(harness, event)
    if watch is not None and not watch.claim():
        import time

        time.sleep(WATCHDOG_SECONDS)  # the watchdog is answering, and ends the process
    try:
        if out:
            sys.stdout.buffer.write(out)
            sys.stdout.buffer.flush()
        if err:
            sys.stderr.buffer.write(err)
            sys.stderr.buffer.flush()
    except BaseException:
        pass
    if watch is not None:
        watch.finish()
    return 0


def main(argv: list[str]) -> None:
    """The hook command (entry.py): `<harness> [<Event>] [--managed FOLDER]`, `--serve [idle seconds]` (the
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
    harness = argv[0] if argv else "claude-code"
    rest = argv[1:]
    event = rest.pop(0) if rest and not rest[0].startswith("-") else None  # `<harness> <Event>`
    watch = Watchdog(harness)  # first: nothing after this waits past the harness's timeout unanswered
    from governor.runtime import bundle

    finder = bundle.install(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if rest[:1] == ["--managed"] and len(rest) > 1:  # the hook command a managed install writes
        from governor.policy.managed import enter

        enter(rest[1])
    code = 0
    try:
        code = run(harness, exits=True, watch=watch, event=event)
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)  # the answer is written: a harness reading to the end of it need not wait
        os.dup2(quiet, 2)  # for what follows
        runner = sys.modules.get("governor.runtime.runner")  # decided here (not by the warm server)
        if runner is not None:
            runner.before_exit()  # after the answer: the ledger tidied for the next hook
        bundle.refresh(finder)  # after the answer, and only when a module was imported the usual way
    finally:
        os._exit(code)  # whatever happened after the answer, the exit its harness expects
