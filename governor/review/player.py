"""Playing a session through the governor offline: scenario tests and transcript replay.

A `Player` turns steps (a prompt, a session start, a tool call with its result) into the
exact payloads Claude Code sends and feeds them to `governor.runtime.runner.respond`, the function
the hook process runs, against a scratch state directory and a chosen policy. So a replay or
a scenario decides exactly as the live hook would.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

from governor.harnesses.transcript import Call
from governor.runtime.runner import respond

PRE, POST, FAILED = "PreToolUse", "PostToolUse", "PostToolUseFailure"


class Outcome:
    """What happened to one tool call, as the model would experience it."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self.decision = "allow"  # allow | deny | clamp | trim | warn
        self.reason = ""
        self.updated_input: dict[str, Any] | None = None
        self.delivered: str | None = None  # the text the model gets (None: nothing, the call was denied)
        self.messages: list[str] = []
        self.context = ""
        self.trimmed = False
        self.governed = True  # a tool the policy maps (set by whoever knows the policy)
        self.role: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool": self.call.tool_name,
            "call_id": self.call.call_id,
            "agent_type": self.call.agent[1] if self.call.agent else None,
            "decision": self.decision,
            "trimmed": self.trimmed,
            "reason": self.reason,
            "updated_input": self.updated_input,
        }


class Player:
    """A scratch ledger and a policy; feed it events in order.

    With `policy`, exactly that file over the shipped default (a scratch project and home, so no
    other file joins in). Without, the effective policy of the current project and user, as the
    hook would find it here. `delivery`: Event fields of the harness whose log is played
    (runner.respond)."""

    def __init__(
        self, policy: str | None = None, session_id: str = "replay", delivery: dict[str, Any] | None = None
    ) -> None:
        from governor.engine.tokens import load_quickly
        from governor.policy.content import share
        from governor.state import state_dir

        self.scratch = tempfile.mkdtemp(prefix="memory-governor-play-")
        state = os.path.join(self.scratch, "state")
        self.env = {"MEMORY_GOVERNOR_STATE_DIR": state, "MEMORY_GOVERNOR_WARM_SERVER": "off",
                    "PATH": os.environ.get("PATH", "")}  # fmt: skip
        # The caller's tokenizer tables and policies compiled by content (a scratch ledger, not a
        # scratch cache: the same files compile the same way), counted as a hook deciding alone counts.
        self.home_state = state_dir(os.environ)
        share(self.home_state, state)
        load_quickly(os.path.join(state, "cache"))
        if policy:
            self.project = os.path.join(self.scratch, "project")
            os.makedirs(self.project)
            self.env["HOME"] = os.path.join(self.scratch, "home")
            self.env["XDG_CONFIG_HOME"] = os.path.join(self.scratch, "home", ".config")
            self.env["MEMORY_GOVERNOR_POLICY"] = os.path.abspath(policy)
        else:
            self.project = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
            for name in ("HOME", "XDG_CONFIG_HOME", "CLAUDE_PROJECT_DIR", "MEMORY_GOVERNOR_POLICY"):
                if name in os.environ:
                    self.env[name] = os.environ[name]
        self.session_id = session_id
        self.delivery = delivery  # how the harness whose log is played delivers a replaced result
        self.prompt_id: str | None = None
        self.now: float | None = None  # set by a replay to the recorded time of the next event

    def close(self) -> None:
        from governor.policy.content import share

        if os.path.isdir(self.home_state):  # what this play built, for the next (never a state directory made for it)
            share(self.env["MEMORY_GOVERNOR_STATE_DIR"], self.home_state)
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> Player:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def send(self, name: str, **fields: Any) -> dict[str, Any]:
        payload = {"session_id": self.session_id, "transcript_path": os.path.join(self.scratch, "t.jsonl"),
                   "cwd": self.project, "hook_event_name": name, "permission_mode": "default", **fields}  # fmt: skip
        if self.prompt_id and "prompt_id" not in payload:
            payload["prompt_id"] = self.prompt_id
        outcome = respond("claude-code", json.dumps(payload).encode(), self.env, self.now, delivery=self.delivery)
        return outcome.answer or {}

    def start(self, source: str) -> dict[str, Any]:
        return self.send("SessionStart", source=source)

    def prompt(self, text: str, prompt_id: str) -> dict[str, Any]:
        self.prompt_id = prompt_id
        return self.send("UserPromptSubmit", prompt=text, prompt_id=prompt_id)

    def pre(self, call: Call) -> Outcome:
        out = Outcome(call)
        agent = {"agent_id": call.agent[0], "agent_type": call.agent[1]} if call.agent else {}
        answer = self.send(PRE, tool_name=call.tool_name, tool_input=call.tool_input, tool_use_id=call.call_id, **agent)
        specific = answer.get("hookSpecificOutput", {})
        if answer.get("systemMessage"):
            out.messages.append(answer["systemMessage"])
        out.context = specific.get("additionalContext", "")
        if specific.get("permissionDecision") == "deny":
            out.decision = "deny"
            out.reason = specific.get("permissionDecisionReason", "")
        elif "updatedInput" in specific:
            out.decision = "clamp"
            out.updated_input = specific["updatedInput"]
        elif answer.get("systemMessage"):
            out.decision = "warn"
        return out

    def post(self, out: Outcome, result: str | None) -> Outcome:
        call = out.call
        agent = {"agent_id": call.agent[0], "agent_type": call.agent[1]} if call.agent else {}
        tool_input = out.updated_input or call.tool_input
        if call.is_error or result is None:
            self.send(FAILED, tool_name=call.tool_name, tool_input=tool_input, tool_use_id=call.call_id,
                      error=result or "error", **agent)  # fmt: skip
            out.delivered = result
            return out
        answer = self.send(POST, tool_name=call.tool_name, tool_input=tool_input, tool_use_id=call.call_id,
                           tool_response=result, **agent)  # fmt: skip
        replaced = answer.get("hookSpecificOutput", {}).get("updatedMCPToolOutput")
        if answer.get("systemMessage"):
            out.messages.append(answer["systemMessage"])
        if replaced is not None:
            out.trimmed = True
            if out.decision == "allow":
                out.decision = "trim"
        out.delivered = replaced if replaced is not None else result
        return out

    def call(self, call: Call) -> Outcome:
        out = self.pre(call)
        if out.decision == "deny":
            return out
        return self.post(out, call.result)
