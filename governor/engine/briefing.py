"""Briefings: a ranked, token-bounded set of memory cards for a subagent's dispatch.

The semantics of the three references, as named options (budget-semantics.md):
- RFC 0113: the result is a prefix of the ranked list whose cumulative tokens, in the
  declared unit, fit the budget; an entry too big on its own is omitted, never cut; with a
  limit as well, whichever yields fewer entries wins. Relevance is the memory server's own
  search order (or its score): no ranking engine of our own.
- ADR-0034: nothing stored is changed; ranking may use usage (last_used_at, use_count) and
  scope (org-wide first); usage is bumped only for memories actually injected; a nudge says
  how many were left out.
- loomflow: pinned entries first and never dropped; relevance x decay with a half-life;
  `--over-budget truncate` cuts the first misfit with a marker.

The emitted text is exactly what is counted: `tokens_used` is the count of the whole block.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any

from governor.engine.packer import TRUNCATION_MARKER, select

RANKINGS = ("recency", "relevance", "usage", "scope")
ORG_SCOPES = {"org", "organization", "global", "team"}
NAMED = 10  # ids a nudge names before "and N more"
OPEN_TAG = '<memory-cards unit="{unit}" budget="{budget}">'
CLOSE_TAG = "</memory-cards>"


class CandidateError(ValueError):
    """A candidate line that cannot be used; the message says where and why."""


class Candidate:
    __slots__ = ("content", "created_at", "id", "last_used_at", "pinned", "position", "relevance", "scope", "title",
                 "type", "use_count")  # fmt: skip

    def __init__(self, data: dict[str, Any], position: int, where: str) -> None:
        if not isinstance(data, dict):
            raise CandidateError(f"{where}: a candidate is a JSON object, got {type(data).__name__}")
        if "id" not in data or data["id"] in (None, ""):
            raise CandidateError(f"{where}: missing 'id'")
        if not isinstance(data.get("content"), str):
            raise CandidateError(f"{where}: 'content' must be a string")
        self.id = str(data["id"])
        self.content: str = data["content"]
        self.title = str(data.get("title") or "")
        self.type = str(data.get("type") or "")
        self.scope = str(data.get("scope") or "")
        self.pinned = bool(data.get("pinned", False))
        self.position = position
        self.created_at = timestamp(data.get("created_at"), where, "created_at")
        self.last_used_at = timestamp(data.get("last_used_at"), where, "last_used_at")
        count = data.get("use_count", 0)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise CandidateError(f"{where}: 'use_count' must be a non-negative integer")
        self.use_count = count
        relevance = data.get("relevance")
        if relevance is not None and (not isinstance(relevance, (int, float)) or isinstance(relevance, bool)):
            raise CandidateError(f"{where}: 'relevance' must be a number")
        self.relevance: float | None = None if relevance is None else float(relevance)


def timestamp(value: Any, where: str, field: str) -> float | None:
    """Seconds since the epoch from a number or an ISO 8601 / SQLite datetime string."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        text = value.strip().replace("Z", "+00:00")
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise CandidateError(f"{where}: '{field}' is not a date ({value!r}); use ISO 8601") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)  # Engram stores UTC
        return moment.timestamp()
    raise CandidateError(f"{where}: '{field}' must be a date string or a number")


def read_candidates(text: str, source: str) -> list[Candidate]:
    """JSON Lines of candidates, an `engram export` JSON document, or a `mem_search` result (its
    text, or its v2 JSON envelope) as the server returned it."""
    stripped = text.lstrip()
    if stripped.startswith("Found ") or (stripped.startswith("{") and '"result"' in text[:200000]):
        found = search_candidates(text, source)
        if found is not None:
            return found
    if stripped.startswith("{") and '"observations"' in text[:200000]:
        try:
            document = json.loads(text)
        except ValueError:
            document = None
        if isinstance(document, dict) and isinstance(document.get("observations"), list):
            return _engram_export(document, source)
    out: list[Candidate] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            data = json.loads(line)
        except ValueError as err:
            raise CandidateError(f"{where}: not JSON ({err})") from None
        out.append(Candidate(data, len(out), where))
    return out


