"""The compiled policy as the engine reads it: plain data, with the lookups a hook needs.

The policy room (governor.policy) builds this form from the YAML files and caches it; the
engine only reads it. Also here: the fixed lines the engine may add to the model's context,
which the compile step counts in the policy's unit so a hook never loads a tokenizer for them.

Hot path: standard library only, no `typing`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# Lines the engine may add to the model's context; compiled policies carry their token counts.
FIXED_LINES = {
    "save_over_limit": "memory-governor: past this turn's save limit. Save only deltas: decisions, bugfixes, "
    "patterns, preferences, constraints.",
    "recall_armed": "memory-governor: explicit recall requested; mem_context is allowed once this turn.",
    # Not a line of its own: what a search result carries around its hits at most (its header and
    # the held-back note, at their widest), so a search lowered to fit the budget leaves room for it.
    "search_frame": "Found 20 memories:\n\n[memory-governor] 20 of 20 entries held back: this turn's memory budget "
    "is 1000000 cl100k_base tokens. Narrow the query, or ask again next turn.",
}


KNOWN_SERVER, KNOWN_TOOL, KNOWN_AGENT = 1, 2, 4  # CompiledPolicy.known_names: bits of a ledger row's known_names


class CompiledPolicy:
    """The effective policy as plain data, with the lookups a hook needs precomputed."""

    def __init__(self, blob: dict[str, Any]) -> None:
        self.blob = blob
        self.data: dict[str, Any] = blob["policy"]
        self.digest: str = blob["digest"]
        self.sources: list[str] = blob["sources"]
        self.tools: dict[str, dict[str, dict[str, Any]]] = blob["index"]["tools"]
        self.recall_phrases: list[str] = blob["index"]["recall_phrases"]
        # classify.required of each memory-need pattern (absent from an older compile: none skipped)
        self.pattern_words: dict[str, list[str] | None] = blob["index"].get("pattern_words", {})
        self.mode: str = self.data["mode"]
        self.on_error: str = self.data["on_error"]
        self.unit: str = self.data["token_counter"]
        self.limits: dict[str, dict[str, Any]] = self.data["limits"]
        self.ladder: dict[str, dict[str, Any]] = self.data["ladder"]
        # When a person last accepted the policy (governor.policy.acceptance); None: not known.
        self.accepted_at: float | None = None
        # A loosening in the files held back (governor.policy.acceptance): the changes named, and
        # the digest of the files that make them; None: nothing is held back.
        self.held: tuple[str, str] | None = None
        # The project root it governs (governor.policy.projects); None: not loaded for one.
        self.project: str | None = None
        # Where its patterns' `_sre` code is kept, without the ending (governor.engine.patterns);
        # None: nowhere, `re` compiles them.
        self.forms: str | None = None
        # Where the same policy's file may be kept for every project of the state directory (the
        # policy room's folder kept by content), looked for only when `forms` has none; None: nowhere.
        self.shared_forms: Callable[[], str | None] | None = None
        self._names: tuple[set[str], set[str], set[str], set[str]] | None = None  # known_names, once

    def tool(self, server: str, tool: str) -> dict[str, Any] | None:
        """The spec (role, parameter names, result format) of a governed tool, else None.

        A server is governed by what it is, not only by the name the policy lists: a tool named
        as a mapping with `any_server` maps it (or ends a longer name after a `_` or `-`, as a harness
        that splits `mcp_<server>_<tool>` at the first `_` hands it over), on any server.
        A tool of a listed server, or named with such a mapping's `tool_prefix`, that no map names
        is role `other` (its result counted and trimmed) unless the mapping says `unmapped: pass`."""
        by_tool = self.tools.get(server)
        spec = by_tool.get(tool) if by_tool else None
        if spec is not None:
            return spec
        index: dict[str, dict[str, dict[str, Any]]] = self.blob["index"]
        known = index.get("by_name", {})
        name = _named(tool, known)
        if name is not None:
            return known[name]
        if by_tool:
            return index.get("unmapped", {}).get(server)
        prefixes = index.get("prefixes", {})
        for prefix, other in prefixes.items():
            if tool.startswith(prefix) or f"__{prefix}" in tool:
                return other
        return None

    def known_names(self, server: str | None, tool: str | None, agent_type: str) -> int:
        """Which of a call's names this policy names itself (KNOWN_*): a server it lists, a
        tool one of its maps, routes or dispatch tools name, an agent under subagents.agents. The
        others are the model's to choose (a server it registers, a definition it writes)."""
        names = self._names
        if names is None:
            mapped = {tool for by_tool in self.tools.values() for tool in by_tool}
            plain = set(self.blob["index"].get("routes", {})) | set(self.data["briefing"]["dispatch_tools"])
            names = self._names = (set(self.tools), mapped, plain, set(self.data["subagents"].get("agents") or {}))
        servers, mapped, plain, agents = names
        known = KNOWN_SERVER if server in servers else 0
        if tool and (tool in mapped if server else tool in plain):
            known |= KNOWN_TOOL
        return known | (KNOWN_AGENT if agent_type in agents else 0)

    def routes_for(self, tool_name: str) -> list[dict[str, Any]]:
        """The policy's other ways to the memory that go through this (non-memory) tool."""
        numbers = self.blob["index"].get("routes", {}).get(tool_name, ())
        return [self.data["routes"][n] for n in numbers]

    def route_words(self, tool_name: str) -> list[list[str] | None] | None:
        """For each of routes_for(tool_name): words one of which every match of its pattern holds."""
        words = self.blob["index"].get("route_words")
        if words is None:
            return None
        return [words[n] for n in self.blob["index"].get("routes", {}).get(tool_name, ())]

    def limit(self, name: str) -> tuple[int, str]:
        entry = self.limits[name]
        return entry["value"], entry["enforce"]


