"""One hook invocation, decided in this process: raw harness bytes in, answer bytes out.

The same function serves the hook process and the warm server, so both decide alike.
It never raises and never prints a traceback. When it cannot decide, governor.runtime.failures
says what the call gets (on_error for the governor's own failures; a refusal for one a process
of the user's can cause) and tells the user.

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
        answer = self.answer
        neutral = getattr(self.adapter, "neutral", None)
        if neutral is not None:  # a harness that blocks a call it gets no answer for: always its one answer
            answer = neutral(self.name, answer)
        if answer is None:
            return b""
        return (jsonio.dumps(answer, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")

    def stderr(self) -> bytes:
        return "".join(f"{line}\n" for line in self.errors).encode("utf-8", "backslashreplace")


_UNREAD: Any = object()  # respond: the payload is still to be parsed from the raw bytes


def respond(harness: str, raw: bytes, env: Mapping[str, str], now: float | None = None,
            payload: Any = _UNREAD, told: tuple[str, ...] = (), loaded: Loaded | None = None,
            cwd: str | None = None, caller_uid: int | None = None, caller_pid: int | None = None,
            out: Outcome | None = None, scoped: bool = False,
            delivery: Mapping[str, Any] | None = None) -> Outcome:  # fmt: skip
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
    that watches how far the decision got (the hook's watchdog). `scoped`: one process decides for
    many users (the managed install's decision service, runtime.service): each session is the
    caller's own (its id prefixed with `caller_uid`, and so are its subagents' ids and the keys of
    the processes its lineage names), so no user can name another's session, subagent or process,
    and nothing is written where the event or the caller's environment says (no marker for the
    session's tools, no check of the user's installs).
    `delivery`: how the harness a replay plays the log of delivers a replaced result (its adapter's
    DELIVERY), over the payload's."""
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
            raise _too_large(f"the hook input is larger than {MAX_INPUT} bytes")
        if payload is _UNREAD:
            if raw.count(b",") + raw.count(b":") > MAX_VALUES:
                name = out.name = adapter.sniff_event(raw[:4096])
                raise _too_large(f"the hook input holds more than {MAX_VALUES} JSON values")
            try:
                payload = jsonio.loads(raw)
            except ValueError as err:
                name = out.name = adapter.sniff_event(raw[:4096])
                raise adapter.BadPayload(f"the hook input is not valid JSON ({err})") from None
            except RecursionError:
                name = out.name = adapter.sniff_event(raw[:4096])
                raise _too_large("the hook input is nested too deeply to read") from None
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
        if scoped:  # every id a decision looks up across sessions is the caller's uid's own
            event.session_id = f"{caller_uid}/{event.session_id}"
            if event.agent_id:
                event.agent_id = f"{caller_uid}/{event.agent_id}"
        for field, value in (delivery or {}).items():
            setattr(event, field, value)
        _anchor(event, cwd)
        out.event = event
        policy, notices = _policy(env, event, loaded)
        out.policy = policy
        notices = [*told, *notices, *_held(env, event, policy)]
        if event.kind == ev.SESSION_START and not scoped:  # a managed install's hooks are root's (doctor)
            notices = notices + _installed_changes(env, event.harness, policy.project)
        _sync_warm_server_switch(env, policy)
        route = _route_only(event, policy, env)
        if route is False or not _concerns(event, policy):
            return out
        try:
            caller = Caller(caller_uid, caller_pid, env, getattr(adapter, "STARTED_DIRECTLY", False),
                            event.twin and not getattr(adapter, "HOSTED", False), scoped)  # fmt: skip
            decision, ledger_notices = _decide(event, policy, env, adapter.AGENT_DIRS, now, caller)
        except BaseException as err:
            if not isinstance(route, dict):
                raise
            # The call takes a route whatever the ledger says: it is refused without being recorded.
            from governor.engine.routes import refusal

            _failed(out, adapter, name, event, policy, env, err)
            answer = adapter.render(name or "", refusal(route, event.tool_name or "")) or {}
            out.answer = {**(out.answer or {}), **answer}
            return out
        out.answer = adapter.render(name or "", decision)
        if event.kind == ev.SESSION_START and hasattr(adapter, "pass_marker") and not scoped:
            own = caller.lineage()
            if own is not None and own.own:  # the tools this session starts name it (governor.runtime.lineage)
                adapter.pass_marker(env, payload, own.own)
        _notify(out, event, env, notices + ledger_notices + decision.notices)
    except BaseException as err:  # the governor's own failure (an encoder's panic too): on_error decides, visibly
        _failed(out, adapter, name, event, policy, env, err)
    return out


def _too_large(what: str) -> Exception:
    from governor.runtime.failures import InputTooLarge

    return InputTooLarge(what)


def _failed(out: Outcome, adapter: Any, name: str | None, event: Event | None, policy: CompiledPolicy | None,
            env: Mapping[str, str], err: BaseException, quiet: bool = False) -> None:  # fmt: skip
    """No decision: what the call gets and what the user is told (governor.runtime.failures), under
    the policy found so far, else the one the event would be decided under."""
    from governor.runtime.failures import on_error

    if policy is None and (event is not None or not quiet):
        policy = _policy_for_errors(env, event)
    answer, message = on_error(adapter, name, event, policy, env, err, quiet)
    out.answer = answer
    out.errors.append(message)


