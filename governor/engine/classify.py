"""The memory need of a prompt: which of the policy's classes it falls in, and why.

Deterministic: each class has case-insensitive patterns; the prompt is folded (lower case,
accents removed, so "qué" matches "que"); the first class in the policy's precedence with
a matching pattern wins; no match gives the policy's default. `continuation` is never
chosen here: it comes from events (compaction, resume), not from words.

Runs on every UserPromptSubmit. Patterns are compiled when first reached, in precedence order,
and the search stops at the first match (compiling all of them costs ~16 ms in a new process).
"""

from __future__ import annotations

import re
import unicodedata

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EVENT_DRIVEN = ("continuation",)
_compiled: dict[str, re.Pattern[str]] = {}


def strip_accents(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def fold(text: str) -> str:
    """Lower case without accents, whitespace collapsed: what patterns and phrases match against."""
    return " ".join(strip_accents(text.casefold()).split())


def _pattern(source: str) -> re.Pattern[str]:
    found = _compiled.get(source)
    if found is None:
        found = _compiled[source] = re.compile(source, re.I)
    return found


class Verdict:
    __slots__ = ("matched", "need", "pattern", "via")

    def __init__(self, need: str, pattern: str | None, matched: str | None, via: str = "pattern") -> None:
        self.need = need
        self.pattern = pattern  # the pattern that matched (or the cue words), None for the default
        self.matched = matched  # the text it matched
        self.via = via if pattern is not None else "default"  # pattern | cues | default


def classify(prompt: str, needs: dict[str, Any]) -> Verdict:
    text = fold(prompt)
    for name in needs["precedence"]:
        if name in EVENT_DRIVEN:
            continue
        for pattern in needs["classes"][name]["patterns"]:
            match = _pattern(strip_accents(pattern)).search(text)  # compiled on first use: stop early
            if match:
                return Verdict(name, pattern, match.group(0))
    return _by_cues(text, needs) or Verdict(needs["default"], None, None)


def _by_cues(text: str, needs: dict[str, Any]) -> Verdict | None:
    """No pattern matched: the class with the most distinct cue words, if it reaches the threshold.

    Ties go to the class earlier in precedence."""
    words = set(re.findall(r"[a-z0-9_']+", text))
    padded = f" {' '.join(re.findall(r'[a-z0-9_]+', text))} "
    best: tuple[int, str, list[str]] | None = None
    for name in needs["precedence"]:
        if name in EVENT_DRIVEN:
            continue
        cues = needs["classes"][name].get("cues", [])
        hits = [cue for cue in cues if (f" {cue} " in padded if " " in cue else cue in words)]
        if hits and (best is None or len(hits) > best[0]):
            best = (len(hits), name, hits)
    if best is None or best[0] < needs.get("cue_threshold", 2):
        return None
    return Verdict(best[1], ", ".join(best[2]), " ".join(best[2]), via="cues")


def recall_phrase(prompt: str, phrases: list[str]) -> str | None:
    """The explicit-recall phrase the prompt contains, if any (phrases are compared folded)."""
    text = fold(prompt)
    for phrase in phrases:
        if fold(phrase) in text:
            return phrase
    return None
