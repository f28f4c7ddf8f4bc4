"""Memory-server results as entries: parse them, and render a result with some held back.

A result is a sequence of segments in their original order: structure (headers, section
headings, footers) and entries (one search hit, one timeline line, one context bullet, one
observation, one graph entity). Rendering keeps the structure, the kept entries, and the
governor's one-line note, so the model sees the server's own format with fewer entries.

Formats: Engram v1 (plain text) and v2 (the same text inside a JSON envelope, with a
`results` array), Engram v2 compact search, a knowledge graph (`entities`/`relations`, as
@modelcontextprotocol/server-memory returns), and anything else as one entry.

Ids are surfaced (made fetchable at L2/L3) only where the format puts them, and only when
the whole result is consistent: a search's hits are numbered 1..N under its own "Found N
memories:" header, a timeline has one focus with older ids before it and newer after. A hit
line forged inside a preview or title breaks that count or order, so the result surfaces
nothing; text that merely mentions an id (an echoed query, an unknown format) surfaces
nothing either. (A search cut to its first k hits, as a trim renders it, is consistent.)
At most MAX_ENTRIES entries are told apart; the rest of a result stays in the last one.

Delivered-once: `fingerprints` names each entry by its server, id and a digest of its text
(a search hit's rank number left out, so the same hit at another rank is the same entry), and
`point` replaces an entry the model already holds whole by one short line in the result's own
shape naming it (the line keeps a search hit's `[i] #id (` so the result still parses).

Hot path (PostToolUse): standard library only; `re` is already loaded by `json`.
"""

from __future__ import annotations

import json
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_ENTRIES = 500
_SEARCH_HEADER = re.compile(r"\AFound (\d{1,6}) memor(?:y|ies)[^\n]{0,200}:\n")
_SEARCH_HIT = re.compile(r"^\[(\d{1,6})\] #(\d{1,19}) \(", re.M)
_SEARCH_FOOTER = re.compile(r"^---\nResults above are previews|\n\n⚠️ No mem_save", re.M)
_TIMELINE_LINE = re.compile(r"^(?:  #(\d{1,19}) \[|>>> #(\d{1,19}) \[)", re.M)
_TIMELINE_HEADING = re.compile(r"^─── (?:Before|After) ───\n", re.M)
_OBSERVATION = re.compile(r"\A#(\d{1,19}) \[")
# Engram v2's mem_get_observation with include_history: the observation, then this heading and
# one block per earlier version, oldest first.
_HISTORY = re.compile(r"\n\nHistory \((\d{1,6}) previous versions?\):(?=\n\n--- Version )")
_VERSION = re.compile(r"\n\n--- Version (\d{1,9}) \([^)\n]{0,80}\) ---\n")
# mem_context: only Engram's own headings and bullet shapes start a section or an entry, so a
# preview that itself contains "## Goal" or "- item" lines stays inside its entry.
_CONTEXT_HEADING = re.compile(
    r"^(?:## Memory from Previous Sessions|### (?:Recent Sessions|Recent User Prompts|Recent Observations|Pinned))[ \t]*\n",
    re.M,
)
_CONTEXT_BULLET = re.compile(
    r"^- (?:\*\*[^*\n]+\*\* \(\d{4}-\d\d-\d\d|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d: |\[[^\]\n]+\] \*\*)", re.M
)
_CONTEXT_TAIL = re.compile(r"^\n?---\nMemory stats:", re.M)
_HASH_ID = re.compile(r"#(\d+)")


class Segment:
    __slots__ = ("entry", "group", "text")

    def __init__(self, text: str, entry: int | None = None, group: int = 0) -> None:
        self.text = text
        self.entry = entry  # index into Parsed.entries, or None for structure
        self.group = group  # a section: its heading is dropped when all its entries are


class Entry:
    __slots__ = ("idents", "item", "priority", "text")

    def __init__(self, text: str, idents: list[str], priority: int = 0, item: Any = None) -> None:
        self.text = text
        self.idents = idents  # the ids this entry shows the model (what L3 may then fetch)
        self.priority = priority  # lower is kept first
        self.item = item  # a structured item (v2 results[] element, graph node) kept alongside


