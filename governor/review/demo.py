"""`memory-governor demo`: a short scripted session played through the real hook process.

It runs on the shipped default policy only (a scratch project, HOME and state directory),
feeds the Claude Code hook the same JSON Claude Code sends, with Engram v1 results, and
shows turn by turn what was allowed, clamped, denied, trimmed, deduped or withheld, and how many tokens of
memory reached the model against the turn's budget.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from governor.harnesses import ENTRY


def _hit(n: int, ident: int, kind: str, title: str, body: str, date: str) -> str:
    preview = body if len(body) <= 300 else body[:300] + "..."
    return f"[{n}] #{ident} ({kind}) — {title}\n    {preview}\n    {date} | project: shop | scope: project\n\n"


AUTH_BODY = (
    "**What**: access tokens are JWTs signed with RS256, valid 15 minutes; refresh tokens are opaque, stored "
    "hashed, valid 7 days and rotated on every use. **Why**: sessions did not scale across regions. **Where**: "
    "src/auth/tokens.ts, src/auth/refresh.ts. **Learned**: rotate refresh tokens atomically or two tabs race."
)
SEARCH = (
    "Found 3 memories:\n\n"
    + _hit(1, 42, "decision", "Auth tokens: short JWT + rotating refresh token", AUTH_BODY, "2026-11-02 10:14:09")
    + _hit(2, 57, "bugfix", "Refresh race between two tabs", "**What**: two tabs refreshed at once and the second "
           "got 401. **Fix**: refresh is idempotent for 30 s per token family.", "2026-11-05 16:40:31")
    + _hit(3, 61, "pattern", "Auth errors are mapped to 401 with a code", "**What**: every auth failure returns "
           "401 and a machine code (token_expired, token_revoked).", "2026-11-06 09:02:55")
)  # fmt: skip
SEARCH_2 = (
    "Found 2 memories:\n\n"
    + _hit(1, 57, "bugfix", "Refresh race between two tabs", "**What**: two tabs refreshed at once and the second "
           "got 401. **Fix**: refresh is idempotent for 30 s per token family.", "2026-11-05 16:40:31")
    + _hit(2, 63, "constraint", "Mobile clients cache tokens for offline use", "**What**: the mobile app keeps the "
           "last access token for 15 minutes offline.", "2026-11-08 12:11:40")
)  # fmt: skip
OBSERVATION = (
    "#42 [decision] Auth tokens: short JWT + rotating refresh token\n"
    + "\n".join(f"{AUTH_BODY} Detail {i}: the discussion covered key rotation, clock skew of 30 s, revocation lists "
                f"kept in Redis for 7 days, and the migration of {i * 1000} active sessions." for i in range(1, 12))
    + "\nSession: s-2026-11-02\nProject: shop\nScope: project\nTopic: decision/auth-tokens\nDuplicates: 1\n"
    "Revisions: 3\nCreated: 2026-11-02 10:14:09"
)  # fmt: skip
CONTEXT = (
    "## Memory from Previous Sessions\n\n### Recent Sessions\n"
    + "".join(f"- **shop** (2026-11-{d:02d} 09:00:00): worked on checkout step {d} [6 observations]\n" for d in range(1, 6))
    + "\n### Recent User Prompts\n"
    + "".join(f"- 2026-11-{d:02d} 09:01:00: continue the checkout refactor, part {d}\n" for d in range(1, 11))
    + "\n### Recent Observations\n"
    + "".join(f"- [decision] **Checkout decision {i}**: {AUTH_BODY}\n" for i in range(1, 21))
    + "\n\n---\nMemory stats: 42 sessions, 318 observations across projects: shop"
)  # fmt: skip
TRANSCRIPT = "User: fix the refresh bug\nAssistant: Looking at src/auth/refresh.ts now.\nUser: and add a test"


class Step:
    def __init__(self, label: str, event: str, **fields: Any) -> None:
        self.label, self.event, self.fields = label, event, fields


TURNS: list[tuple[str | None, list[Step]]] = [
    (
        "What did we decide about auth tokens last week?",
        [
            Step("mem_search", "call", tool="mem_search", input={"query": "auth tokens", "limit": 10}, result=SEARCH),
            Step("mem_get_observation #99", "call", tool="mem_get_observation", input={"id": 99}, result=OBSERVATION),
            Step("mem_get_observation #42", "call", tool="mem_get_observation", input={"id": 42}, result=OBSERVATION),
            Step("mem_search", "call", tool="mem_search", input={"query": "refresh race", "limit": 3}, result=SEARCH_2),
            Step("mem_search", "call", tool="mem_search", input={"query": "mobile tokens", "limit": 3}, result=SEARCH_2),
            Step("mem_context", "call", tool="mem_context", input={}, result=CONTEXT),
            Step("mem_save type=manual", "call", tool="mem_save", result="Memory saved",
                 input={"title": "auth", "content": "Tokens rotate because sessions did not scale.", "type": "manual"}),
            Step("mem_save transcript", "call", tool="mem_save", result="Memory saved",
                 input={"title": "chat", "content": TRANSCRIPT, "type": "bugfix"}),
            Step("mem_save decision", "call", tool="mem_save", result='Memory saved: "Refresh is idempotent" (decision)',
                 input={"title": "Refresh is idempotent", "type": "decision", "topic_key": "auth/refresh/decision",
                        "content": "Refresh is idempotent for 30 s per token family because two tabs raced."}),
        ],
    ),
    (
        None,  # /compact: Claude Code starts the session again with source=compact
        [Step("SessionStart (after /compact)", "start", source="compact")],
    ),
    (
        "Continue where we left off with the checkout refactor.",
        [
            Step("mem_context", "call", tool="mem_context", input={}, result=CONTEXT),
            Step("validator: mem_search", "call", tool="mem_search", input={"query": "checkout", "limit": 3},
                 result=SEARCH, agent=("agent-7", "validator")),
            Step("mem_search", "call", tool="mem_search", input={"query": "checkout", "limit": 3}, result=SEARCH),
        ],
    ),
]  # fmt: skip


class Demo:
    def __init__(self, out: Callable[[str], None], python: str = sys.executable) -> None:
        self.out = out
        self.python = python
        self.scratch = tempfile.TemporaryDirectory(prefix="memory-governor-demo-")
        root = self.scratch.name
        self.project = os.path.join(root, "project")
        os.makedirs(self.project)
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.path.join(root, "home"),
            "XDG_CONFIG_HOME": os.path.join(root, "home", ".config"),
            "MEMORY_GOVERNOR_STATE_DIR": os.path.join(root, "state"),
            "MEMORY_GOVERNOR_WARM_SERVER": "off",
            "LANG": "C.UTF-8",
        }
        self.session = "demo-session"
        self.prompt_id: str | None = None
        self.calls = 0
        self.turn_tokens = 0
        self.last_denial = ""
        from governor.engine.tokens import counter
        from governor.policy import compiled

        self.policy, _ = compiled.load(self.env, self.project, self.env["MEMORY_GOVERNOR_STATE_DIR"])
        self.count = counter(self.policy.unit).count

    def hook(self, name: str, **fields: Any) -> dict[str, Any]:
        payload = {"session_id": self.session, "transcript_path": os.path.join(self.project, "t.jsonl"),
                   "cwd": self.project, "hook_event_name": name, "permission_mode": "default", **fields}  # fmt: skip
        if self.prompt_id and "prompt_id" not in payload:
            payload["prompt_id"] = self.prompt_id
        proc = subprocess.run(
            [self.python, "-I", "-S", ENTRY, "claude-code"], input=json.dumps(payload).encode(), capture_output=True,
            env=self.env, cwd=self.project, timeout=120,
        )  # fmt: skip
        text = proc.stdout.decode().strip()
        return json.loads(text) if text else {}

    def line(self, label: str, verdict: str, detail: str = "", tokens: int | None = None) -> None:
        import textwrap

        tok = f"{tokens:>6} tok" if tokens is not None else ""
        parts = textwrap.wrap(detail, 64) or [""]
        self.out(f"  {label:26} {verdict:9} {parts[0]:64} {tok}".rstrip())
        for part in parts[1:]:
            self.out(f"  {'':26} {'':9} {part}")

    def run(self) -> int:
        budget, _ = self.policy.limit("max_memory_tokens_injected")
        searches, _ = self.policy.limit("max_search_calls")
        fetches, _ = self.policy.limit("max_full_fetches")
        self.out("memory-governor demo: a scripted Claude Code session through the real hook, shipped policy")
        self.out(f"policy: {searches} searches, {fetches} full fetch, {budget} {self.policy.unit} tokens of memory "
                 "per turn; mem_context only after /compact, resume or an explicit recall")  # fmt: skip
        turn = 0
        for prompt, steps in TURNS:
            if prompt is not None:
                turn += 1
                self.turn_tokens = 0
                self.out(f'\nTurn {turn}  "{prompt}"')
                self.prompt_id = f"demo-prompt-{turn}"
                answer = self.hook("UserPromptSubmit", prompt=prompt, prompt_id=self.prompt_id)
                context = answer.get("hookSpecificOutput", {}).get("additionalContext", "")
                tokens = self.count(context) if context else 0
                self.turn_tokens += tokens
                self.line("prompt", "advised" if context else "-", context.replace("memory_need=", ""), tokens)
            for step in steps:
                self.play(step)
            if prompt is not None:
                self.out(
                    f"  {'memory that reached the model this turn':>101} {self.turn_tokens:>6} tok  (budget {budget})"
                )
        if self.last_denial:
            self.out("\nWhat the model receives for a denial (as the tool's error result):")
            self.out(f"  {self.last_denial}")
        self.scratch.cleanup()
        return 0

    def play(self, step: Step) -> None:
        if step.event == "start":
            answer = self.hook("SessionStart", source=step.fields["source"])
            context = answer.get("hookSpecificOutput", {}).get("additionalContext", "")
            self.out(f"\n{step.label}")
            self.line("SessionStart", "armed", context.replace("memory_need=", ""))
            return
        self.calls += 1
        call_id = f"toolu_demo_{self.calls}"
        tool = f"mcp__engram__{step.fields['tool']}"
        agent = step.fields.get("agent")
        extra = {"agent_id": agent[0], "agent_type": agent[1]} if agent else {}
        tool_input = step.fields["input"]
        before = self.hook("PreToolUse", tool_name=tool, tool_input=tool_input, tool_use_id=call_id, **extra)
        specific = before.get("hookSpecificOutput", {})
        if specific.get("permissionDecision") == "deny":
            reason = specific.get("permissionDecisionReason", "")
            self.last_denial = reason
            self.line(step.label, "denied", reason.replace("memory-governor: ", ""))
            return
        if "updatedInput" in specific:
            changed = {k: v for k, v in specific["updatedInput"].items() if tool_input.get(k) != v}
            # A search asking past the hits its context holds (they come back named in a line) is no clamp.
            wider = any(isinstance(v, int) and isinstance(tool_input.get(k), int) and v > tool_input[k]
                        for k, v in changed.items())  # fmt: skip
            self.line(step.label, "rewrote" if wider else "clamped",
                      ", ".join(f"{k} {tool_input.get(k)} -> {v}" for k, v in changed.items()))  # fmt: skip
            tool_input = specific["updatedInput"]
        note = before.get("systemMessage", "")
        if note:
            self.line(
                step.label if "updatedInput" not in specific else "", "warned", note.replace("memory-governor: ", "")
            )
        result = step.fields["result"]
        after = self.hook("PostToolUse", tool_name=tool, tool_input=tool_input, tool_use_id=call_id,
                          tool_response=result, **extra)  # fmt: skip
        replaced = after.get("hookSpecificOutput", {}).get("updatedMCPToolOutput")
        if step.fields["tool"].startswith("mem_save"):
            self.line(step.label if not note and "updatedInput" not in specific else "", "saved")
            return
        delivered = replaced if replaced is not None else result
        tokens = self.count(delivered)
        self.turn_tokens += tokens
        label = "" if "updatedInput" in specific else step.label
        if replaced is not None:
            verdict, said = what_changed(replaced)
            self.line(label, verdict, f"{self.count(result)} tok -> {tokens}: {said}", tokens)
        else:
            self.line(label, "allowed", "delivered whole", tokens)


def what_changed(replaced: str) -> tuple[str, str]:
    """What the governor did to a result, from what the model got instead: `withheld` (nothing of
    it but the governor's line), `trimmed` (entries held back), `deduped` (entries already shown,
    named in a line or each now a pointer line), `snippets` (each hit as its snippet, nothing held
    back); and the governor's own words for it."""
    lines = [line for line in replaced.splitlines() if line.strip()]
    notes = [line.removeprefix("[memory-governor] ") for line in lines if line.startswith("[memory-governor] ")]
    pointers = sum("already shown" in line for line in lines)
    if notes and len(notes) == len(lines) and "already above" not in notes[-1]:
        return "withheld", notes[-1]
    said = [*notes, *([f"{pointers} entr{'y' if pointers == 1 else 'ies'} already shown, now a line pointing to it"]
                      if pointers else [])]  # fmt: skip
    if any("held back" in note for note in notes):
        return "trimmed", "; ".join(said)
    if said:
        return "deduped", "; ".join(said)
    return "snippets", "each hit as its snippet (its date, project and scope line left out)"


def main(out: Callable[[str], None] = print) -> int:
    return Demo(out).run()
