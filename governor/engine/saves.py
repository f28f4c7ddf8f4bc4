"""Save discipline: what a memory save must not contain (seed: "deltas only").

Each detector looks at one free-text field of a save and says which never-save rule it
breaks, if any: raw_transcript (a pasted conversation, whatever its speakers are called: the
policy's speaker labels, or any labels that alternate turn by turn, as lines or table rows),
tool_noise (raw command output: stack traces, logs, `ls -l` listings, a test runner's lines), step_by_step (narration of edits with
no decision in it). The policy decides whether each blocks, warns or is off, and which
speaker labels mark a transcript. Detectors look for shapes, never for words a legitimate
memory would use, so a decision that quotes one error line still passes.

Bounded: every pattern is linear (no unbounded span inside another, no `\\s` that can run
across lines at a line start), and a field longer than 2 x WINDOW characters is judged by
its first and last WINDOW characters (governor.engine.fields; the policy's `save.max_chars`
refuses such a field before that, by default). These checks run before the ledger's write lock
is taken.

Hot path: standard library only (`re` comes with `json`).
"""

from __future__ import annotations

import re

from governor.engine.fields import judged

_LIST_MARK = r"(?:[#>*+-]{1,6}[ \t]{0,4}){0,3}"  # markdown heading, quote or bullet markers
_ROLE_JSON = re.compile(
    r"""["']?(?:role|author|speaker|from)["']?[ \t]{0,4}[:=][ \t]{0,4}["']([a-z_]{1,20})["']""", re.I
)
_TAGGED = re.compile(r"</?(user|assistant|human|ai|model|bot)>|\[(?:/?inst|user|assistant)\]", re.I)
_ANSI = re.compile(r"\x1b\[[0-9;]{0,32}[A-Za-z]")
_TRACEBACK = re.compile(
    r"^[ \t]*(?:Traceback \(most recent call last\):|Exception in thread \"|thread '[^'\n]{0,100}' panicked at )", re.M
)
_PY_FRAME = re.compile(r'^[ \t]*File "[^"\n]{1,400}", line \d+', re.M)
_JS_STACK = re.compile(r"^[ \t]+at [^\n]{1,300}?:\d+(?::\d+)?\)?[ \t]*$", re.M)
_GO_STACK = re.compile(r"^goroutine \d+ \[|^[ \t]+/[^\n]{1,300}?\.go:\d+ \+0x", re.M)
_LOG_LINE = re.compile(
    r"^\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[^\s\]]{0,16}\]?[ \t]+\[?(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\b", re.M
)
_PROMPT_LINE = re.compile(
    r"^[ \t]*(?:\$|>|PS [A-Z]:\\[^>\n]{0,200}>|\w{1,32}@[\w.-]{1,64}:[^$#\n]{0,200}[$#]) \S", re.M
)
_DIFF = re.compile(r"^(?:diff --git |@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@)", re.M)
_TEST_RUN = re.compile(
    r"^(?:=+ [^\n]{0,200}(?:test session starts|passed|failed)[^\n]{0,200} =+$|PASSED|FAILED|ok \d+ |not ok \d+ )", re.M
)
# Raw `ls -l` listings: a mode string, a link count, owner, group, size, a date, a name.
_LS_LINE = re.compile(
    r"^[-dlcbps][rwxsStT-]{9}[.@+]?[ \t]+\d{1,6}[ \t]+\S{1,64}[ \t]+\S{1,64}[ \t]+\d{1,19}[ \t]+"
    r"(?:\w{3}[ \t]+\d{1,2}[ \t]+(?:\d\d:\d\d|\d{4})|\d{4}-\d\d-\d\d[ \t]+\d\d:\d\d)[ \t]+\S",
    re.M,
)
# A test runner's own lines (pytest and the like): progress, banners, per-test verdicts, the tally.
_TEST_OUTPUT = re.compile(
    r"^(?:\S{1,300}\.py[ \t]+[.FEsxX]{1,500}[ \t]*\[[ \t]{0,2}\d{1,3}%\]"
    r"|(?:FAILED|PASSED|ERROR|SKIPPED|XFAIL|XPASS)[ \t]+\S{1,300}::\S"
    r"|\S{1,300}::\S{1,300}[ \t]+(?:FAILED|PASSED|ERROR|SKIPPED|XFAIL|XPASS)\b"
    r"|collected \d{1,9} items?\b|platform \w{1,20} -- Python \d"
    r"|=+ ?(?:FAILURES|ERRORS|short test summary info|warnings summary|test session starts) ?=+$"
    r"|_{3,} [^\n]{1,200} _{3,}$|E[ \t]{3,}\S"
    r"|=*[ \t]*\d{1,9} (?:passed|failed)(?:, \d{1,9} \w{1,10}){0,5} in \d{1,9}(?:\.\d{1,9})?s\b)",
    re.M,
)
# A line that starts with a label and says something: `Nutzer: ...`, `Utilisateur : ...`, `**Modell**: ...`,
# `🤖: ...`, `🧑‍💻 ...` (an emoji speaker needs no colon). Up to two words, or an emoji sequence.
_EMOJI = "\U0001f300-\U0001faff\u2600-\u27bf"
_LABEL_LINE = re.compile(
    rf"^[ \t]{{0,12}}{_LIST_MARK}(?:\*\*|__|\[)?"
    rf"(?:([^\W\d_][^\W_]{{0,23}}(?:[ -][^\W\d_][^\W_]{{0,23}})?)(?:\*\*|__|\])?[ \t]{{0,2}}:(?:\*\*|__)?[ \t]{{0,4}}[^\s/]"
    rf"|([{_EMOJI}][{_EMOJI}\u200d\ufe0f\U0001F3FB-\U0001F3FF]{{0,7}})(?:\*\*|__|\])?[ \t]{{0,2}}:?[ \t]{{1,4}}\S)",
    re.M,
)
_TABLE_ROW = re.compile(r"^[ \t]{0,3}\|([^|\n]{1,80})\|([^|\n]{1,80})(?:\|[^\n]{0,2000})?$", re.M)
_TABLE_RULE = re.compile(r"[ \t:-]{1,80}")
MIN_TURNS = 3  # labelled turns alternating between two speakers: A, B, A
MIN_WORDS = 6  # ... saying this much between them: three `key: value` lines are no conversation