_HIT_HEAD = re.compile(r"\A\[\d+\] #(\d+) \(([^)\n]*)\)(?: — ([^\n]*))?\n?")
_HIT_FOOT = re.compile(r"\n\s*(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?: \| project: [^|\n]*)?(?: \| scope: (\S+))?\s*\Z")


def search_candidates(text: str, source: str) -> list[Candidate] | None:
    """The hits of a memory search result, in the server's order (its relevance), as candidates:
    id, type, title, the preview as content, the date and scope. None if `text` is no search result."""
    from governor.engine.results import parse

    parsed = parse(text, "search")
    if not parsed.kind.endswith("search") and not parsed.kind.endswith("compact"):
        return None
    out: list[Candidate] = []
    for index, entry in enumerate(parsed.entries):
        where = f"{source}: hit {index + 1}"
        item = entry.item if isinstance(entry.item, dict) else {}
        head = _HIT_HEAD.match(entry.text)
        if head is None and not item:
            continue
        body = entry.text[head.end() :] if head else ""
        foot = _HIT_FOOT.search(body)
        data = {
            "id": item.get("id") or (head.group(1) if head else None),
            "type": item.get("type") or (head.group(2) if head else None),
            "title": item.get("title") or (head.group(3) if head else None),
            "content": next((item[k] for k in ("content", "preview") if isinstance(item.get(k), str)), None)
            or "\n".join(line.strip() for line in (body[: foot.start()] if foot else body).splitlines()).strip(),
            "created_at": item.get("created_at") or (foot.group(1) if foot else None),
            "scope": item.get("scope") or (foot.group(2) if foot else None),
        }  # fmt: skip
        out.append(Candidate(data, len(out), where))
    return out


def _engram_export(document: dict[str, Any], source: str) -> list[Candidate]:
    out: list[Candidate] = []
    for index, obs in enumerate(document["observations"]):
        if not isinstance(obs, dict) or obs.get("deleted_at"):
            continue
        data = {
            "id": obs.get("id"),
            "content": obs.get("content") or "",
            "title": obs.get("title"),
            "type": obs.get("type"),
            "created_at": obs.get("created_at"),
            "scope": obs.get("scope"),
        }
        out.append(Candidate(data, len(out), f"{source}: observations[{index}]"))
    return out


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def rank(candidates: list[Candidate], how: str, now: float, half_life_days: float | None = None,
         query: str | None = None) -> list[int]:  # fmt: skip
    """Indexes best first. Ties keep the input order (the server's order).

    `query`: candidates that carry no relevance of their own (an export, a hand-made list) get
    the share of the query's words found in their title and content, for `relevance` to rank by."""
    if how not in RANKINGS:
        raise ValueError(f"unknown ranking {how!r}: use one of {', '.join(RANKINGS)}")
    wanted = _words(query or "")
    if wanted:
        for c in candidates:
            if c.relevance is None:
                c.relevance = len(wanted & _words(f"{c.title} {c.content}")) / len(wanted)

    def newest(c: Candidate) -> float:
        return -(c.created_at if c.created_at is not None else -math.inf)

    keys: dict[str, Callable[[Candidate], tuple[Any, ...]]] = {
        "recency": lambda c: (newest(c), c.position),
        "relevance": lambda c: (
            (-(c.relevance if c.relevance is not None else 0.0), c.position)
            if any(x.relevance is not None for x in candidates)
            else (c.position,)
        ),
        "usage": lambda c: (-(c.last_used_at or -math.inf), -c.use_count, newest(c), c.position),
        "scope": lambda c: (0 if c.scope.lower() in ORG_SCOPES else 1, newest(c), c.position),
    }
    order = sorted(range(len(candidates)), key=lambda i: keys[how](candidates[i]))
    if half_life_days:
        # loomflow: reciprocal-rank relevance x exponential decay on age.
        def score(pos_index: tuple[int, int]) -> float:
            position, index = pos_index
            created = candidates[index].created_at
            decay = 1.0 if created is None else 0.5 ** (max(0.0, now - created) / 86400 / half_life_days)
            return decay / (60 + position + 1)

        scored = sorted(enumerate(order), key=lambda pi: (-score(pi), pi[0]))
        order = [index for _, index in scored]
    pinned = [i for i in order if candidates[i].pinned]
    return pinned + [i for i in order if not candidates[i].pinned]