def _named(tool: str, known: dict[str, Any]) -> str | None:
    """`tool` itself, or the longest end of it after a `_` or `-`, when it is a name in `known`."""
    if tool in known:
        return tool
    if not known or len(tool) > 200:
        return None
    for at, char in enumerate(tool):
        if char in "_-" and tool[at + 1 :] in known:
            return tool[at + 1 :]
    return None


def index(policy: dict[str, Any]) -> dict[str, Any]:
    """Lookups derived once at compile time, so a hook does no work to find them."""
    tools: dict[str, dict[str, dict[str, Any]]] = {}
    by_name: dict[str, dict[str, Any]] = {}  # tools governed on any server, by their own name
    unmapped: dict[str, dict[str, Any]] = {}  # listed server -> the spec of a tool its map does not name
    prefixes: dict[str, dict[str, Any]] = {}  # tool prefix -> the spec of an unmapped tool named with it
    for mapping in policy["tools"]:
        other = {"role": "other", "format": mapping["format"]}
        for server in mapping["servers"]:
            for tool, spec in mapping["map"].items():
                tools.setdefault(server, {})[tool] = {"format": mapping["format"], **spec}
            if mapping.get("unmapped", "count") == "count":
                unmapped.setdefault(server, other)
        if mapping.get("any_server"):
            for tool, spec in mapping["map"].items():
                by_name.setdefault(tool, {"format": mapping["format"], **spec})
            if mapping.get("tool_prefix") and mapping.get("unmapped", "count") == "count":
                prefixes.setdefault(mapping["tool_prefix"], other)
    recall = policy["mem_context"]["unlocked_by"].get("explicit_user_recall", {})
    routes: dict[str, list[int]] = {}
    for number, route in enumerate(policy.get("routes", [])):
        for tool in route["tools"]:
            routes.setdefault(tool, []).append(number)
    from governor.engine.classify import required

    classes = policy["memory_needs"]["classes"].values()
    return {
        "tools": tools,
        "by_name": by_name,
        "unmapped": unmapped,
        "prefixes": prefixes,
        "recall_phrases": [p.casefold() for p in recall.get("phrases", [])],
        "routes": routes,
        "route_words": [_route_words(r["pattern"]) if r.get("pattern") else None for r in policy.get("routes", [])],
        "pattern_words": {p: required(p) for need in classes for p in need.get("patterns", [])},
    }


# What a route's placeholders are called in its required words (governor.engine.routes fills them in).
PLACE_WORDS = {"{state}": "mgplacestate", "{ledger}": "mgplaceledger"}


def _route_words(pattern: str) -> list[str] | None:
    """Words (lower case) one of which every match of a route's pattern holds; None when there are none."""
    from governor.engine.classify import required

    for name, word in PLACE_WORDS.items():
        pattern = pattern.replace(name, word)
    return required(pattern)
