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


def card(candidate: Candidate) -> str:
    """One compact line per memory: id, type, date, title, then the body."""
    label = " · ".join(part for part in (f"#{candidate.id}", candidate.type, _date(candidate.created_at)) if part)
    body = " ".join(candidate.content.split())
    head = f"- [{label}] {candidate.title}: " if candidate.title else f"- [{label}] "
    return head + body


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
) -> Briefing:
    """Select and render. The whole emitted block is counted and never exceeds the budget
    (except pinned entries, which are never dropped, and keep-top, which keeps the top one)."""
    out = Briefing()
    out.unit, out.estimate, out.budget = unit, estimate, budget
    cards: dict[int, str] = {}  # rendered (and counted) only when the selection reaches them

    capped: set[int] = set()  # cards cut to card_max_tokens

    def card_of(index: int) -> str:
        if index not in cards:
            text = card(candidates[index])
            if card_max_tokens is not None and count(text) > card_max_tokens:
                text = cut_to(text, card_max_tokens, count, "…")
                capped.add(index)
            cards[index] = text
        return cards[index]

    frame = f"{OPEN_TAG.format(unit=unit, budget=budget if budget is not None else 'none')}\n{CLOSE_TAG}"
    frame_cost = count(frame)
    room = None if budget is None else budget - frame_cost
    pinned = frozenset(i for i, c in enumerate(candidates) if c.pinned)
    chosen = select(lambda i: count(card_of(i) + "\n"), order, room, limit=limit, over_budget=over_budget, fill=fill,
                    pinned=pinned)  # fmt: skip
    kept = list(chosen.kept)
    truncated = chosen.truncated
    if truncated is not None:
        cards[truncated] = cut_to(cards[truncated], chosen.truncate_to - count("\n"), count, TRUNCATION_MARKER)
        if not cards[truncated]:
            kept.remove(truncated)
            truncated = None
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
        {"id": candidates[i].id, "tokens": count(cards[i]), "pinned": candidates[i].pinned,
         "truncated": i == truncated or i in capped}
        for i in kept
    ]  # fmt: skip
    out.truncated = [candidates[i].id for i in kept if i == truncated or i in capped]
    kept_set = set(kept)
    out.omitted = [candidates[i].id for i in order if i not in kept_set]
    out.limited = limit if limit is not None and len(kept) >= limit else None
    if not kept and out.omitted and budget is not None and out.limited is None:
        # The selection takes the first card in rank order that fits (any that fits, with fill=skip).
        tried = order if fill == "skip" else order[:1]
        need, first = min((_fits(card_of(i), count, unit, budget), j) for j, i in enumerate(tried))
        out.fits_one = (need, candidates[tried[first]].id)
    return out


def _fits(card_text: str, count: Callable[[str], int], unit: str, budget: int) -> int:
    """The smallest budget whose block holds this card. The block names its budget, so its count
    depends on that number: up until a budget holds the block that names it, then down while one
    less still does."""

    def cost(named: int) -> int:
        return count(_block({0: card_text}, [0], unit, named))

    need = cost(budget)
    while cost(need) > need:
        need = cost(need)
    while need > 1 and cost(need - 1) <= need - 1:
        need -= 1
    return need


def _block(cards: dict[int, str], kept: Iterable[int], unit: str, budget: int | None) -> str:
    lines = [OPEN_TAG.format(unit=unit, budget=budget if budget is not None else "none")]
    lines += [cards[i] for i in kept]
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
