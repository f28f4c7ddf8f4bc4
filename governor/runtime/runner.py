"""One hook invocation, decided in this process: raw harness bytes in, answer bytes out.

The same function serves the hook process and the warm server, so both decide alike.
It never raises and never prints a traceback. When the governor itself cannot decide (a
locked or unusable ledger, no valid policy, an internal error), a governed memory call
gets what the policy's on_error says (open: through; closed: denied), and the failure is
visible: on stderr, in the state directory's error log, and once per session to the user.
Other tools are never blocked by the governor's own failures.

Hot path: standard library only, and not `json` (governor.jsonio: no `re`).
"""

from __future__ import annotations

import os
import time

from governor import harnesses, jsonio
from governor.engine import events as ev

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from governor.engine.events import Event
    from governor.engine.rules import CompiledPolicy

    Loaded = tuple[tuple[str | None, str, object], tuple[CompiledPolicy, list[str]]]  # load_policy's answer

_kept: Any = None  # thread-local ledgers, when a long-lived process asks to keep them (keep_connections)


def keep_connections() -> None:
    """For the warm server: reuse one ledger connection per thread instead of one per decision.
    (Opening costs ~0.25 ms; closing the last connection checkpoints the WAL, ~0.6 ms.)"""
    global _kept
    import threading

    if _kept is None:  # a second call keeps the connections already open
        _kept = threading.local()


_closing = True  # leave_open: a process about to exit does not close its ledger
_left: list[Any] = []  # the ledgers left open so (before_exit)


def leave_open() -> None:
    """For a process that exits (os._exit) right after its one decision: the ledger is not closed.
    SQLite releases it with the process; closing it would checkpoint the WAL (an fsync, the
    largest part of a cold decision on a busy disk): `before_exit` does, once the WAL is long."""
    global _closing
    _closing = False


def before_exit() -> None:
    """After a leave_open process's answer is written: each ledger it left open tidies up for the
    processes after it (governor.engine.sqlite_ledger: a long WAL is checkpointed). Never raises."""
    for ledger in _left:
        try:
            ledger.tidy()
        except Exception:
            pass


def warm_up(env: Mapping[str, str], project: str) -> None:
    """For a long-lived process, before its first decisions need them: tiktoken for the policy's
    unit (where the process counts with the cached table first, load_quickly, its counter moves to
    tiktoken once loaded: governor.engine.tokens.load_fully), that table for the hooks that decide
    alone, and the memory-need model. Seconds of CPU on a busy machine: the warm server runs it on
    a thread at its start, govern() (governor.sdk.claude_agent) when it is called. Never raises: a
    decision loads what it needs, or reports why it cannot."""
    try:
        import governor.engine.decide  # noqa: F401  # the modules a decision imports, loaded here
        from governor.engine import need_model
        from governor.engine.tokens import counter, load_fully, prepare_quickly
        from governor.policy import compiled
        from governor.state import cache_dir, state_dir

        policy, _ = compiled.load(env, project, state_dir(env))
        counter(policy.unit).count("warm")
        prepare_quickly(policy.unit, cache_dir(env))
        load_fully(policy.unit)
        if policy.data["memory_needs"].get("model_threshold", 0.5) < 1:
            need_model.load()
    except Exception:
        pass


MAX_INPUT = 64 * 1024 * 1024  # a payload larger than this is not read whole
MAX_VALUES = 2_000_000  # JSON separators in one payload: more cannot be parsed in bounded time


class InputTooLarge(Exception):
    """A payload past what is read in bounded time: the model can send one (a huge argument or
    result), so it never opens the gate."""