class Parsed:
    def __init__(self, kind: str, segments: list[Segment], entries: list[Entry]) -> None:
        self.kind = kind
        self.segments = segments
        self.entries = entries
        self.envelope: dict[str, Any] | None = None  # Engram v2: everything but "result"
        self.graph: dict[str, Any] | None = None  # knowledge graph: the parsed JSON
        self.indent: int | None = None  # how the graph JSON was laid out, so a trim keeps its size down

    def ranked(self) -> list[int]:
        """Entry indexes, most important first (server order, then priority)."""
        return sorted(range(len(self.entries)), key=lambda i: (self.entries[i].priority, i))


def parse(text: str, role: str, fmt: str = "auto") -> Parsed:
    """Split a result into entries. Never fails: an unknown shape is one entry."""
    stripped = text.lstrip()
    if stripped.startswith("{") and fmt in ("auto", "engram", "knowledge_graph"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            if isinstance(data.get("result"), str) and fmt != "knowledge_graph":
                return _engram_v2(data, role)
            if isinstance(data.get("entities"), list) or isinstance(data.get("relations"), list):
                graph = _graph(data)
                graph.indent = 2 if "\n  " in text[:200] else None
                return graph
    if fmt != "text" and fmt != "knowledge_graph":
        parsed = _engram_text(text, role)
        if parsed is not None:
            return parsed
    return _whole(text)


def _whole(text: str) -> Parsed:
    """One opaque entry. It surfaces nothing: an id merely mentioned in it was not shown as a hit."""
    return Parsed("text", [Segment(text, 0)], [Entry(text, [])])


def _engram_text(text: str, role: str) -> Parsed | None:
    if role == "search":
        return _search(text)
    if role == "timeline":
        return _timeline(text)
    if role == "fetch":
        match = _OBSERVATION.match(text)
        if match:
            return _observation(text, match.group(1))
        return None
    if role == "context":
        return _context(text)
    return None


def _observation(text: str, ident: str) -> Parsed:
    """One observation; with its history (include_history), each earlier version an entry of its
    own, the newest kept first after the observation, so a trim drops old versions, not the
    observation. A history whose heading's count or version order does not match what follows
    it was written by someone else (inside the content): the whole text is one entry."""
    for heading in reversed(list(_HISTORY.finditer(text))):
        versions = list(_VERSION.finditer(text, heading.end()))
        numbers = [int(v.group(1)) for v in versions]
        if (
            len(versions) != int(heading.group(1))
            or numbers != sorted(set(numbers))
            or versions[0].start() != heading.end()
        ):
            continue
        body = text[: heading.start()]
        segments = [Segment(body, 0), Segment(text[heading.start() : heading.end()], None, 1)]
        entries = [Entry(body, [ident])]
        for start, stop in _split(text, [v.start() for v in versions], len(text)):
            segments.append(Segment(text[start:stop], len(entries), 1))
            entries.append(Entry(text[start:stop], [], priority=1 + len(versions) - len(entries)))
        return Parsed("engram_observation", segments, entries)
    return Parsed("engram_observation", [Segment(text, 0)], [Entry(text, [ident])])


def _split(text: str, starts: list[int], end: int) -> list[tuple[int, int]]:
    bounds = [*starts, end]
    return [(bounds[i], bounds[i + 1]) for i in range(len(starts))]


def _search(text: str) -> Parsed | None:
    header = _SEARCH_HEADER.match(text)
    hits = list(_SEARCH_HIT.finditer(text))
    if header is None or not hits:
        return None
    numbers = [int(hit.group(1)) for hit in hits]
    if numbers != list(range(1, len(numbers) + 1)) or len(numbers) > int(header.group(1)):
        # More hit lines than the header counts, or out of order: something was forged. (Fewer, in
        # order, is a result cut to its first hits, as a trim or a clamped replay renders it.)
        return None
    hits = hits[:MAX_ENTRIES]
    footer = _SEARCH_FOOTER.search(text, hits[-1].start())
    end = footer.start() if footer else len(text)
    segments = [Segment(text[: hits[0].start()])]
    entries: list[Entry] = []
    for (start, stop), hit in zip(_split(text, [h.start() for h in hits], end), hits, strict=True):
        segments.append(Segment(text[start:stop], len(entries)))
        entries.append(Entry(text[start:stop], [hit.group(2)]))
    segments.append(Segment(text[end:]))
    return Parsed("engram_search", segments, entries)


def _timeline(text: str) -> Parsed | None:
    lines = list(_TIMELINE_LINE.finditer(text))
    if not lines or not _consistent_timeline(text, lines):
        return None
    lines = lines[:MAX_ENTRIES]
    focus = next((i for i, m in enumerate(lines) if m.group(2)), 0)
    cuts = sorted(
        [(m.start(), i, m) for i, m in enumerate(lines)]
        + [(h.start(), -1, h) for h in _TIMELINE_HEADING.finditer(text)],
        key=lambda c: c[0],
    )
    segments = [Segment(text[: cuts[0][0]])]  # the session header
    entries: list[Entry] = []
    group = 0
    for k, (start, position, match) in enumerate(cuts):
        stop = cuts[k + 1][0] if k + 1 < len(cuts) else len(text)
        if position < 0:  # ─── Before ─── / ─── After ───
            group += 1
            segments.append(Segment(text[start:stop], None, group))
            continue
        is_focus = match.group(2) is not None
        # The focus first, then its neighbours by distance.
        entries.append(Entry(text[start:stop], [match.group(1) or match.group(2)], priority=abs(position - focus)))
        segments.append(Segment(text[start:stop], len(entries) - 1, 0 if is_focus else group))
    return Parsed("engram_timeline", segments, entries)


def _consistent_timeline(text: str, lines: list[re.Match[str]]) -> bool:
    """One focus; older ids, increasing, only under the Before heading before it; newer ids,
    increasing, only under the After heading after it."""
    foci = [m for m in lines if m.group(2)]
    if len(foci) != 1:
        return False
    focus = foci[0]
    headings = {m.group(0).strip("─ \n"): m.start() for m in _TIMELINE_HEADING.finditer(text)}
    if len(list(_TIMELINE_HEADING.finditer(text))) != len(headings):
        return False  # a heading twice
    before, after = headings.get("Before", -1), headings.get("After", len(text) + 1)
    if before > focus.start() or after < focus.start():
        return False
    older = [int(m.group(1)) for m in lines if m.group(1) and m.start() < focus.start()]
    newer = [int(m.group(1)) for m in lines if m.group(1) and m.start() > focus.start()]
    if any(m.group(1) and (before < 0 or m.start() < before or focus.start() < m.start() < after) for m in lines):
        return False  # an entry line outside its section (inside the focus's own text)
    centre = int(focus.group(2))
    ascending = older == sorted(set(older)) and newer == sorted(set(newer))
    return ascending and all(i < centre for i in older) and all(i > centre for i in newer)


def _context(text: str) -> Parsed | None:
    bullets = list(_CONTEXT_BULLET.finditer(text))
    if not bullets or not text.startswith("## Memory from Previous Sessions"):
        return None
    bullets = bullets[:MAX_ENTRIES]
    tail = _CONTEXT_TAIL.search(text, bullets[-1].start())
    end = tail.start() if tail else len(text)
    headings = [m for m in _CONTEXT_HEADING.finditer(text, 0, end)]
    cuts = sorted({m.start() for m in bullets} | {m.start() for m in headings})
    heading_ends = {m.start(): m.end() for m in headings}
    segments = [Segment(text[: cuts[0]])] if cuts[0] > 0 else []
    entries: list[Entry] = []
    group = 0
    for index, start in enumerate(cuts):
        stop = cuts[index + 1] if index + 1 < len(cuts) else end
        if start in heading_ends:
            group += 1
            segments.append(Segment(text[start:stop], None, group))
            continue
        chunk = text[start:stop]
        segments.append(Segment(chunk, len(entries), group))
        entries.append(Entry(chunk, _HASH_ID.findall(chunk)[:1]))
    segments.append(Segment(text[end:]))
    return Parsed("engram_context", segments, entries)


def _engram_v2(data: dict[str, Any], role: str) -> Parsed:
    inner = data["result"]
    items = data.get("results") if isinstance(data.get("results"), list) else None
    parsed = _engram_text(inner, role)
    hits = [item for item in items or [] if isinstance(item, dict) and "id" in item][:MAX_ENTRIES]
    if parsed is None and hits and role == "search":
        # Compact search: the text is one line, the hits are the items.
        entries = [Entry(json.dumps(item, ensure_ascii=False), [str(item["id"])], item=item) for item in hits]
        parsed = Parsed("engram_v2_compact", [Segment(inner)], entries)
    elif parsed is None:
        parsed = _whole(inner)
    elif items is not None:
        by_id = {str(item["id"]): item for item in hits}
        for entry in parsed.entries:
            entry.item = by_id.get(entry.idents[0]) if entry.idents else None
            if entry.item is None:
                entry.idents = []  # a hit the structured results do not list was not a real hit
    history = data.get("history")
    if parsed.kind == "engram_observation" and isinstance(history, list):
        by_version = {item.get("version"): item for item in history if isinstance(item, dict)}
        for entry in parsed.entries[1:]:
            number = _VERSION.match(entry.text)
            entry.item = by_version.get(int(number.group(1))) if number else None
    parsed.kind = "v2:" + parsed.kind
    parsed.envelope = {k: v for k, v in data.items() if k not in ("result", "results")}
    if items is not None:
        parsed.envelope["results"] = items
    return parsed


def _graph(data: dict[str, Any]) -> Parsed:
    entries: list[Entry] = []
    for item in _items(data.get("entities")):
        name = item.get("name") if isinstance(item, dict) else None
        entries.append(Entry(json.dumps(item, ensure_ascii=False), [str(name)] if name else [], item=item))
    for item in _items(data.get("relations")):
        entries.append(Entry(json.dumps(item, ensure_ascii=False), [], priority=1, item=item))
    parsed = Parsed("knowledge_graph", [], entries)
    parsed.graph = data
    return parsed


def _items(value: Any) -> list[Any]:
    return value[:MAX_ENTRIES] if isinstance(value, list) else []


def render(parsed: Parsed, kept: set[int], note: str) -> str:
    """The result with only `kept` entries, and `note` (the governor's line) at the end."""
    if parsed.graph is not None:
        graph = {k: v for k, v in parsed.graph.items() if k not in ("entities", "relations")}
        chosen = [parsed.entries[i] for i in sorted(kept)]
        graph["entities"] = [entry.item for entry in chosen if entry.priority == 0]
        graph["relations"] = [entry.item for entry in chosen if entry.priority == 1]
        if parsed.indent is None:
            body = json.dumps(graph, ensure_ascii=False, separators=(",", ":"))
        else:
            body = json.dumps(graph, indent=parsed.indent, ensure_ascii=False)
        return f"{body}\n{note}" if note else body
    live_groups = {s.group for s in parsed.segments if s.entry is not None and s.entry in kept}
    has_entries = {s.group for s in parsed.segments if s.entry is not None}
    out = []
    for segment in parsed.segments:
        if segment.entry is not None:
            if segment.entry in kept:
                out.append(segment.text)
        elif segment.group == 0 or segment.group in live_groups or segment.group not in has_entries:
            out.append(segment.text)
    text = "".join(out)
    if note:
        text = f"{text.rstrip()}\n{note}\n" if text.strip() else f"{note}\n"
    if parsed.envelope is None:
        return text
    envelope = dict(parsed.envelope)
    envelope["result"] = text
    if isinstance(envelope.get("history"), list) and parsed.kind.endswith("engram_observation"):
        dropped = {id(entry.item) for i, entry in enumerate(parsed.entries) if i not in kept and entry.item is not None}
        envelope["history"] = [item for item in envelope["history"] if id(item) not in dropped]
    if isinstance(envelope.get("results"), list):
        kept_items = [parsed.entries[i].item for i in sorted(kept) if parsed.entries[i].item is not None]
        if parsed.kind.endswith("compact"):
            envelope["results"] = kept_items
        else:
            keep_ids = {id(item) for item in kept_items}
            envelope["results"] = [item for item in envelope["results"] if id(item) in keep_ids]
    return json.dumps(envelope, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


# A search hit's last line: its date, project and scope (not its snippet).
_HIT_META = re.compile(r"\n[ \t]{4}\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?: \| [^\n]{0,300})?(?=\n*\Z)")
SNIPPET_FIELDS = ("id", "type", "title", "preview", "topic_key")  # a compact v2 hit's own fields


def hits(parsed: Parsed) -> bool:
    """Is this result a list of search hits, each an entry with its id (what a search's slots hold)?"""
    return parsed.kind.removeprefix("v2:") in ("engram_search", "engram_v2_compact")


def snip(parsed: Parsed) -> bool:
    """Snippets only: each search hit as its snippet (id, type, title, preview), without what the
    server adds around it: a hit's date, project and scope line, the footer and nudges after the
    hits, and Engram v2's `results[]` array where it repeats the hits of the text (a compact v2
    hit keeps its snippet's fields, and `truncated` when it is). True when anything was cut."""
    kind = parsed.kind.removeprefix("v2:")
    changed = False
    if kind == "engram_search":
        for index, entry in enumerate(parsed.entries):
            cut = _HIT_META.sub("", entry.text)
            if cut != entry.text:
                _set_text(parsed, index, cut)
                changed = True
        tail = parsed.segments[-1]  # what follows the hits: only ever a footer (see _search)
        if tail.entry is None and tail.text.strip():
            tail.text, changed = "", True
        if parsed.envelope is not None and "results" in parsed.envelope:
            del parsed.envelope["results"]
            changed = True
    elif kind == "engram_v2_compact":
        for index, entry in enumerate(parsed.entries):
            item = entry.item
            kept = {k: item[k] for k in SNIPPET_FIELDS if k in item}
            if item.get("truncated"):
                kept["truncated"] = True
            if kept != item:
                entry.item = kept
                _set_text(parsed, index, json.dumps(kept, ensure_ascii=False))
                changed = True
    return changed


def _set_text(parsed: Parsed, index: int, text: str) -> None:
    parsed.entries[index].text = text
    for segment in parsed.segments:
        if segment.entry == index:
            segment.text = text


_RANK = re.compile(r"\A\[\d{1,6}\] ")


def fingerprints(parsed: Parsed, server: str) -> list[str]:
    """One fingerprint per entry: its server, its id (if it shows one) and a digest of its text,
    whitespace at the ends and a search hit's rank left out. Never the text itself."""
    from governor.state import sha256_hex

    out = []
    for entry in parsed.entries:
        text = entry.text.strip()
        if parsed.kind.endswith("engram_search"):
            text = _RANK.sub("", text)
        ident = entry.idents[0] if entry.idents else ""
        raw = "\0".join((server, ident, text)).encode("utf-8", "surrogatepass")
        out.append(sha256_hex(raw)[:32])
    return out


def point(parsed: Parsed, index: int, shown: str) -> bool:
    """Replace entry `index` by one line saying it was already shown (`shown`: when), in the
    result's own shape; its structured copy (a v2 `results[]` item) goes with it. An entry no
    longer than its pointer line is left as it is (False)."""
    entry = parsed.entries[index]
    ident = entry.idents[0] if entry.idents else ""
    kind = parsed.kind.removeprefix("v2:")
    end = "\n\n" if entry.text.endswith("\n\n") else "\n"
    label = f"#{ident}" if ident else "this entry"
    if kind == "engram_search":
        rank = _RANK.match(entry.text)
        text = f"{rank.group(0) if rank else ''}#{ident} (already shown {shown}: see it above)" + end
    elif kind == "engram_timeline":
        focus = entry.text.startswith(">>>")
        text = (
            f">>> #{ident} [already shown {shown}: see it above] <<<\n"
            if focus
            else f"  #{ident} [already shown {shown}: see it above]\n"
        )
    elif kind == "engram_observation":
        text = f"#{ident} [already shown in full {shown}: see it above]\n"
    elif kind == "engram_context":
        text = f"- [already shown {shown}: see it above] {label}" + end
    elif parsed.graph is not None or kind == "engram_v2_compact":
        key = "name" if parsed.graph is not None else "id"
        item: dict[str, Any] = {key: ident} if ident else {}
        item["already_shown"] = f"{shown}: see it above"
        text = json.dumps(item, ensure_ascii=False)
    else:
        text = f"[memory-governor] this result was already shown {shown}: see it above.\n"
    if len(text) >= len(entry.text):
        return False
    if parsed.graph is not None or kind == "engram_v2_compact":
        entry.item = item
    elif parsed.envelope is not None:
        entry.item = None  # the structured copy would deliver the whole entry again
    _set_text(parsed, index, text)
    return True


def surfaced(parsed: Parsed, kept: set[int]) -> list[str]:
    """The ids the model was shown: what an L2 timeline or L3 fetch may use this turn."""
    out: list[str] = []
    for index in sorted(kept):
        for ident in parsed.entries[index].idents:
            if ident not in out:
                out.append(ident)
    return out


def result_text(response: Any) -> str:
    """The text a tool result carries, whatever shape the harness sent it in."""
    if isinstance(response, str):
        return response
    if isinstance(response, list):
        parts = [str(part["text"]) for part in response if isinstance(part, dict) and isinstance(part.get("text"), str)
                 and part.get("type", "text") == "text"]  # fmt: skip
        if parts or not response:
            return "\n".join(parts)
    if isinstance(response, dict):
        content = response.get("content", response.get("llmContent"))  # an MCP result, or content parts
        if isinstance(content, list):
            return result_text(content)
        if isinstance(response.get("text"), str):
            return str(response["text"])
    return json.dumps(response, ensure_ascii=False)


# A result's topic keys, as Engram gives them: a "Topic: <key>" line of an observation (plain, or
# inside a JSON envelope's text), a "topic_key" field of a v2 search hit. Each is found by its
# literal first (str.find: a 60 MB result in ~0.1 s, where one regular expression over all of it
# took seconds), then matched where it stands.
_TOPIC_LINE = re.compile(r'Topic: ([^\s\\"]{1,200})')
_TOPIC_FIELD = re.compile(r'"topic_key"\s*:\s*"([^\s\\"]{1,200})"')
MAX_TOPICS = 50


def topic_keys(text: str) -> list[str]:
    """The topic keys a result names (the first MAX_TOPICS distinct ones): what the memory holds,
    for a trigger's `requires_topic`."""
    hits: list[tuple[int, str]] = []
    for needle, pattern in (("Topic: ", _TOPIC_LINE), ('"topic_key"', _TOPIC_FIELD)):
        seen: set[str] = set()
        at = text.find(needle)
        while at >= 0 and len(seen) < MAX_TOPICS:
            line_start = at == 0 or text[at - 1] == "\n" or text[at - 2 : at] == "\\n"
            match = pattern.match(text, at) if pattern is _TOPIC_FIELD or line_start else None
            if match is not None:
                seen.add(match.group(1))
                hits.append((at, match.group(1)))
            at = text.find(needle, match.end() if match is not None else at + 1)
    found: dict[str, None] = {}
    for _, key in sorted(hits):
        found[key] = None
        if len(found) >= MAX_TOPICS:
            break
    return list(found)
