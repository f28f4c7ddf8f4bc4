"""One event being decided (Case) and what a decision needs from outside it (World).

Shared by the modules that decide each kind of event (governor.engine.prompt, pre_tool,
post_tool); governor.engine.decide is the one entry.

Hot path: standard library only.
"""

from __future__ import annotations

import time

from governor.engine import events as ev
from governor.engine.ledger import key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from governor.engine.events import Decision, Event
    from governor.engine.ledger import Ledger
    from governor.engine.rules import CompiledPolicy

GOVERNOR_ROLE = "governor"  # text the governor itself adds to the model's context
FINGERPRINT_WHOLE = 1 << 20  # characters of a text fingerprinted whole in the audit trail


class DecisionTimeout(Exception):
    """A decision ran past its deadline: the policy's on_error applies to this call only."""


class PartsUncounted(Exception):
    """Inside the write lock, a trim needs what each entry of a result costs, which was not
    counted before the lock (most results fit whole): the transaction is rolled back, the
    parts are counted outside it, and the event is decided again (governor.engine.decide)."""


class Lineage:
    """Where an event's process stands: `own`, the key of the process the session runs in (None
    when none could be told); `above`, the keys of the processes above it, nearest first; `marker`,
    the governor's marker from the environment (a live process's key), if any. A key names one
    process for its lifetime on one boot (the runtime's governor.runtime.lineage makes them)."""

    __slots__ = ("above", "marker", "own")

    def __init__(self, own: str | None = None, above: tuple[str, ...] = (), marker: str | None = None) -> None:
        self.own = own
        self.above = above
        self.marker = marker

    def candidates(self) -> list[str]:
        """The processes a parent session may run in, the nearest first: ancestors, then the marker."""
        out = [key for key in self.above if key != self.own]
        if self.marker and self.marker != self.own and self.marker not in out:
            out.append(self.marker)
        return out


class World:
    """What a decision needs from outside the event: the time, the project, the folders where
    the harness keeps subagent definitions (which may declare an access tier), and the
    deadline, in this thread's CPU seconds (so a busy machine never trips it; only work does).

    `user`: who the call is for, as the per-user window is keyed (governor.engine.window): the
    runtime's name for the caller's OS user (`<uid>@<host>`), never something the event says.
    `lineage`: asked once per decision, where the event's process stands among governed
    sessions (`Lineage`, governor.engine.nesting), or None where the runtime cannot tell.
    `env`: the environment the harness runs its tools with (None: this process's)."""

    __slots__ = ("agent_dirs", "deadline", "env", "lineage", "now", "project", "user")

    def __init__(self, now: float, project: str, agent_dirs: list[str] | None = None,
                 deadline: float | None = None, user: str = "",
                 lineage: Callable[[], Lineage | None] | None = None,
                 env: Mapping[str, str] | None = None) -> None:  # fmt: skip
        self.now = now
        self.project = project
        self.agent_dirs = agent_dirs or []
        self.deadline = deadline
        self.user = user
        self.lineage = lineage
        self.env = env

    def check(self) -> None:
        """Between the slow steps of a decision: stop once its CPU time is spent."""
        if self.deadline is not None and time.thread_time() > self.deadline:
            raise DecisionTimeout("the decision ran past its deadline")