class Outcome:
    """One decision's answer and errors, and how far it got (`adapter`, `name`, `event`, `policy`):
    what a watchdog answers with when the decision does not finish (governor.runtime.hook)."""

    __slots__ = ("adapter", "answer", "errors", "event", "name", "policy")

    def __init__(self) -> None:
        self.answer: dict[str, Any] | None = None
        self.errors: list[str] = []
        self.adapter: Any = None
        self.name: str | None = None
        self.event: Event | None = None
        self.policy: CompiledPolicy | None = None

    def stdout(self) -> bytes:
        if self.answer is None:
            return b""
        return (jsonio.dumps(self.answer, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")

    def stderr(self) -> bytes:
        return "".join(f"{line}\n" for line in self.errors).encode("utf-8", "backslashreplace")


_UNREAD: Any = object()  # respond: the payload is still to be parsed from the raw bytes


def respond(harness: str, raw: bytes, env: Mapping[str, str], now: float | None = None,
            payload: Any = _UNREAD, told: tuple[str, ...] = (), loaded: Loaded | None = None,
            cwd: str | None = None, caller_uid: int | None = None, caller_pid: int | None = None,
            out: Outcome | None = None) -> Outcome:  # fmt: skip
    """Decide one hook event. Never raises. `now` replaces the clock (replay plays recorded time).

    A long-lived caller that has parsed the event already (the MCP proxy) passes `payload`
    instead of the bytes, and gets the same decision, errors and on_error handling. `told`:
    notices the caller has for the user (a stranger on the warm server's socket), given as
    policy notices are, on stderr always and to the user once per session. `loaded`: the policy
    the caller looked up for this event a moment ago (`load_policy`), used when it was looked up
    for the event's own folder, state directory and session, else looked up again. `cwd`: the
    folder of the hook that sent the event (the warm server's callers), which a relative folder in
    the event is relative to; else this process's own.

    `caller_uid`, `caller_pid`: the OS user and process that asked, as the kernel says them (a
    server's SO_PEERCRED); None: this process's; pid 0: not known (no lineage). The user is whose
    window the call counts in (`<uid>@<host>`, governor.engine.window); the process is where the
    session's lineage is read (governor.runtime.lineage). `out`: the Outcome to fill, for a caller
    that watches how far the decision got (the hook's watchdog)."""
    out = Outcome() if out is None else out
    try:
        adapter = out.adapter = harnesses.adapter(harness)
    except harnesses.UnknownHarness as err:
        out.errors.append(f"memory-governor: {err}")
        return out
    name: str | None = None
    event: Event | None = None
    policy: CompiledPolicy | None = None
    try:
        if payload is _UNREAD and len(raw) > MAX_INPUT:
            name = out.name = adapter.sniff_event(raw[:4096])
            raise InputTooLarge(f"the hook input is larger than {MAX_INPUT} bytes")
        if payload is _UNREAD:
            if raw.count(b",") + raw.count(b":") > MAX_VALUES:
                name = out.name = adapter.sniff_event(raw[:4096])
                raise InputTooLarge(f"the hook input holds more than {MAX_VALUES} JSON values")
            try:
                payload = jsonio.loads(raw)
            except ValueError as err:
                name = adapter.sniff_event(raw[:4096])
                raise adapter.BadPayload(f"the hook input is not valid JSON ({err})") from None
            except RecursionError:
                name = out.name = adapter.sniff_event(raw[:4096])
                raise InputTooLarge("the hook input is nested too deeply to read") from None
        sender = adapter.foreign(payload, env) if hasattr(adapter, "foreign") else None
        if sender is not None:  # another harness ran this one's hooks (it reads its settings)
            if sender not in harnesses.REGISTRY:
                _unsupported(out, env, payload, harness, sender)
                return out
            adapter = out.adapter = harnesses.adapter(sender)
        name = out.name = adapter.event_name(payload)
        event = adapter.parse(payload, env)
        if event is None:
            return out  # an event this adapter does not govern
        event.harness = event.harness or adapter.NAME
        _anchor(event, cwd)
        out.event = event
        policy, notices = _policy(env, event, loaded)
        out.policy = policy
        notices = [*told, *notices, *_held(env, event, policy)]
        if event.kind == ev.SESSION_START:
            notices = notices + _installed_changes(env, event.harness, policy.project)
        _sync_warm_server_switch(env, policy)
        if not _concerns(event, policy):
            return out
        caller = Caller(caller_uid, caller_pid, env, getattr(adapter, "STARTED_DIRECTLY", False),
                        event.twin and not getattr(adapter, "HOSTED", False))  # fmt: skip
        decision, ledger_notices = _decide(event, policy, env, adapter.AGENT_DIRS, now, caller)
        out.answer = adapter.render(name or "", decision)
        if event.kind == ev.SESSION_START and hasattr(adapter, "pass_marker"):
            own = caller.lineage()
            if own is not None and own.own:  # the tools this session starts name it (governor.runtime.lineage)
                adapter.pass_marker(env, payload, own.own)
        _notify(out, event, env, notices + ledger_notices + decision.notices)
    except BaseException as err:  # the governor's own failure (an encoder's panic too): on_error decides, visibly
        _on_error(out, adapter, name, event, policy, env, err)
    return out


def _anchor(event: Event, cwd: str | None) -> None:
    """The event's folders made absolute against the hook's own folder: the policy, the project
    and a shell command's paths are those of the folder the hook ran in, wherever this decides."""
    for name in ("cwd", "project"):
        folder = getattr(event, name)
        if folder and not os.path.isabs(folder):
            setattr(event, name, os.path.normpath(os.path.join(cwd or os.getcwd(), folder)))


def unanswered(harness: str, raw: bytes | None, env: Mapping[str, str], out: Outcome | None,
               seconds: float) -> Outcome:  # fmt: skip
    """What a hook answers when its decision did not finish in `seconds` of wall-clock time
    (governor.runtime.hook.Watchdog): something blocked it, which a process running as the user
    can cause, so a governed call is refused whatever on_error says (`user_caused`), from what the
    decision had found so far (`out`: its event and policy), else from the payload read afresh.
    Nothing is logged or marked in the state directory (it may be what blocked), and the user is
    told with each refusal."""
    late = Outcome()
    adapter = out.adapter if out is not None and out.adapter is not None else harnesses.adapter(harness)
    name = out.name if out is not None else None
    event = out.event if out is not None else None
    policy = out.policy if out is not None else None
    if event is None and raw:
        try:
            payload = jsonio.loads(raw)
            name = adapter.event_name(payload)
            event = adapter.parse(payload, env)
        except BaseException:
            name = name or adapter.sniff_event(raw[:4096])
    if policy is None and event is not None:
        try:  # its files are read without waiting (governor.state.read_regular)
            policy = _policy(env, event)[0]
        except BaseException:
            pass
    failure = Unanswered(f"no decision within {seconds:g} s of the hook's start: something it reads or writes "
                         "blocked it")  # fmt: skip
    _on_error(late, adapter, name, event, policy, env, failure, quiet=True)
    return late


def _unsupported(out: Outcome, env: Mapping[str, str], payload: Any, harness: str, sender: str) -> None:
    """A harness with no adapter ran our hooks: answer nothing (never mis-decide it as
    `harness`), and say why on stderr always and in the error log once per session."""
    message = (
        f"memory-governor: these {harness} hooks were run by {sender}, which has no adapter here; nothing was "
        "decided. Govern it through the MCP proxy (docs/proxy.md) instead."
    )
    out.errors.append(message)
    session = payload.get("session_id") or payload.get("conversation_id") if isinstance(payload, dict) else None
    if _first_time(env, session, f"foreign:{sender}"):
        log_error(env, message)


def _policy(env: Mapping[str, str], event: Event, loaded: Loaded | None = None) -> tuple[CompiledPolicy, list[str]]:
    from governor.policy import compiled
    from governor.state import state_dir

    where = (harness_folder(env, event), state_dir(env), event.session_id)
    if loaded is not None and loaded[0] == where:
        return loaded[1]
    return compiled.load(env, *where)


def _held(env: Mapping[str, str], event: Event, policy: CompiledPolicy) -> list[str]:
    """A loosening held back: told once per session, on stderr too (an orchestrator's stderr is its
    author's terminal); saying whose change it is looks at git."""
    if policy.held is None or not _first_time(env, event.session_id, f"held:{policy.held}"):
        return []
    from governor.policy.acceptance import held_notice
    from governor.policy.sources import Sources
    from governor.state import state_dir

    return [held_notice(Sources(env, harness_folder(env, event), policy.project), state_dir(env), policy.held)]


def load_policy(env: Mapping[str, str], project: str | None, session: object) -> Loaded:
    """The policy a decision of `session` in folder `project` is made under, as `respond` looks it
    up (for a caller that reads it before the event: the MCP proxy), with where it was looked up."""
    from governor.policy import compiled
    from governor.state import state_dir

    where = (project_folder(env, project), state_dir(env), session)
    return where, compiled.load(env, *where)


def _installed_changes(env: Mapping[str, str], harness: str | None, project: str | None) -> list[str]:
    """At a session's start: the installed hooks of `harness` changed since install, for the user."""
    from governor.harnesses import installs
    from governor.state import default_state_dir, state_dir

    return installs.changed([state_dir(env), default_state_dir(env)], harness or "", project) if harness else []


# Set by the harness for its hooks: the folder the session runs in (the model's `cd` does not move it).
HARNESS_PROJECT_VARIABLES = ("CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR")


def harness_folder(env: Mapping[str, str], event: Event) -> str | None:
    """The folder the harness runs the session in: the policy's project is pinned from it."""
    return project_folder(env, event.project)


def project_folder(env: Mapping[str, str], project: str | None) -> str | None:
    """The harness's own folder when it sets one (HARNESS_PROJECT_VARIABLES), else `project`."""
    for name in HARNESS_PROJECT_VARIABLES:
        value = env.get(name) or ""
        if os.path.isabs(value) and os.path.isdir(value):
            return os.path.normpath(value)
    return project


_synced: tuple[Any, str] | None = None  # (policy, marker) last found in step: the proxy's per-call stat saved


def _sync_warm_server_switch(env: Mapping[str, str], policy: CompiledPolicy) -> None:
    """The thin client never reads the policy; a marker file tells it runtime.warm_server is off."""
    from governor.runtime.client import DISABLED_NAME, run_dir

    global _synced
    marker = os.path.join(run_dir(env), DISABLED_NAME)
    if _synced is not None and _synced[0] is policy and _synced[1] == marker:
        return  # a long-lived process (the proxy): this policy's marker was found in step already
    wanted = policy.data["runtime"]["warm_server"] == "off"
    if wanted == os.path.exists(marker):
        _synced = (policy, marker)
        return
    try:
        if wanted:
            from governor.state import ensure_dir, open_regular

            ensure_dir(os.path.dirname(marker))
            os.close(open_regular(marker, os.O_WRONLY | os.O_CREAT))
        else:
            os.unlink(marker)
    except OSError:
        pass


def _concerns(event: Event, policy: CompiledPolicy) -> bool:
    """Does this event need the ledger? A tool event only for a governed tool."""
    if event.kind not in (ev.PRE_TOOL, ev.POST_TOOL, ev.TOOL_FAILED):
        return True
    if event.dispatches is not None:
        return True  # starts or ends a subagent the adapter cannot otherwise tell apart
    if event.kind == ev.PRE_TOOL and event.tool_name in policy.data["briefing"]["dispatch_tools"]:
        return True
    if event.kind == ev.PRE_TOOL and (policy.routes_for(event.tool_name) or event.spilled is not None):
        return True
    return event.server is not None and event.tool is not None and policy.tool(event.server, event.tool) is not None


class Caller:
    """Who asked for a decision: the OS user whose window it counts in, and the process whose lineage
    is read (once, when the engine asks for it)."""

    __slots__ = ("_lineage", "direct", "env", "hosted_twin", "pid", "uid")

    def __init__(self, uid: int | None, pid: int | None, env: Mapping[str, str], direct: bool,
                 hosted_twin: bool) -> None:  # fmt: skip
        self.uid = os.getuid() if uid is None else uid
        self.pid = os.getpid() if pid is None else pid
        self.env, self.direct, self.hosted_twin = env, direct, hosted_twin
        self._lineage: list[Any] = []

    def user(self) -> str:
        return user_name(self.uid)

    def lineage(self) -> Any:
        if not self._lineage:
            from governor.runtime.lineage import of

            self._lineage.append(of(self.pid, self.env, self.hosted_twin, self.direct) if self.pid > 0 else None)
        return self._lineage[0]


def user_name(uid: int) -> str:
    """Whose window a call counts in (governor.engine.window): the OS user at this host. A uid names
    someone only on its own host, and a name from the environment or the user's files is the model's
    to change (each scrubbed session would get a window of its own), so neither is used."""
    return f"{uid}@{os.uname().nodename}"


def _decide(
    event: Event,
    policy: CompiledPolicy,
    env: Mapping[str, str],
    agent_dirs: tuple[str, ...],
    now: float | None = None,
    caller: Caller | None = None,
) -> tuple[Any, list[str]]:
    """The decision, and notices from the ledger (a corrupt file moved aside) for the user."""
    from governor.engine.decide import World, decide
    from governor.engine.ledger import URL_VARIABLE, LedgerCorrupt
    from governor.engine.stores import open_for
    from governor.policy.sources import project_root
    from governor.state import state_dir

    which = (state_dir(env), env.get(URL_VARIABLE) or "")
    kept = getattr(_kept, "ledgers", None) if _kept is not None else None
    if _kept is not None and kept is None:
        kept = _kept.ledgers = {}
    ledger = kept.get(which) if kept is not None else None
    if ledger is None:
        ledger = open_for(env, policy.data["ledger"])
        if kept is not None:
            kept[which] = ledger
    try:
        project = policy.project or project_root(event.project)  # the session's pinned root
        home = env.get("HOME") or ""
        folders = [os.path.join(base, rel) for base in (project, home) if base for rel in agent_dirs]
        deadline = time.thread_time() + policy.data["runtime"]["decision_deadline_ms"] / 1000
        world = World(time.time() if now is None else now, project, folders, deadline,
                      caller.user() if caller else "", caller.lineage if caller and now is None else None)  # fmt: skip
        try:
            decision = decide(event, policy, ledger, world)
        except LedgerCorrupt as err:
            ledger.recover(err)
            decision = decide(event, policy, ledger, world)
        notices = list(ledger.notices)
        ledger.notices.clear()
        return decision, notices
    except BaseException:
        if kept is not None:
            kept.pop(which, None)  # a failed connection is not reused
            ledger.close()
        raise
    finally:
        if kept is None and _closing:
            ledger.close()
        elif kept is None:
            _left.append(ledger)


def _notify(out: Outcome, event: Event, env: Mapping[str, str], notices: list[str]) -> None:
    """Policy notices (a broken policy file): on stderr always, to the user once per session."""
    for notice in notices:
        out.errors.append(notice)
        if _first_time(env, event.session_id, notice):
            answer = out.answer or {}
            message = answer.get("systemMessage")
            answer["systemMessage"] = f"{message}\n{notice}" if message else notice
            out.answer = answer


def _first_time(env: Mapping[str, str], session_id: object, notice: str) -> bool:
    """One message per session per notice, remembered in the state directory (not the ledger,
    which may be the thing that failed). True when the mark cannot be written: better twice
    than never."""
    from zlib import crc32

    from governor.state import ensure_dir, state_dir

    try:
        folder = ensure_dir(os.path.join(state_dir(env), "notices"))
        session = crc32(repr(session_id).encode("utf-8", "backslashreplace"))
        mark = f"{session:08x}-{crc32(notice.encode('utf-8', 'backslashreplace')):08x}"
        fd = os.open(os.path.join(folder, mark), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        return True
    except FileExistsError:
        return False
    except OSError:
        return True


def user_caused(err: BaseException) -> bool:
    """Is `err` a failure a process running as the user can cause (the model's, through a shell)?
    A ledger or state file made unusable (a folder, a FIFO, no permission, a full disk, a lock held,
    a Redis paused, refused or shut down), a decision made slow on purpose, an input too large to
    read in bounds. Such a failure never opens the gate, whatever on_error says: the call is
    refused. on_error is for the governor's own failures (a bug, no valid policy, input the
    harness sent that cannot be read)."""
    from governor.engine.case import DecisionTimeout
    from governor.engine.ledger import LedgerError

    return isinstance(err, (LedgerError, OSError, DecisionTimeout, InputTooLarge, Unanswered))


class Unanswered(Exception):
    """The decision did not finish in wall-clock time (the hook's watchdog): something blocked it."""


def _on_error(out: Outcome, adapter: Any, name: str | None, event: Event | None, policy: CompiledPolicy | None,
              env: Mapping[str, str], err: BaseException, quiet: bool = False) -> None:  # fmt: skip
    """The governor could not decide. on_error decides for a governed memory call; say so.

    A failure a process running as the user can cause (`user_caused`: a ledger held, made unusable or
    unreachable, a decision made slow, an input too large) never opens the gate, whatever
    on_error says: the governed call is refused, and so is a call the policy's routes would refuse
    (checked here without the ledger), and the call may be tried again once it is mended.
    `quiet`: touch nothing in the state directory (the watchdog, when it may be what blocked)."""
    from governor.engine.ledger import LedgerBusy
    from governor.policy.compiled import PolicyUnavailable

    bad_input = isinstance(err, adapter.BadPayload)
    what = f"the hook input was rejected: {err}" if bad_input else f"{type(err).__name__}: {err}"
    if isinstance(err, PolicyUnavailable):
        what = f"no valid policy: {err}"
    elif "I/O error" in str(err) or "disk is full" in str(err) or "readonly" in str(err) or "read-only" in str(err):
        what += _disk_hint(env)
    if policy is None and not quiet:
        policy = _policy_for_errors(env, event)
    on_error = policy.on_error if policy is not None else "open"  # no policy at all: nothing says closed
    contention = isinstance(err, LedgerBusy)
    holds = user_caused(err)
    governed = _governed(event, policy) or (holds and _route_refused(event, policy, env))
    # Unread input: closed applies when it names an event the harness can deny or withhold.
    deniable = event is None and adapter.refusal(name, "") is not None
    closed = (on_error == "closed" or holds) and (governed or deniable)
    verdict = "denied (on_error: closed)" if closed else "let through (on_error: open)"
    if contention:
        verdict = ("refused while another process holds it (contention, not the governor's own failure: "
                   "on_error does not apply)") if closed else "not affected"  # fmt: skip
    elif holds:
        verdict = ("refused until it can (a process running as you can cause this, so on_error does not "
                   "apply)") if closed else "not affected"  # fmt: skip
    message = f"memory-governor could not decide ({what}); memory calls are {verdict}."
    out.errors.append(message)
    if not quiet:
        log_error(env, message)
    if closed and contention:
        out.answer = adapter.refusal(
            name,
            "memory-governor could not check this memory call: another process holds the ledger past its busy "
            "timeout, so it cannot be counted. Try it again in a moment, or continue without memory; the user has "
            "been told.",
        )
    elif closed and holds:
        out.answer = adapter.refusal(
            name,
            f"memory-governor could not check this memory call ({type(err).__name__}: its ledger or state cannot "
            "be used, or the check did not finish), and refuses memory calls until it can. Continue without "
            "memory; the user has been told.",
        )
    elif closed:
        out.answer = adapter.refusal(
            name,
            f"memory-governor could not check this memory call ({type(err).__name__}), and policy on_error=closed "
            "refuses memory calls until it can. Continue without memory; the user has been told.",
        )
    else:
        out.answer = None
    session = event.session_id if event is not None else "(unknown session)"
    if (quiet and closed) or (not quiet and _first_time(env, session, f"error:{type(err).__name__}:{on_error}")):
        answer = out.answer or {}
        answer["systemMessage"] = message
        out.answer = answer


def _route_refused(event: Event | None, policy: CompiledPolicy | None, env: Mapping[str, str]) -> bool:
    """Would the policy's routes refuse this call (a shell, file or fetch tool reaching the memory
    around its tools)? Checked without the ledger, for when it cannot be used: otherwise a model
    that made it unusable would read the memory through them unchecked. True when it cannot tell."""
    if event is None or policy is None or event.kind != ev.PRE_TOOL or _governed(event, policy):
        return False
    try:
        if event.spilled is not None:
            return any(event.spilled.startswith(f"{s}-") or f"{s}-".startswith(event.spilled) for s in policy.tools)
        routes = policy.routes_for(event.tool_name)
        if not routes:
            return False
        from governor.engine.ledger import DB_NAME, URL_VARIABLE
        from governor.engine.screening import route_taken
        from governor.state import state_dir

        state = state_dir(env)
        url = env.get(URL_VARIABLE)
        if url:
            from governor.engine.redis_ledger import masked

            where = masked(url)  # as Ledger.where() says it
        else:
            where = os.path.join(state, DB_NAME)
        return route_taken(event.tool_input, routes, state, where, event.cwd or event.project or "") is not None
    except Exception:
        return True


def _disk_hint(env: Mapping[str, str]) -> str:
    """Why a write failed, when the disk can tell: full, or mounted read-only."""
    from governor.state import state_dir

    try:
        stats = os.statvfs(state_dir(env))
    except OSError:
        return ""
    if stats.f_flag & os.ST_RDONLY:
        return "; the state directory is on a read-only file system"
    free = stats.f_bavail * stats.f_frsize
    return f"; the state directory's disk is full ({free} bytes free)" if free < 1024 * 1024 else ""


def _policy_for_errors(env: Mapping[str, str], event: Event | None) -> CompiledPolicy | None:
    """The policy, to learn on_error, when the failure came before it was loaded (bad input)."""
    from governor.policy import compiled
    from governor.state import state_dir

    try:
        if event is None:
            return compiled.load(env, None, state_dir(env))[0]
        return compiled.load(env, harness_folder(env, event), state_dir(env), event.session_id)[0]
    except BaseException:
        return None


def _governed(event: Event | None, policy: CompiledPolicy | None) -> bool:
    if event is None or event.kind not in (ev.PRE_TOOL, ev.POST_TOOL):
        return False
    if policy is not None and event.server is not None and event.tool is not None:
        return policy.tool(event.server, event.tool) is not None
    return event.server is not None  # no policy to ask: an MCP tool reached a memory hook's matcher


def log_error(env: Mapping[str, str], message: str) -> None:
    """A line in the state directory's errors.log (bounded: the newest half kept past 1 MB). A link,
    a FIFO or anything but a regular file there is left alone, and nothing here waits on one."""
    from governor.state import ensure_dir, open_regular, read_regular, state_dir, write_atomic

    try:
        folder = ensure_dir(state_dir(env))
        path = os.path.join(folder, "errors.log")
        line = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + " " + message.replace("\n", " ") + "\n"
        fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line[:2000].encode("utf-8", "backslashreplace"))
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > 1_000_000:  # bounded: keep the newest half
            write_atomic(path, read_regular(path)[-500_000:])
    except OSError:
        pass
