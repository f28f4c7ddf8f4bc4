"""What the engine takes in (Event) and gives back (Decision). No harness knows these shapes
but its adapter; the engine knows no harness.

Hot path: plain classes (importing `dataclasses` costs a hook ~12 ms).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Event kinds.
SESSION_START = "session_start"
PROMPT = "prompt"
PRE_TOOL = "pre_tool"
POST_TOOL = "post_tool"
TOOL_FAILED = "tool_failed"
PRE_COMPACT = "pre_compact"
SUBAGENT_START = "subagent_start"
SUBAGENT_STOP = "subagent_stop"
STOP = "stop"
KINDS = (SESSION_START, PROMPT, PRE_TOOL, POST_TOOL, TOOL_FAILED, PRE_COMPACT, SUBAGENT_START, SUBAGENT_STOP, STOP)


class Event:
    """One harness event, normalised.

    `server`/`tool` are the MCP server and tool names the adapter parsed out of the
    harness's tool name (`tool_name`); `turn_id` is the harness's own turn id when it has
    one; `agent_id` is set only for a subagent's events; `project` is the folder the session
    was started in, as the harness says (it may differ from `cwd`, which can move).

    `call_id` is the harness's own id of one tool call, the same on its before and after
    events. A harness that gives none sets `call_key` instead (`call_key(tool_name, input)`
    on both events): every call before is a new call, and a result is matched to the oldest
    pending call with its key, so identical calls in one parallel batch still count apart.

    `result_elsewhere`: the harness stored the result elsewhere and showed the model only a
    pointer to it; `tool_result` holds the result itself, and the model must get that (within
    the budget) in the pointer's place. `spilled`: this (non-memory) call reads a file the
    harness spilled a result to, named `<server>-<tool>` (or a prefix of it, for a pattern; ''
    for a log that keeps every server's results): reading it would deliver a memory result
    around its budget.

    A harness that runs each subagent as a session of its own passes the subagent's id as
    `agent_id` and, as `session_id`, the id of whoever dispatched it: the session, or another
    subagent. The ledger resolves an id it has seen as a subagent's `agent_id` to that
    subagent's session, so a subagent's calls count in the dispatching session's turn at any
    depth, and spawning subagents never opens a fresh budget.

    A subagent's events without a turn id count in the turn that dispatched it, fixed at its
    first event: the turn of the latest dispatch (a tool the policy's `briefing.dispatch_tools`
    lists, or one with `dispatches`) made since the session's current turn began, else the
    current turn (Case.enter_turn). A prompt made current later moves nothing for it.

    `agent_unknown` is set by an adapter whose harness does not say which agent made a tool
    call (a subagent's calls look like its parent's). A call before is then attributed to a
    subagent that a dispatch in this turn started and that has not finished (the most
    restrictive tier when several run), else to the main agent. A dispatch tool the policy does
    not list is named by the adapter: its events name the agent type they start in
    `dispatches`; where `agent_unknown` (with `call_key`), the before opens that window, the
    after or failure closes it.
    `prompt` is a prompt's text; at a dispatch's before-event, the brief it hands the subagent where
    the adapter names it (the argument its harness puts it in), else its `prompt` argument is read.
    `machine_made` marks a prompt the harness wrote itself, not the user: a background task
    reporting back. It is no request from the user, so it gets no memory-need advice, arms
    nothing from its text (which quotes what a model wrote), and opens no turn or budget of its
    own: its turn id joins the turn of the call that launched the task (`origin_call_id`, the
    harness's id of that call, when known), else the session's current turn. A model therefore
    cannot mint budget by launching work that reports back.

    `no_rewrite`: the harness applies no rewritten arguments (or only with an answer that also
    skips the user's own approval of the call). A clamp is then refused instead, its reason
    naming the arguments to call again with: the refused call ran nowhere and counts nothing.

    `whole_result`: the harness hands the model every result whole (no answer replaces one). A
    result over the budget is then counted whole, as the model got it, and the user is told; the
    turn's later calls see what it really cost.

    `harness`: the name of the adapter that read the event (set by the runner), for the audit trail
    and telemetry only: no rule reads it.

    `replace_in_place`: the harness gives the model a replaced result as the call's own result.
    False where it can only downgrade a replacement (to a block or an error carrying the text):
    the engine then changes a result only to hold something back (a trim, delivered-once), never
    only to shape it (snippets only). Always False with `whole_result`.

    What is not the event's to say comes through `World` (governor.engine.case): whose per-user
    window a call counts in (`World.user`, the caller's OS user as the runtime knows it, never a
    field of the payload), and where the event's process stands among governed sessions
    (`World.lineage`: a session started under a governed one is decided as part of it,
    governor.engine.nesting). An adapter sets neither.

    `context_unseen`: the harness says neither when the model's context is emptied (compaction,
    /clear) nor which agent made a call (an MCP connection). Delivered-once then never replaces
    an entry by a pointer for it: the model might no longer hold, or never have held, the entry.

    `observer`: the event comes from a second observer of the client's calls (an MCP proxy behind a
    client whose hooks may have decided the call first). It defers to a call it has seen before
    only when that is a live reservation no observer has used yet; any other repeat of an id is
    a new call to decide (the observer decides it again under an id of its own).

    `twin`: the harness may deliver this very event to two observers at once (its own settings
    hooks and a program's in-process callbacks, both seeing the same session, turn and call ids).
    The first to decide it decides; the other counts nothing and answers nothing new: a call
    already reserved passes without a second answer (one rewrite, not two), a refused one stays
    refused, a result already counted or a prompt whose turn already started is not counted again.
    """

    __slots__ = (
        "agent_id",
        "agent_type",
        "agent_unknown",
        "call_id",
        "call_key",
        "context_unseen",
        "cwd",
        "dispatches",
        "harness",
        "kind",
        "machine_made",
        "no_rewrite",
        "observer",
        "origin_call_id",
        "project",
        "prompt",
        "replace_in_place",
        "result_elsewhere",
        "server",
        "session_id",
        "source",
        "spilled",
        "tool",
        "tool_input",
        "tool_name",
        "tool_result",
        "turn_id",
        "twin",
        "whole_result",
    )

    def __init__(self, kind: str, session_id: str, **fields: Any) -> None:
        self.kind = kind
        self.session_id = session_id
        self.turn_id: str | None = fields.get("turn_id")
        self.agent_id: str | None = fields.get("agent_id")
        self.agent_type: str | None = fields.get("agent_type")
        self.tool_name: str = fields.get("tool_name") or ""
        self.server: str | None = fields.get("server")
        self.tool: str | None = fields.get("tool")
        self.tool_input: dict[str, Any] = fields.get("tool_input") or {}
        self.tool_result: str | None = fields.get("tool_result")
        self.call_id: str | None = fields.get("call_id")
        self.call_key: str | None = fields.get("call_key")
        self.agent_unknown: bool = bool(fields.get("agent_unknown"))
        self.dispatches: str | None = fields.get("dispatches")
        self.source: str | None = fields.get("source")
        self.prompt: str | None = fields.get("prompt")
        self.machine_made: bool = bool(fields.get("machine_made"))
        self.origin_call_id: str | None = fields.get("origin_call_id")
        self.context_unseen: bool = bool(fields.get("context_unseen"))
        self.observer: bool = bool(fields.get("observer"))
        self.no_rewrite: bool = bool(fields.get("no_rewrite"))
        self.whole_result: bool = bool(fields.get("whole_result"))
        self.twin: bool = bool(fields.get("twin"))
        self.cwd: str | None = fields.get("cwd")
        self.result_elsewhere: bool = bool(fields.get("result_elsewhere"))
        self.spilled: str | None = fields.get("spilled")
        self.project: str | None = fields.get("project") or self.cwd
        self.harness: str = fields.get("harness") or ""
        # A harness that hands every result whole replaces none, in place or otherwise.
        self.replace_in_place: bool = fields.get("replace_in_place", True) is not False and not self.whole_result


def call_key(tool_name: str, tool_input: Any) -> str:
    """A fingerprint of one tool call, for harnesses whose events carry no call id: the tool and
    its arguments, canonically encoded (the same call before and after gives the same key)."""
    from zlib import crc32

    from governor import jsonio

    text = jsonio.dumps([tool_name, tool_input], sort_keys=True, ensure_ascii=False, default=str)
    raw = text.encode("utf-8", "surrogatepass")
    return f"{crc32(raw):08x}{len(raw):x}"


# Decision kinds, from "no objection" to "refuse".
NONE = "none"
CONTEXT = "context"  # add a line to the model's context
REWRITE = "rewrite"  # run the call with changed arguments (a clamp)
REPLACE = "replace"  # the model gets a replacement result (a trim)
DENY = "deny"


class Decision:
    """What the harness should do.

    `reason` is written to the model (a denial's tool result: what to do instead);
    `user_message` is shown to the user; `context` is added to the model's context;
    `notices` are for the user too, once per session each (something held back, say).
    """

    __slots__ = ("code", "context", "kind", "notices", "reason", "updated_input", "updated_output", "user_message")

    def __init__(
        self,
        kind: str = NONE,
        code: str = "",
        reason: str = "",
        updated_input: dict[str, Any] | None = None,
        updated_output: str | None = None,
        context: str = "",
        user_message: str = "",
    ) -> None:
        self.kind = kind
        self.code = code
        self.reason = reason
        self.updated_input = updated_input
        self.updated_output = updated_output
        self.context = context
        self.user_message = user_message
        self.notices: list[str] = []

    def tell_user(self, message: str) -> Decision:
        self.user_message = f"{self.user_message}\n{message}" if self.user_message else message
        return self

    def __repr__(self) -> str:
        return f"Decision({self.kind!r}, code={self.code!r})"