def _date(moment: float | None) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%d") if moment is not None else ""


class Card:
    """One memory's card: its label (ids, type, date), title and body. Cards that share a title
    and label are written under one header, each on a line of its own."""

    __slots__ = ("body", "ids", "kind", "title", "when")

    def __init__(self, candidate: Candidate, *, show_type: bool = True, ids: list[str] | None = None) -> None:
        date = _date(candidate.created_at)
        self.ids = ids or [candidate.id]
        self.kind = candidate.type if show_type else ""
        self.when = "" if date in candidate.title else date  # the title may already say when
        self.title = candidate.title
        self.body = " ".join(candidate.content.split())

    def group(self) -> tuple[str, str, str] | None:
        return (self.kind, self.when, self.title) if self.title else None

    def line(self, under_header: bool = False) -> str:
        ids = " ".join(f"#{ident}" for ident in self.ids)
        if under_header:
            return f"  {ids} {self.body}"
        label = " · ".join(part for part in (ids, self.kind, self.when) if part)
        label = f"[{label}]" if self.kind or self.when else label
        return f"- {label} {self.title}: {self.body}" if self.title else f"- {label} {self.body}"


def card(candidate: Candidate, *, show_type: bool = True) -> str:
    """One compact line per memory: id, type, date, title, then the body (the date only where the
    title does not already hold it; the type only where the block's memories are of several)."""
    return Card(candidate, show_type=show_type).line()


# Query-aware briefings (a `query`): about this share of the budget goes to whole cards, the best
# ranked; the rest to snippets of the next ones (the words about the query's words), so a briefing
# names more of the memories that bear on the task. Near-duplicates are merged into one card.
WHOLE_SHARE = 0.25
SNIPPET_WORDS = 6
NEAR_DUPLICATE = 0.8  # Jaccard similarity of two memories' words that makes them one card
MERGE_WINDOW = 500  # candidates (in rank order) compared for near-duplicates
_P, _Q = round(NEAR_DUPLICATE * 1000), 1000  # NEAR_DUPLICATE as a ratio of integers
_WORD = re.compile(r"\w+")
ELLIPSIS = "…"


def _key(word: str) -> str:
    """A word as the query is matched on: lower-cased, long words by their first five letters
    (so "painted" meets "paint", "realizing" "realize", in any language)."""
    word = word.lower()
    return word[:5] if len(word) > 5 else word


def query_weights(query: str, candidates: list[Candidate]) -> dict[str, float]:
    """Each query word's weight: how rare it is among the candidates (a word most of them hold,
    "the", "what", says nothing about which memory bears on the query)."""
    keys = {_key(w) for w in _WORD.findall(query)}
    if not keys or not candidates:
        return {}
    held = [{_key(w) for w in _WORD.findall(f"{c.title} {c.content}")} for c in candidates]
    total = len(candidates)
    weights = {k: math.log((total + 1) / (sum(k in h for h in held) + 0.5)) for k in keys}
    return {k: w for k, w in weights.items() if w > 0}


def snippet(text: str, weights: dict[str, float], words: int) -> str:
    """The `words` words of `text` that hold the most of the query's weight, `…` where cut."""
    parts = text.split()
    if len(parts) <= words:
        return " ".join(parts)
    score = [weights.get(_key(w.strip(".,;:!?()\"'")), 0.0) for w in parts]
    best = max(range(len(parts) - words + 1), key=lambda at: (sum(score[at : at + words]), -at))
    return (
        ((ELLIPSIS + " ") if best else "")
        + " ".join(parts[best : best + words])
        + (" " + ELLIPSIS if best + words < len(parts) else "")
    )


