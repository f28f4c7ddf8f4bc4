"""When the governor cannot decide a hook event: what the call gets, and how the user is told.

The governor's own failure (a bug, no valid policy, input the harness sent that cannot be read)
gets the policy's `on_error`. A failure a process running as the user can cause (`user_caused`:
the ledger or the state made unusable, a lock held, a Redis stopped or paused, a decision made
slow on purpose, an input too large to read in bounds, a hook that did not finish in time) never opens the gate: the governed call is refused, and so
is a call the policy's routes would refuse (checked without the ledger). Either way the failure is
said: on stderr, in the state directory's errors.log (`log_error`), and once per session to the
user (`first_time`, which the runner's other notices use too).

Imported only when a decision fails or there is something to tell the user.
"""

from __future__ import annotations

import os
import time

from governor.engine import events as ev

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from governor.engine.events import Event
    from governor.engine.rules import CompiledPolicy


def user_caused(err: BaseException) -> bool:
    """Is `err` a failure a process running as the user can cause (the model's, through a shell)?
    A ledger or state file made unusable (a folder, a FIFO, no permission, a full disk, a lock held,
    a Redis paused, refused or shut down), a decision made slow on purpose, an input too large to
    read in bounds. Such a failure never opens the gate, whatever on_error says: the call is
    refused. on_error is for the governor's own failures (a bug, no valid policy, input the
    harness sent that cannot be read)."""
    from governor.engine.case import DecisionTimeout
    from governor.engine.ledger import LedgerError

    return isinstance(err, (LedgerError, OSError, DecisionTimeout, InputTooLarge, Unanswered, ServiceUnavailable))


class InputTooLarge(Exception):
    """A payload past what is read in bounded time: the model can send one (a huge argument or
    result), so it never opens the gate."""


class Unanswered(Exception):
    """The decision did not finish in wall-clock time (the hook's watchdog): something blocked it."""


class ServiceUnavailable(Exception):
    """Under the wall, the decision service gave no answer (stopped, busy with this user's other
    calls, or not there): nothing else decides, so a governed call is refused."""


def on_error(adapter: Any, name: str | None, event: Event | None, policy: CompiledPolicy | None,
             env: Mapping[str, str], err: BaseException, quiet: bool = False) -> tuple[dict[str, Any] | None, str]:  # fmt: skip
    """The governor could not decide. on_error decides for a governed memory call; say so.
    The answer for the harness (None: nothing to say), and the message for stderr.

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
    mode = policy.on_error if policy is not None else "open"  # no policy at all: nothing says closed
    contention = isinstance(err, LedgerBusy)
    holds = user_caused(err)
    governed = _governed(event, policy) or (holds and _route_refused(event, policy, env))
    # Unread input: closed applies when it names an event the harness can deny or withhold.
    deniable = event is None and adapter.refusal(name, "") is not None
    closed = (mode == "closed" or holds) and (governed or deniable)
    verdict = "denied (on_error: closed)" if closed else "let through (on_error: open)"
    if contention:
        verdict = ("refused while another process holds it (contention, not the governor's own failure: "
                   "on_error does not apply)") if closed else "not affected"  # fmt: skip
    elif isinstance(err, ServiceUnavailable):
        verdict = ("refused until the decision service answers (under this managed install nothing else "
                   "decides; ask your administrator)") if closed else "not affected"  # fmt: skip
    elif holds:
        verdict = ("refused until it can (a process running as you can cause this, so on_error does not "
                   "apply)") if closed else "not affected"  # fmt: skip
    message = f"memory-governor could not decide ({what}); memory calls are {verdict}."
    if not quiet:
        log_error(env, message)
    if closed and contention:
        answer = adapter.refusal(
            name,
            "memory-governor could not check this memory call: another process holds the ledger past its busy "
            "timeout, so it cannot be counted. Try it again in a moment, or continue without memory; the user has "
            "been told.",
        )
    elif closed and isinstance(err, ServiceUnavailable):
        answer = adapter.refusal(
            name,
            f"memory-governor's decision service did not answer for this memory call ({err}), so it is refused "
            "until it does. Continue without memory; the user has been told.",
        )
    elif closed and holds:
        answer = adapter.refusal(
            name,
            f"memory-governor could not check this memory call ({type(err).__name__}: its ledger or state cannot "
            "be used, or the check did not finish), and refuses memory calls until it can. Continue without "
            "memory; the user has been told.",
        )
    elif closed:
        answer = adapter.refusal(
            name,
            f"memory-governor could not check this memory call ({type(err).__name__}), and policy on_error=closed "
            "refuses memory calls until it can. Continue without memory; the user has been told.",
        )
    else:
        answer = None
    session = event.session_id if event is not None else "(unknown session)"
    if (quiet and closed) or (not quiet and first_time(env, session, f"error:{type(err).__name__}:{mode}")):
        answer = answer or {}
        answer["systemMessage"] = message
    return answer, message


def _route_refused(event: Event | None, policy: CompiledPolicy | None, env: Mapping[str, str]) -> bool:
    """Would the policy's routes refuse this call (a shell, file or fetch tool reaching the memory
    around its tools)? Checked without the ledger, for when it cannot be used: otherwise a model
    that made it unusable would read the memory through them unchecked. True when it cannot tell."""
    if event is None or policy is None or event.kind != ev.PRE_TOOL or _governed(event, policy):
        return False
    try:
        if event.spilled is not None:
            return any(event.spilled.startswith(f"{s}-") or f"{s}-".startswith(event.spilled) for s in policy.tools)
        if not policy.routes_for(event.tool_name):
            return False
        from governor.engine.routes import route_of
        from governor.state import URL_VARIABLE, state_dir

        return route_of(event, policy, state_dir(env), env.get(URL_VARIABLE) or "", env) is not None
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


def _governed(event: Event | None, policy: CompiledPolicy | None) -> bool:
    if event is None or event.kind not in (ev.PRE_TOOL, ev.POST_TOOL):
        return False
    if policy is not None and event.server is not None and event.tool is not None:
        return policy.tool(event.server, event.tool) is not None
    return event.server is not None  # no policy to ask: an MCP tool reached a memory hook's matcher


def first_time(env: Mapping[str, str], session_id: object, notice: str) -> bool:
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