def unanswered(harness: str, raw: bytes | None, env: Mapping[str, str], out: Outcome | None,
               seconds: float | BaseException) -> Outcome:  # fmt: skip
    """What a hook answers when its decision did not finish in `seconds` of wall-clock time
    (governor.runtime.hook.Watchdog): something blocked it, which a process running as the user
    can cause, so a governed call is refused whatever on_error says (`user_caused`), from what the
    decision had found so far (`out`: its event and policy), else from the payload read afresh.
    Nothing is logged or marked in the state directory (it may be what blocked), and the user is
    told with each refusal. `seconds` may instead be the failure itself (the decision service gave
    no answer: runtime.failures.ServiceUnavailable)."""
    from governor.runtime.failures import Unanswered

    late = Outcome()
    adapter = late.adapter = out.adapter if out is not None and out.adapter is not None else harnesses.adapter(harness)
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
    failure = seconds
    if not isinstance(failure, BaseException):
        failure = Unanswered(f"no decision within {seconds:g} s of the hook's start: something it reads or writes "
                             "blocked it")  # fmt: skip
    late.name = name
    _failed(late, adapter, name, event, policy, env, failure, quiet=True)
    return late


def _policy_for_errors(env: Mapping[str, str], event: Event | None) -> CompiledPolicy | None:
    """The policy, to learn on_error, when the failure came before it was loaded (its files are
    read without waiting: governor.state.read_regular); None when there is none to read."""
    from governor.policy import compiled
    from governor.state import state_dir

    try:
        return _policy(env, event)[0] if event is not None else compiled.load(env, None, state_dir(env))[0]
    except BaseException:
        return None


def _anchor(event: Event, cwd: str | None) -> None:
    """The event's folders made absolute against the hook's own folder: the policy, the project
    and a shell command's paths are those of the folder the hook ran in, wherever this decides."""
    for name in ("cwd", "project"):
        folder = getattr(event, name)
        if folder and not os.path.isabs(folder):
            setattr(event, name, os.path.normpath(os.path.join(cwd or os.getcwd(), folder)))


def _unsupported(out: Outcome, env: Mapping[str, str], payload: Any, harness: str, sender: str) -> None:
    """A harness with no adapter ran our hooks: answer nothing (never mis-decide it as
    `harness`), and say why on stderr always and in the error log once per session."""
    message = (
        f"memory-governor: these {harness} hooks were run by {sender}, which has no adapter here; nothing was "
        "decided. Govern it through the MCP proxy (docs/proxy.md) instead."
    )
    out.errors.append(message)
    from governor.runtime.failures import first_time, log_error

    session = payload.get("session_id") or payload.get("conversation_id") if isinstance(payload, dict) else None
    if first_time(env, session, f"foreign:{sender}"):
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
    if policy.held is None:
        return []
    from governor.runtime.failures import first_time

    if not first_time(env, event.session_id, f"held:{policy.held}"):
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

    __slots__ = ("_lineage", "direct", "env", "hosted_twin", "pid", "scoped", "uid")

    def __init__(self, uid: int | None, pid: int | None, env: Mapping[str, str], direct: bool,
                 hosted_twin: bool, scoped: bool = False) -> None:  # fmt: skip
        self.uid = os.getuid() if uid is None else uid
        self.pid = os.getpid() if pid is None else pid
        self.env, self.direct, self.hosted_twin, self.scoped = env, direct, hosted_twin, scoped
        self._lineage: list[Any] = []

    def user(self) -> str:
        return user_name(self.uid)

    def lineage(self) -> Any:
        if not self._lineage:
            from governor.runtime.lineage import of

            found = of(self.pid, self.env, self.hosted_twin, self.direct) if self.pid > 0 else None
            if found is not None and self.scoped:  # one service, many users: each process key is its uid's
                found = scope_lineage(found, f"{self.uid}/")
            self._lineage.append(found)
        return self._lineage[0]


def scope_lineage(found: Any, scope: str) -> Any:
    """`found` with every process key in the caller's `scope`: a session another user's process
    runs (an ancestor shared with them, or a marker naming their process) is never this caller's."""
    from governor.engine.case import Lineage

    return Lineage(scope + found.own if found.own else None, tuple(scope + k for k in found.above),
                   scope + found.marker if found.marker else None)  # fmt: skip


def user_name(uid: int) -> str:
    """Whose window a call counts in (governor.engine.window): the OS user at this host. A uid names
    someone only on its own host, and a name from the environment or the user's files is the model's
    to change (each scrubbed session would get a window of its own), so neither is used."""
    return f"{uid}@{os.uname().nodename}"


def _route_only(event: Event, policy: CompiledPolicy, env: Mapping[str, str]) -> dict[str, Any] | bool | None:
    """For a call that concerns the governor only as a possible route around the memory's tools (a
    shell command, a file tool): the route it takes, or False when it takes none (nothing to decide
    or count, so no ledger is opened). None for any other event."""
    if event.kind != ev.PRE_TOOL or event.spilled is not None or event.dispatches is not None:
        return None
    if event.tool_name in policy.data["briefing"]["dispatch_tools"] or not policy.routes_for(event.tool_name):
        return None
    if event.server is not None and event.tool is not None and policy.tool(event.server, event.tool) is not None:
        return None
    from governor.engine.routes import route_of
    from governor.state import URL_VARIABLE, state_dir

    return route_of(event, policy, state_dir(env), env.get(URL_VARIABLE) or "", env) or False


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
                      caller.user() if caller else "", caller.lineage if caller and now is None else None,
                      env)  # fmt: skip
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
        from governor.runtime.failures import first_time

        out.errors.append(notice)
        if first_time(env, event.session_id, notice):
            answer = out.answer or {}
            message = answer.get("systemMessage")
            answer["systemMessage"] = f"{message}\n{notice}" if message else notice
            out.answer = answer