def _words(said: str) -> int:
    """How much a turn says: its words, or, in a script written without spaces, a word per 3 characters."""
    said = said.strip()
    if " " in said or said.isascii():
        return len(said.split())
    return max(1, len(said) // 3)


def _alternates(turns: list[tuple[str, int]]) -> bool:
    """Do MIN_TURNS (speaker, words) in a row alternate between two speakers (A, B, A, ...) and say
    at least MIN_WORDS words together?"""
    run = 1
    for at in range(1, len(turns)):
        if turns[at][0] == turns[at - 1][0]:
            run = 1
        elif at >= 2 and run >= 2 and turns[at][0] == turns[at - 2][0]:
            run += 1
        else:
            run = 2
        if run >= MIN_TURNS and sum(words for _, words in turns[at - MIN_TURNS + 1 : at + 1]) >= MIN_WORDS:
            return True
    return False


def _turn_structure(text: str) -> bool:
    """Alternating labelled turns, whatever the labels are (any language, emoji), as lines or as
    the rows of a markdown table: the shape of a conversation, not its words."""
    turns = []
    for m in _LABEL_LINE.finditer(text):
        end = text.find("\n", m.end())
        turns.append(((m.group(1) or m.group(2)).casefold(), _words(text[m.end() - 1 : end if end >= 0 else None])))
    if _alternates(turns):
        return True
    rows: list[tuple[str, int]] = []
    for row in _TABLE_ROW.finditer(text):
        cells = [cell.strip() for cell in row.group(0).strip().strip("|").split("|")]
        if _TABLE_RULE.fullmatch(cells[0]) or len(cells) < 2:
            continue
        if cells[0].isdigit() and len(cells) > 2:  # a numbered table: the speaker is the next column
            cells = cells[1:]
        rows.append((cells[0].casefold(), _words(" ".join(cells[1:]))))
    return _alternates(rows)


_NARRATION = re.compile(
    r"[ \t]*(?:\d+[.)][ \t]*|[-*][ \t]*|step \d+:?[ \t]*)?(?:i[ \t]+)?(edited|updated|modified|changed|ran|opened|read|"
    r"created|deleted|renamed|moved|installed|committed|pushed)\b",
    re.I,
)
_REASONING = re.compile(r"\b(because|why|decid|so that|instead|root cause|trade-?off|chose|rule|always|never)\w*", re.I)
_speaker_patterns: dict[tuple[tuple[str, ...], tuple[str, ...]], re.Pattern[str]] = {}


def _speakers(human: tuple[str, ...], machine: tuple[str, ...]) -> re.Pattern[str]:
    """A line that starts with a speaker label: `User:`, `**Claude:**`, `### Assistant`, `Me -`."""
    found = _speaker_patterns.get((human, machine))
    if found is None:
        names = "|".join(re.escape(n) for n in sorted({*human, *machine}, key=len, reverse=True))
        label = rf"(?:\*\*|__|\[)?({names})(?:\*\*|__|\])?"
        said = r"(?:[ \t]{1,4}(?:said|says|wrote|dijo|escribio))?"
        found = re.compile(
            rf"^[ \t]{{0,12}}{_LIST_MARK}{label}{said}[ \t]{{0,4}}(?:[:>]|[-—–](?=[ \t])|(?<=\*\*)$|(?<=__)$)"
            rf"|^[ \t]{{0,3}}#{{1,6}}[ \t]{{1,4}}{label}[ \t]{{0,4}}$",
            re.I | re.M,
        )
        _speaker_patterns[(human, machine)] = found
    return found


def raw_transcript(text: str, human: tuple[str, ...], machine: tuple[str, ...]) -> bool:
    if _turn_structure(text):
        return True
    human_set, machine_set = {n.casefold() for n in human}, {n.casefold() for n in machine}
    said = [(m.group(1) or m.group(2)).casefold() for m in _speakers(human, machine).finditer(text)]
    people = sum(s in human_set for s in said)
    machines = sum(s in machine_set for s in said)
    if people >= 1 and machines >= 1 and people + machines >= 3:
        return True
    roles = {r.casefold() for r in _ROLE_JSON.findall(text)}
    if roles & human_set and roles & (machine_set | {"model", "tool"}):
        return True
    return len(_TAGGED.findall(text)) >= 2


def tool_noise(text: str) -> bool:
    if _ANSI.search(text) or _TRACEBACK.search(text) or _GO_STACK.search(text):
        return True
    if len(_PY_FRAME.findall(text)) >= 2 or len(_JS_STACK.findall(text)) >= 3 or len(_LOG_LINE.findall(text)) >= 3:
        return True
    if len(_PROMPT_LINE.findall(text)) >= 2 or len(_DIFF.findall(text)) >= 2:
        return True
    if len(_LS_LINE.findall(text)) >= 2:
        return True
    return len(_TEST_RUN.findall(text)) >= 3 or len(_TEST_OUTPUT.findall(text)) >= 2


def step_by_step(text: str) -> bool:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or _REASONING.search(text):
        return False
    narrated = sum(1 for line in lines if _NARRATION.match(line))
    return narrated >= max(1, (len(lines) + 1) // 2)


RULES = ("raw_transcript", "tool_noise", "step_by_step")

REASONS = {
    "raw_transcript": "looks like a raw transcript (speaker-labelled turns). Save the decision or fix it led to, "
    "in a few lines, instead",
    "tool_noise": "looks like raw tool output (a stack trace, log or command output). Save the root cause and the "
    "fix, not the output",
    "step_by_step": "narrates steps (edited, ran, ...) without a decision. Save only what a later session needs: "
    "the decision, the root cause, the pattern",
    "duplicate": "repeats a save made earlier in this session. Use topic_key to update the memory (upsert) instead",
    "oversize": "is longer than a memory delta should be. Save the decision, root cause or pattern in a few lines",
}


def violations(text: str, speakers: dict[str, list[str]]) -> list[str]:
    """The never-save rules `text` breaks, in the order they are checked."""
    seen = judged(text)
    human, machine = tuple(speakers.get("human", ())), tuple(speakers.get("machine", ()))
    out = []
    if raw_transcript(seen, human, machine):
        out.append("raw_transcript")
    if tool_noise(seen):
        out.append("tool_noise")
    if step_by_step(seen):
        out.append("step_by_step")
    return out


def title_digest(title: str) -> str:
    """A fingerprint of a save's title for duplicate checks (the title itself is not stored)."""
    from zlib import crc32

    folded = " ".join(title.casefold().split())
    return f"{crc32(folded.encode('utf-8', 'surrogatepass')):08x}{len(folded):04x}"
