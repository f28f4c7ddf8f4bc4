"""The memory need of a prompt: which of the policy's classes it falls in, and why.

Deterministic, in this order (docs/classification.md): the prompt is folded (lower case,
accents removed, so "qué" matches "que"); the first class in the policy's precedence with a
matching pattern wins; else the learned model (`need_model`) if its calibrated probability
reaches `model_threshold`; else the class with the most cue words, if it has `cue_threshold`
of them; else the policy's default. `continuation` is never chosen here: it comes from
events (compaction, resume), not from words.

Runs on every UserPromptSubmit. Patterns are built when first reached, in precedence order,
and the search stops at the first match (compiling all of them costs ~16 ms in a new process;
a hook builds them from their kept `_sre` code instead, governor.engine.patterns).
A pattern none of whose `required` words (found once, when the policy is compiled) is in the
prompt cannot match, so it is passed over without being built.
A long prompt (a pasted log, a file) is judged by its first HEAD and last TAIL characters:
what a prompt asks for is said there, and the policy's patterns then run in bounded time.
"""

from __future__ import annotations

import unicodedata

from governor.engine.patterns import IGNORECASE, Lazy, compiled

TYPE_CHECKING = False
if TYPE_CHECKING:
    from re import Pattern
    from typing import Any

EVENT_DRIVEN = ("continuation",)
_LIKE_ASCII = "\u0130\u0131\u017f\u212a"  # what re.I matches to an ASCII letter (İ ı ſ K): no skipping then
HEAD, TAIL = 4000, 1000
_compiled: dict[str, Pattern[str]] = {}
_CUE_WORDS = Lazy(r"[a-z0-9_']+")
_CUE_PHRASE_WORDS = Lazy(r"[a-z0-9_]+")


def strip_accents(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def fold(text: str) -> str:
    """Lower case without accents, whitespace collapsed: what patterns and phrases match against."""
    if len(text) > HEAD + TAIL:
        text = text[:HEAD] + "\n" + text[-TAIL:]
    return " ".join(strip_accents(text.casefold()).split())


def _pattern(source: str) -> Pattern[str]:
    """The policy's pattern compiled, accents removed like the text; cached by its source as
    written, so a prompt costs one dictionary lookup per pattern, not an accent strip."""
    found = _compiled.get(source)
    if found is None:
        found = _compiled[source] = compiled(*form(source))
    return found


def form(source: str) -> tuple[str, int]:
    """What the policy's pattern `source` is compiled as: (pattern, flags)."""
    return strip_accents(source), IGNORECASE


class Verdict:
    __slots__ = ("matched", "model", "need", "pattern", "via")

    def __init__(self, need: str, pattern: str | None, matched: str | None, via: str = "pattern") -> None:
        self.need = need
        self.pattern = pattern  # the pattern that matched (or the cue words), None otherwise
        self.matched = matched  # the text it matched
        self.via = via if pattern is not None or via in ("model", "recall") else "default"
        # pattern | model | cues | default | recall (governor.engine.recall: an ask for everything remembered)
        self.model: ModelOpinion | None = None  # what the model said, when it was asked


class ModelOpinion:
    """The learned model's answer for one prompt: calibrated probabilities, most likely first,
    or why there is none (the weights could not be read)."""

    __slots__ = ("error", "probabilities", "threshold")

    def __init__(self, probabilities: dict[str, float], threshold: float, error: str | None = None) -> None:
        self.probabilities = probabilities
        self.threshold = threshold
        self.error = error

    @property
    def best(self) -> tuple[str, float] | None:
        return next(iter(self.probabilities.items()), None)

    @property
    def decides(self) -> bool:
        best = self.best
        return best is not None and self.threshold < 1 and best[1] >= self.threshold


def required(source: str) -> list[str] | None:
    """Words one of which every match of the policy's pattern `source` contains, lower case,
    ASCII (so a folded prompt without any of them cannot match); None when there are none.
    For the compiled policy: parsing costs what compiling does."""
    import re

    try:
        return _required(_sre().parse(*form(source)))
    except (re.error, RecursionError, OverflowError):
        return None


def _sre() -> Any:
    """The standard library's regex parser (its opcodes too)."""
    try:
        from re import _parser  # type: ignore[attr-defined]
    except ImportError:  # Python 3.10
        import sre_parse as _parser
    return _parser


def _required(items: Any) -> list[str] | None:
    sre = _sre()
    choices: list[list[str]] = []
    run = ""
    for op, arg in items:
        if op is sre.LITERAL and arg < 0x80:
            run += chr(arg).lower()
            continue
        if run:
            choices.append([run])
            run = ""
        found: list[str] | None = None
        if op is sre.SUBPATTERN:
            found = _required(arg[-1])
        elif op is getattr(sre, "ATOMIC_GROUP", None):
            found = _required(arg)
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)) and arg[0] >= 1:
            found = _required(arg[2])
        elif op is sre.BRANCH:
            branches = [_required(branch) for branch in arg[1]]
            if all(b is not None for b in branches):
                found = sorted({word for b in branches for word in b or ()})
        if found:
            choices.append(found)
    if run:
        choices.append([run])
    return max(choices, key=lambda words: (min(map(len, words)), -len(words)), default=None)


def classify(prompt: str, needs: dict[str, Any], requires: dict[str, list[str] | None] | None = None) -> Verdict:
    """The prompt's class. `requires`: each pattern's `required` words (the compiled policy's)."""
    text = fold(prompt)
    if requires is None or any(char in text for char in _LIKE_ASCII):
        requires = {}
    for name in needs["precedence"]:
        if name in EVENT_DRIVEN:
            continue
        for pattern in needs["classes"][name]["patterns"]:
            words = requires.get(pattern)
            if words is not None and not any(word in text for word in words):
                continue  # cannot match: not compiled
            match = _pattern(pattern).search(text)  # compiled on first use: stop early
            if match:
                return Verdict(name, pattern, match.group(0))
    opinion = ask_model(text, needs)
    best = opinion.best
    if best is not None and opinion.decides:
        verdict = Verdict(best[0], None, None, via="model")
    else:
        verdict = _by_cues(text, needs) or Verdict(needs["default"], None, None)
    verdict.model = opinion
    return verdict


def ask_model(text: str, needs: dict[str, Any]) -> ModelOpinion:
    """The model's opinion of a folded prompt, over the classes words may decide in this policy.

    A missing or unreadable weights file is no reason to fail a prompt: the opinion says why,
    and cue words and the default decide (`memory-governor doctor` reports it)."""
    threshold = float(needs.get("model_threshold", 0.5))  # the policy model's default
    if threshold >= 1:
        return ModelOpinion({}, threshold, "off (model_threshold: 1)")
    from governor.engine import need_model

    try:
        model = need_model.load()
    except (OSError, ValueError, KeyError, TypeError) as err:
        return ModelOpinion({}, threshold, f"unavailable: {type(err).__name__}: {err}")
    among = [n for n in needs["precedence"] if n not in EVENT_DRIVEN]
    return ModelOpinion(model.probabilities(text, among), threshold)


def _by_cues(text: str, needs: dict[str, Any]) -> Verdict | None:
    """No pattern matched: the class with the most distinct cue words, if it reaches the threshold.

    Ties go to the class earlier in precedence."""
    words = set(_CUE_WORDS.findall(text))
    padded = f" {' '.join(_CUE_PHRASE_WORDS.findall(text))} "
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
