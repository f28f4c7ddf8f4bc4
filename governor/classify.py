"""The memory need of a prompt: which of the policy's classes it falls in, and why.

Deterministic: each class has case-insensitive patterns; the prompt is folded (lower case,
accents removed, so "qué" matches "que"); the first class in the policy's precedence with
a matching pattern wins; no match gives the policy's default. `continuation` is never
chosen here: it comes from events (compaction, resume), not from words.

Runs on every UserPromptSubmit. The policy compiles all of a class's patterns into one
regex, so a prompt costs one search per class.
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


def class_regex(patterns: list[str]) -> str:
    """One alternation for a class's patterns (compiled once per process)."""
    return "|".join(f"(?:{strip_accents(p)})" for p in patterns)


class Verdict:
    __slots__ = ("matched", "need", "pattern")

    def __init__(self, need: str, pattern: str | None, matched: str | None) -> None:
        self.need = need
        self.pattern = pattern  # the pattern that matched, None for the default
        self.matched = matched  # the text it matched


def classify(prompt: str, needs: dict[str, Any]) -> Verdict:
    text = fold(prompt)
    for name in needs["precedence"]:
        if name in EVENT_DRIVEN:
            continue
        patterns = needs["classes"][name]["patterns"]
        if not patterns:
            continue
        match = _pattern(class_regex(patterns)).search(text)
        if match:
            which = next((p for p in patterns if _pattern(class_regex([p])).search(text)), patterns[0])
            return Verdict(name, which, match.group(0))
    return Verdict(needs["default"], None, None)


def recall_phrase(prompt: str, phrases: list[str]) -> str | None:
    """The explicit-recall phrase the prompt contains, if any (phrases are compared folded)."""
    text = fold(prompt)
    for phrase in phrases:
        if fold(phrase) in text:
            return phrase
    return None