class Case:
    """One event being decided: its ids as ledger keys, and the turn it belongs to."""

    __slots__ = ("agent", "event", "ledger", "nested", "notices", "policy", "prepared", "seq", "session", "started",
                 "turn", "window", "world")  # fmt: skip

    def __init__(self, event: Event, policy: CompiledPolicy, ledger: Ledger, world: World) -> None:
        self.event = event
        self.policy = policy
        self.ledger = ledger
        self.world = world
        self.session = key(event.session_id)
        self.agent = (key(event.agent_id) if event.agent_id else "", event.agent_type or "")
        self.turn = ""
        self.seq = 0
        self.prepared: dict[str, Any] = {}  # work done before the transaction (see _prepare)
        self.notices: list[str] = []  # for the user, once per session (Decision.notices)
        self.started = time.perf_counter()  # the audit row says how long the decision took
        # Started under a governed session and counted in it (governor.engine.nesting): the ledger key of
        # this run of it, whose turn is fixed at its first event; "" for any other event.
        self.nested = ""
        self.window = ""  # the ledger key of the caller's window, when this event is counted in it

    def enter_turn(self, new: bool = False) -> None:
        """The turn this event counts in: the harness's turn id where it sends one, else the session's
        current turn (`new`: a prompt starts the next). A subagent's event without a turn id, and every
        event of a nested session, counts in the turn fixed for it when it was first seen (a subagent:
        the turn that dispatched it; Ledger.agent_turn), not in one made current later: a prompt the
        model sends itself moves nothing for an agent already started, nor for one it starts after."""
        event, ledger, now = self.event, self.ledger, self.world.now
        if self.nested:
            self.turn, self.seq = ledger.agent_turn(self.session, self.nested, now, dispatched=False)
        elif event.agent_id and not event.turn_id and not event.agent_unknown:
            self.turn, self.seq = ledger.agent_turn(self.session, self.agent[0], now)
        else:
            self.turn, self.seq = ledger.turn(self.session, key(event.turn_id) if event.turn_id else None, now, new=new)

    def record(self, decision: Decision, role: str = "", call_id: str | None = None, **tokens: int) -> None:
        """The decision's audit row. `call_id`: the ledger id of the tool call it decided, which
        joins a call's before and after rows (telemetry counts each call once, at its last row)."""
        event = self.event
        tool = f"{event.server}/{event.tool}" if event.server else event.tool_name
        self.ledger.record(
            {
                "ts": self.world.now,
                "session": self.session,
                "turn": self.turn,
                "agent_id": self.agent[0],
                "agent_type": self.agent[1],
                "event": event.kind,
                "tool": tool,
                "role": role,
                "decision": decision.kind if decision.kind != ev.NONE else "warn" if decision.user_message else "allow",
                "code": decision.code,
                "mode": self.policy.mode,
                "policy": self.policy.digest[:16],
                "tokens_counted": tokens.get("counted", 0),
                "tokens_delivered": tokens.get("delivered", 0),
                "tokens_saved": tokens.get("saved", 0),
                "tokens_deduped": tokens.get("deduped", 0),
                "detail": self.prepared.get("detail", ""),
                "harness": event.harness,
                "memory_need": self._need() if self.turn else "",
                "duration_ms": round((time.perf_counter() - self.started) * 1000, 3),
                "call_id": call_id or "",
                "known_names": self.policy.known_names(
                    event.server, event.tool if event.server else event.tool_name, self.agent[1]
                ),
                "user": self.world.user,
            }
        )

    def _need(self) -> str:
        """This turn's memory-need class, read once per decision (governor.engine.budgets keeps it)."""
        if "need" not in self.prepared:
            self.prepared["need"] = self.ledger.memory_need(self.session, self.turn)
        return self.prepared["need"] or ""

    def detail(self) -> str:
        """What the event carried, as a size and a fingerprint; the text itself only if the policy opts in."""
        event = self.event
        if event.kind == ev.PROMPT:
            text = event.prompt or ""
        elif event.kind == ev.POST_TOOL:
            text = event.tool_result or ""
        elif event.kind == ev.PRE_TOOL:
            from governor import jsonio

            text = jsonio.dumps(event.tool_input, ensure_ascii=False, sort_keys=True)
        else:
            return ""
        if self.policy.data["ledger"]["record_contents"]:
            return text[:65536]
        from zlib import crc32

        if len(text) > FINGERPRINT_WHOLE:  # a huge text: its length and its ends (bounded work)
            ends = (text[: FINGERPRINT_WHOLE // 2] + text[-FINGERPRINT_WHOLE // 2 :]).encode("utf-8", "surrogatepass")
            return f"{len(text)} chars crc32(ends):{crc32(ends):08x}"
        raw = text.encode("utf-8", "surrogatepass")
        return f"{len(raw)} bytes crc32:{crc32(raw):08x}"

    def new_call_id(self) -> str:
        """This call's ledger id, before it runs: the harness's id, else one per call by key."""
        event = self.event
        if event.call_id:
            return key(event.call_id)
        if event.call_key:
            return self.ledger.keyed_call(self.session, key(event.call_key))
        return f"anon:{self.world.now}:{id(event)}"

    def tier(self, agent_type: str | None) -> str:
        """The access tier of a subagent of `agent_type`; a declaration held back is said once."""
        from governor.engine.tiers import tier_of

        tier, source = tier_of(agent_type, self.policy.data["subagents"], self.world.agent_dirs,
                               self.policy.accepted_at)  # fmt: skip
        if source.startswith("held:"):
            self.notices.append(
                f"memory-governor: {source[5:]} was changed since the policy was last accepted and declares a wider "
                f"memory tier for '{agent_type}'; it is held back ({tier} applies). If you made it, run "
                "`memory-governor policy accept`."
            )
        return tier

    def known_call_id(self) -> str | None:
        """The ledger id of the call this result or failure belongs to, if it was seen before."""
        event = self.event
        if event.call_id:
            return key(event.call_id)
        if event.call_key:
            return self.ledger.pending_by_key(self.session, key(event.call_key), self.turn)
        return None

    def parts(self) -> tuple[list[int], int]:
        """What each entry of the result costs and what its frame costs (what is kept whatever
        is held back), counted before the lock; PartsUncounted when they were not."""
        costs = self.prepared.get("costs")
        if costs is None:
            raise PartsUncounted
        return costs, self.prepared["frame"]

    def text_tokens(self, name: str) -> int:
        return int(self.policy.blob["index"]["text_tokens"].get(name, 0))

    def spec(self) -> dict[str, Any] | None:
        """The policy's entry for the governed tool this event names, None for any other tool."""
        event = self.event
        if event.server is None or event.tool is None:
            return None
        return self.policy.tool(event.server, event.tool)

    def limit(self, name: str) -> tuple[int, str]:
        """A per-turn limit (value, enforce) for this turn: its memory-need class's own, else the turn's."""
        from governor.engine.budgets import turn_limit

        return turn_limit(self, name)

    def add_context(self, names: list[str]) -> int:
        """Count lines the governor adds to the model's context against the turn's budget."""
        tokens = sum(self.text_tokens(name) for name in names)
        call_id = f"governor:{self.event.kind}:{self.turn}:{self.world.now}"
        self.ledger.add_committed(
            self.session, self.turn, call_id, GOVERNOR_ROLE, "", self.agent, tokens, self.world.now
        )
        return tokens
