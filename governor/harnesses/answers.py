"""The answers a hook gives, for every adapter: the common shapes (deny with a reason, rewrite a
tool's input, replace its result, add context, a message for the user, the fail-closed refusal),
which each harness spells in its own dialect.

A harness's `Dialect` says only what is its own: its event names before and after a tool, the
field each answer goes in, which of them sit inside `hookSpecificOutput` (with the event's
name) and which at the top, the events whose context reaches the model, and how long a string
may be. Which answer a decision is, and when, is decided here, once. No objection is no output:
never an "allow" that would bypass the user's own permission rules.

Hot path: standard library only.
"""

from __future__ import annotations

from governor.engine import events as ev
from governor.engine.events import Decision

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Container
    from typing import Any

    Spelling = Callable[[Any], dict[str, Any]]

DENY, REWRITE, REPLACE, CONTEXT = "deny", "rewrite", "replace", "context"
NEST = "hookSpecificOutput"


def cap(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def action(name: str | None, decision: Decision, pre: Container[str], post: Container[str]) -> str | None:
    """Which common answer `decision` is at the harness's event `name`: DENY or REWRITE before a
    tool runs (`name` in `pre`), REPLACE after (in `post`); None where it is none of them."""
    if name in pre:
        if decision.kind == ev.DENY:
            return DENY
        if decision.kind == ev.REWRITE and decision.updated_input is not None:
            return REWRITE
    elif name in post and decision.kind == ev.REPLACE and decision.updated_output is not None:
        return REPLACE
    return None


class Dialect:
    """How one harness spells the common answers.

    `deny(reason)` (the reason already capped), `rewrite(tool_input)` and `replace(text)` give
    the fields of each answer; `nested` names the answers (and CONTEXT) whose fields go inside
    `hookSpecificOutput` with `hookEventName`, the others stand at the top of the answer;
    `context` is the field that adds context, on `context_events` only; `label(name)` is the
    `hookEventName` it writes (the event's own name, where the adapter knows it by another)."""

    __slots__ = ("context", "context_events", "label", "limit", "nested", "post", "pre", "spell")

    def __init__(self, *, pre: Container[str], post: Container[str], limit: int, context_events: Container[str],
                 deny: Spelling, rewrite: Spelling, replace: Spelling, nested: Container[str] = (),
                 context: str = "additionalContext", label: Callable[[str], str] = str) -> None:  # fmt: skip
        self.pre, self.post, self.limit, self.context_events = pre, post, limit, context_events
        self.spell = {DENY: deny, REWRITE: rewrite, REPLACE: replace}
        self.nested, self.context, self.label = nested, context, label

    def render(self, name: str, decision: Decision) -> dict[str, Any] | None:
        """The answer for hook event `name`, or None for no output (no objection)."""
        out: dict[str, Any] = {}
        inner: dict[str, Any] = {}
        act = action(name, decision, self.pre, self.post)
        if act is not None:
            value = (cap(decision.reason, self.limit) if act == DENY
                     else decision.updated_input if act == REWRITE else decision.updated_output)  # fmt: skip
            (inner if act in self.nested else out).update(self.spell[act](value))
        if decision.context and name in self.context_events:
            (inner if CONTEXT in self.nested else out)[self.context] = cap(decision.context, self.limit)
        if inner:
            out[NEST] = {"hookEventName": self.label(name), **inner}
        if decision.user_message:
            out["systemMessage"] = cap(decision.user_message, self.limit)
        return out or None

    def refusal(self, name: str | None, reason: str) -> dict[str, Any] | None:
        """A fail-closed answer when the governor cannot decide: deny a call before it runs;
        withhold a result after it ran (the model gets the reason instead)."""
        if name is not None and name in self.pre:
            return self.render(name, Decision(ev.DENY, "on_error_closed", reason))
        if name is not None and name in self.post:
            return self.render(name, Decision(ev.REPLACE, "on_error_closed", updated_output=f"[{reason}]"))
        return None


def plain(name: str, decision: Decision, instead: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The answers of a payload the governor's own code carries out, at its events `call` and
    `result` (the in-process governors, the MCP proxy): `deny` (the reason), else `instead` where
    given (what the caller does in place of a rewrite or a replacement), else `arguments` (the
    clamped arguments) or `replace` (the trimmed result text); `context` (a line for the model, at
    a call or a result) and `systemMessage` (for the user). Uncapped: no harness limits them. None
    for no objection."""
    out: dict[str, Any] = {}
    act = action(name, decision, ("call",), ("result",))
    if act == DENY:
        out["deny"] = decision.reason
    elif instead:
        out.update(instead)
    elif act == REWRITE:
        out["arguments"] = decision.updated_input
    elif act == REPLACE:
        out["replace"] = decision.updated_output
    if decision.context and name in ("call", "result"):
        out["context"] = decision.context
    if decision.user_message:
        out["systemMessage"] = decision.user_message
    return out or None


def plain_refusal(name: str | None, reason: str) -> dict[str, Any] | None:
    """The fail-closed answer in `plain`'s shape when the governor cannot decide: a call is
    refused, a result kept."""
    return {"deny": reason} if name == "call" else None


def scripted(pre: str, post: str, limit: int, context_events: Container[str], rewrite: str = "input") -> Dialect:
    """The answers of a script a host loads (OpenCode's plugin, Pi's extension, Cline's plugin),
    which applies them itself: `deny` (the reason the model gets), `rewrite` (the call's whole new
    arguments), `content` (the result's new content blocks), `context` (a line for the model),
    `systemMessage` (for the user)."""
    return Dialect(pre=(pre,), post=(post,), limit=limit, context_events=context_events,
                   deny=lambda reason: {"deny": reason}, rewrite=lambda tool_input: {rewrite: tool_input},
                   replace=lambda text: {"content": [{"type": "text", "text": text}]}, context="context")  # fmt: skip
