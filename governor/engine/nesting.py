"""Sessions started under a governed session: found, and charged to that session's turn.

A model with a shell can start another agent (a harness's headless mode, an SDK's binary, a
run detached with `setsid`): a new session, with turns of its own and a prompt the model wrote. Such a session is *nested*, and every event of it is decided as part of the
session it was started under:

- its calls count in the turn that session had current when this run of it (its process) was
  first seen, fixed then (Case.enter_turn: its own turn ids are not read, none of its events
  ever starts a turn, and a prompt made current later moves nothing for it), so starting
  sessions never buys a fresh budget;
- its prompt is no request from the user: it is decided as a machine-made prompt (no advice,
  nothing armed from its text, so `explicit_user_recall` is never armed by it), and its session
  start arms no resume or compaction trigger;
- its own conversation is a context of its own for delivered-once (its model never saw what
  the parent's was shown), and its audit rows name it as the agent.

How it is recognised (`Lineage`, given by the runtime through `World.lineage`; the engine
never reads processes itself): each governed session's *own process* (the harness process
its hooks run under, the program whose callbacks decide, the MCP client of a proxy) is
recorded, at each session start and user prompt, as running that session. An event whose
process has a recorded process among its ancestors, or whose environment carries the
governor's marker (the recorded process key of the session it was started under, which the
harness passes to its tools' environment), is nested under that session. Ancestry holds when
the variable is unset or the environment scrubbed; the marker holds when the process is
detached from its parent (`setsid -f`); the per-user window (governor.engine.window) is the
backstop for a session that loses both.

What a model can forge here only ever charges more to an existing turn: a marker (or a
recorded process) names a session whose turn then pays, and a nested session can arm
nothing. The runtime keeps a marker only while the process it names is alive.

Hot path: standard library only.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.case import Lineage as Lineage  # the runtime builds it (governor.runtime.lineage)
from governor.engine.ledger import key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from governor.engine.case import Case


MARKER = "MEMORY_GOVERNOR_PARENT"  # the variable a harness's tools inherit, naming the session's own process


# Events that record the session's own process: a session's start and each of its user's prompts.
RECORDED = (ev.SESSION_START, ev.PROMPT)


def place(case: Case) -> None:
    """Before the lock: the session this event counts in. A subagent that is a session of its own
    counts in its dispatcher's (the ledger's links); an event under a governed session's process
    counts in that session, as nested. Sets `case.session`, and for a nested session `case.nested`
    (the ledger key of this run of it, by its own process) and `case.agent` (its own session, as
    the agent whose context it is)."""
    event, ledger = case.event, case.ledger
    if event.agent_id:  # a subagent's own session id counts as the session that dispatched it
        case.session = ledger.dispatching_session(case.session)  # a link once made never changes
    if case.world.lineage is None or not _counted(case):
        return
    lineage = case.world.lineage()
    if lineage is None:
        return
    if lineage.own and event.kind in RECORDED and not event.agent_id:
        case.prepared["own_process"] = lineage.own
    candidates = lineage.candidates()
    found = ledger.sessions_of(candidates) if candidates else {}
    parent = next((found[key] for key in candidates if key in found), None)  # recorded as the session it counts in
    if parent is None:
        return
    case.nested = key(f"nested:{lineage.own}") if lineage.own else case.agent[0] or key(f"nested:{case.session}")
    if not event.agent_id:  # its conversation is a context of its own (a resume of the parent's id too)
        case.agent = (case.session if parent != case.session else key(f"nested:{lineage.own}"), "")
    case.session = parent


def _counted(case: Case) -> bool:
    """Does where this event counts matter? Not for a tool that is neither the memory's nor a dispatch
    (a shell command checked against the routes: its refusal counts in no turn's budget)."""
    event = case.event
    if event.kind not in (ev.PRE_TOOL, ev.POST_TOOL, ev.TOOL_FAILED) or event.dispatches is not None:
        return True
    return case.spec() is not None or event.tool_name in case.policy.data["briefing"]["dispatch_tools"]


def record(case: Case) -> None:
    """Inside the lock: the session's own process runs the session this event counts in."""
    own = case.prepared.get("own_process")
    if own:
        case.ledger.remember_process(case.session, own, case.world.now)