def cut_to(text: str, tokens: int, count: Callable[[str], int], marker: str) -> str:
    """The longest prefix of `text` that, with `marker`, counts at most `tokens` (binary search)."""
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if count(text[:mid].rstrip() + marker) <= tokens:
            low = mid
        else:
            high = mid - 1
    return text[:low].rstrip() + marker if low else ""


class Briefing:
    def __init__(self) -> None:
        self.text = ""
        self.tokens_used = 0
        self.selected: list[dict[str, Any]] = []
        self.omitted: list[str] = []
        self.truncated: list[str] = []  # ids of cards cut to fit (the budget's misfit, or the card cap)
        self.snippets: list[str] = []  # ids of cards cut to their words about the query
        self.unit = ""
        self.estimate = False
        self.budget: int | None = None
        self.limited: int | None = None  # the limit that left the omitted out (not the budget)
        self.fits_one: tuple[int, str] | None = None  # (the smallest budget that takes a card, its id), when none fit

    @property
    def nudge(self) -> str:
        """What was left out and why, in words: the ids, the limit or budget that left them out,
        and, when no card fits at all, the smallest budget that takes one."""
        n = len(self.omitted)
        if not n:
            return ""
        shown = ", ".join(f"#{i}" for i in self.omitted[:NAMED])
        ids = shown + (f" and {n - NAMED} more" if n > NAMED else "")
        left = f"{n} memor{'y' if n == 1 else 'ies'} left out ({ids})"
        if self.limited is not None:
            return f"{left}: the limit is {self.limited}"
        unit = f"{self.unit} tokens" + (" (an estimate)" if self.estimate else "")
        if self.selected:
            return f"{left}: over the budget of {self.budget} {unit}; prune them, or give a larger budget"
        if self.fits_one is None:
            return f"{left}: no card fits the budget of {self.budget} {unit}"
        need, first = self.fits_one
        return (f"{left}: no card fits the budget of {self.budget} {unit}; the smallest budget that fits one whole "
                f"(#{first}) is {need}")  # fmt: skip

    def manifest(self, options: dict[str, Any]) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "estimate": self.estimate,
            "budget": self.budget,
            **options,
            "tokens_used": self.tokens_used,
            "selected": self.selected,
            "omitted": {"count": len(self.omitted), "ids": self.omitted},
            "truncated": {"count": len(self.truncated), "ids": self.truncated},
            "snippets": {"count": len(self.snippets), "ids": self.snippets},
            "nudge": self.nudge,
            "text": self.text,
        }


