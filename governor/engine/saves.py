"""Save discipline: what a memory save must not contain (seed: "deltas only").

Each detector looks at a save's body and says which never-save rule it breaks, if any:
raw_transcript (a pasted conversation), tool_noise (raw command output, stack traces,
logs), step_by_step (narration of edits with no decision in it). The policy decides
whether each blocks, warns or is off. Detectors look for shapes, never for words a
legitimate memory would use, so a decision that quotes one error line still passes.

Hot path: standard library only (`re` comes with `json`).
"""

from __future__ import annotations

import re

_SPEAKER = re.compile(r"^\s*(?:\*\*)?(user|human|assistant|ai|claude|model|system|h|a)(?:\*\*)?\s*[:>]", re.I | re.M)
_ROLE_JSON = re.compile(r'"role"\s*:\s*"(user|assistant|system)"')
_TAGGED = re.compile(r"<(user|assistant|human)>", re.I)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):", re.M)
_JS_STACK = re.compile(r"^\s+at .+[(\s].+:\d+(?::\d+)?\)?$", re.M)
_GO_STACK = re.compile(r"^goroutine \d+ \[|^\s+/.+\.go:\d+ \+0x", re.M)
_LOG_LINE = re.compile(
    r"^\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\S*\]?\s+\[?(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\b", re.M
)
_PROMPT_LINE = re.compile(r"^(?:\$|>|PS [A-Z]:\\[^>]*>|\w+@[\w.-]+:[^$#]*[$#]) \S", re.M)
_DIFF = re.compile(r"^(?:diff --git |@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@)", re.M)
_TEST_RUN = re.compile(r"^(?:=+ .*(?:test session starts|passed|failed).*=+|PASSED|FAILED|ok \d+ |not ok \d+ )", re.M)
_NARRATION = re.compile(
    r"^\s*(?:\d+[.)]\s*|[-*]\s*|step \d+:?\s*)?(?:i\s+)?(edited|updated|modified|changed|ran|opened|read|created|"
    r"deleted|renamed|moved|installed|committed|pushed)\b",
    re.I | re.M,
)
_REASONING = re.compile(r"\b(because|why|decid|so that|instead|root cause|trade-?off|chose|rule|always|never)\w*", re.I)


def raw_transcript(text: str) -> bool:
    speakers = [m.group(1).lower() for m in _SPEAKER.finditer(text)]
    human = sum(s in ("user", "human", "h") for s in speakers)
    machine = sum(s in ("assistant", "ai", "claude", "model", "a") for s in speakers)
    if human >= 1 and machine >= 1 and human + machine >= 3:
        return True
    roles = _ROLE_JSON.findall(text)
    if "user" in roles and "assistant" in roles:
        return True
    return len(_TAGGED.findall(text)) >= 2


def tool_noise(text: str) -> bool:
    if _ANSI.search(text) or _TRACEBACK.search(text) or _GO_STACK.search(text):
        return True
    if len(_JS_STACK.findall(text)) >= 3 or len(_LOG_LINE.findall(text)) >= 3:
        return True
    if len(_PROMPT_LINE.findall(text)) >= 2 or len(_DIFF.findall(text)) >= 2:
        return True
    return len(_TEST_RUN.findall(text)) >= 3


def step_by_step(text: str) -> bool:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or _REASONING.search(text):
        return False
    narrated = sum(1 for line in lines if _NARRATION.match(line))
    return narrated >= max(1, (len(lines) + 1) // 2)


DETECTORS = (("raw_transcript", raw_transcript), ("tool_noise", tool_noise), ("step_by_step", step_by_step))

REASONS = {
    "raw_transcript": "looks like a raw transcript (speaker-labelled turns). Save the decision or fix it led to, "
    "in a few lines, instead",
    "tool_noise": "looks like raw tool output (a stack trace, log or command output). Save the root cause and the "
    "fix, not the output",
    "step_by_step": "narrates steps (edited, ran, ...) without a decision. Save only what a later session needs: "
    "the decision, the root cause, the pattern",
    "duplicate": "repeats a save made earlier in this session. Use topic_key to update the memory (upsert) instead",
}


def violations(text: str) -> list[str]:
    """The never-save rules `text` breaks, in the order they are checked."""
    return [name for name, detect in DETECTORS if detect(text)]


def title_digest(title: str) -> str:
    """A fingerprint of a save's title for duplicate checks (the title itself is not stored)."""
    from zlib import crc32

    folded = " ".join(title.casefold().split())
    return f"{crc32(folded.encode('utf-8', 'surrogatepass')):08x}{len(folded):04x}"