def pack(
    candidates: list[Candidate],
    count: Callable[[str], int],
    unit: str,
    *,
    budget: int | None,
    order: list[int],
    limit: int | None = None,
    over_budget: str = "omit",
    fill: str = "stop",
    card_max_tokens: int | None = None,
    estimate: bool = False,
    query: str | None = None,
) -> Briefing:
    """Select and render. The whole emitted block is counted and never exceeds the budget
    (except pinned entries, which are never dropped, and keep-top, which keeps the top one).

    Near-duplicate memories become one card naming each id; cards that share a title are written
    under one header. With a `query`, a card over `card_max_tokens` keeps its words about the query
    (not its head), and once whole cards have taken WHOLE_SHARE of the budget, the next ones are
    snippets: the SNIPPET_WORDS words about the query's words."""
    out = Briefing()
    out.unit, out.estimate, out.budget = unit, estimate, budget
    show_type = len(candidates) < 2 or len({c.type for c in candidates}) > 1  # one type for all: said by none
    weights = query_weights(query, candidates) if query else {}
    order, folded = _merge_near_duplicates(candidates, order)
    cards: dict[int, Card] = {}  # made (and counted) only when the selection reaches them
    capped: set[int] = set()  # cards cut to card_max_tokens
    snipped: set[int] = set()  # cards cut to their words about the query
    whole = [0]  # what whole cards cost so far (a query-aware briefing turns to snippets past its share)

    def card_of(index: int) -> Card:
        if index not in cards:
            made = Card(candidates[index], show_type=show_type, ids=[candidates[index].id, *folded.get(index, [])])
            if weights and budget is not None and whole[0] > WHOLE_SHARE * budget:
                shorter = snippet(made.body, weights, SNIPPET_WORDS)
                if shorter != made.body:
                    made.body = shorter
                    snipped.add(index)
            if card_max_tokens is not None and count(made.line()) > card_max_tokens:
                if weights:  # its words about the query, as many as the cap holds
                    words = len(made.body.split())
                    while (
                        words > 1
                        and count(_with_body(made, snippet(made.body, weights, words)).line()) > card_max_tokens
                    ):
                        words = words * 3 // 4
                    made.body = snippet(made.body, weights, max(1, words))
                else:
                    made.body = cut_to(made.line(), card_max_tokens, count, ELLIPSIS)[
                        len(made.line()) - len(made.body) :
                    ]
                capped.add(index)
            cards[index] = made
            if index not in snipped:
                whole[0] += count(made.line())
        return cards[index]

    frame = f"{OPEN_TAG.format(unit=unit, budget=budget if budget is not None else 'none')}\n{CLOSE_TAG}"
    frame_cost = count(frame)
    room = None if budget is None else budget - frame_cost
    pinned = frozenset(i for i, c in enumerate(candidates) if c.pinned)
    chosen = select(lambda i: count(card_of(i).line() + "\n"), order, room, limit=limit, over_budget=over_budget,
                    fill=fill, pinned=pinned)  # fmt: skip
    kept = list(chosen.kept)
    truncated = chosen.truncated
    if truncated is not None:
        made = cards[truncated]
        line = cut_to(made.line(), chosen.truncate_to - count("\n"), count, TRUNCATION_MARKER)
        if line:
            made.body = line[len(made.line()) - len(made.body) :]
        else:
            kept.remove(truncated)
            truncated = None
    elif budget is not None and over_budget == "omit":
        kept = _top_up(cards, card_of, kept, chosen.omitted, count, unit, budget, limit, fill)
    while True:
        text = _block(cards, kept, unit, budget)
        used = count(text) if kept else 0
        # Per-card counts are additive in practice; the exact count of the block decides.
        fits = budget is None or used <= budget or over_budget == "keep-top"
        removable = [i for i in kept if i not in pinned]
        if fits or not removable:
            break
        kept.remove(removable[-1])
    out.text, out.tokens_used = (text, used) if kept else ("", 0)
    out.selected = [
        {"id": candidates[i].id, "tokens": count(cards[i].line()), "pinned": candidates[i].pinned,
         "truncated": i == truncated or i in capped, "snippet": i in snipped, "merged": folded.get(i, [])}
        for i in kept
    ]  # fmt: skip
    out.truncated = [candidates[i].id for i in kept if i == truncated or i in capped]
    out.snippets = [candidates[i].id for i in kept if i in snipped]
    kept_set = set(kept)
    out.omitted = [candidates[i].id for i in order if i not in kept_set]
    out.omitted += [ident for i in order if i not in kept_set for ident in folded.get(i, [])]
    out.limited = limit if limit is not None and len(kept) >= limit else None
    if not kept and out.omitted and budget is not None and out.limited is None:
        # The selection takes the first card in rank order that fits (any that fits, with fill=skip).
        tried = order if fill == "skip" else order[:1]
        need, first = min((_fits(card_of(i), count, unit, budget), j) for j, i in enumerate(tried))
        out.fits_one = (need, candidates[tried[first]].id)
    return out


def _fits(made: Card, count: Callable[[str], int], unit: str, budget: int) -> int:
    """The smallest budget whose block holds this card. The block names its budget, so its count
    depends on that number: up until a budget holds the block that names it, then down while one
    less still does."""

    def cost(named: int) -> int:
        return count(_block({0: made}, [0], unit, named))

    need = cost(budget)
    while cost(need) > need:
        need = cost(need)
    while need > 1 and cost(need - 1) <= need - 1:
        need -= 1
    return need


def _with_body(made: Card, body: str) -> Card:
    copy = Card.__new__(Card)
    copy.ids, copy.kind, copy.when, copy.title, copy.body = made.ids, made.kind, made.when, made.title, body
    return copy


def _merge_near_duplicates(candidates: list[Candidate], order: list[int]) -> tuple[list[int], dict[int, list[str]]]:
    """`order` without the memories that nearly repeat a better-ranked one (their words the same,
    Jaccard >= NEAR_DUPLICATE), and for each card kept the ids folded into it. A pinned memory is
    never folded away."""
    kept: list[tuple[int, set[str], int]] = []
    folded: dict[int, list[str]] = {}
    out = []
    for index in order[:MERGE_WINDOW]:  # past the window, the order as it is (its words never read)
        words = {w.lower() for w in _WORD.findall(candidates[index].content)}
        size = len(words)
        if words and not candidates[index].pinned:
            # |a & b| >= t * |a | b| with |a | b| = |a| + |b| - |a & b|, in integers (t = _P / _Q);
            # |a & b| <= min(|a|, |b|) rules out most pairs by their sizes alone
            twin = next((k for k, seen, other in kept
                         if min(size, other) * (_Q + _P) >= _P * (size + other)
                         and len(words & seen) * (_Q + _P) >= _P * (size + other)), None)  # fmt: skip
            if twin is not None:
                folded.setdefault(twin, []).append(candidates[index].id)
                continue
        kept.append((index, words, size))
        out.append(index)
    return out + order[MERGE_WINDOW:], folded


def _top_up(cards: dict[int, Card], card_of: Callable[[int], Card], kept: list[int], omitted: list[int],
            count: Callable[[str], int], unit: str, budget: int, limit: int | None, fill: str) -> list[int]:  # fmt: skip
    """Cards under a shared header cost less than alone: the selection (by each card alone) may
    leave room; fill it with the next cards while the exact block fits."""
    kept = list(kept)
    for index in omitted:
        if limit is not None and len(kept) >= limit:
            break
        card_of(index)
        if count(_block(cards, [*kept, index], unit, budget)) <= budget:
            kept.append(index)
        elif fill == "stop":
            break
    return kept


def _block(cards: dict[int, Card], kept: Iterable[int], unit: str, budget: int | None) -> str:
    """The memory-cards block: each card in rank order, those that share a title and label after
    the first of them, under its header."""
    groups: dict[Any, list[int]] = {}
    for index in kept:
        key = cards[index].group()
        groups.setdefault(key if key is not None else ("", "", f"\0{index}"), []).append(index)
    lines = [OPEN_TAG.format(unit=unit, budget=budget if budget is not None else "none")]
    for members in groups.values():
        lines.append(cards[members[0]].line())
        lines += [cards[i].line(under_header=True) for i in members[1:]]
    lines.append(CLOSE_TAG)
    return "\n".join(lines) + "\n"


def card_blocks(text: str) -> list[str]:
    """The memory-card blocks a dispatch prompt carries (as `brief` emits them). One pass: an
    opening tag with no closing tag after it ends the search (no later one can close)."""
    out: list[str] = []
    at = 0
    while True:
        start = text.find("<memory-cards", at)
        if start < 0:
            return out
        head = text.find(">", start)
        end = text.find(CLOSE_TAG, head) if head >= 0 else -1
        if end < 0:
            return out
        if head + 1 <= end and text[start + len("<memory-cards")] in " \t\n>":
            out.append(text[start : end + len(CLOSE_TAG)])
        at = end + len(CLOSE_TAG)
