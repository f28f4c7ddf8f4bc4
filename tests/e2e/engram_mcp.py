"""An Engram-shaped stdio MCP server for the end-to-end tests (standard library only).

Claude Code starts it from the MCP config under the server key ``engram``, so its tools reach
the model as ``mcp__engram__mem_search`` and so on, the names the shipped policy governs.

Protocol: JSON-RPC 2.0, one JSON object per line on stdin/stdout. Implemented: ``initialize``,
``notifications/*`` (ignored), ``ping``, ``tools/list``, ``tools/call``; ``resources/list`` and
``prompts/list`` answer empty lists; anything else gets error -32601.

Tools (text formats are Engram v1's, byte for byte; see /tmp/engram-formats.md §1a, 2a, 3a, 4a, 5a):
mem_search(query, limit=10 (server cap 20), type, project, scope), mem_timeline(observation_id,
before=5, after=5), mem_get_observation(id), mem_context(project, scope), mem_save(title,
content, type="manual", topic_key, project, scope, session_id), mem_update(id, ...),
mem_session_summary(content, project, session_id).

Environment:
- ENGRAM_SEED: JSON file ``{"sessions": [...], "prompts": [...], "observations": [...]}``
  (see tests/e2e/seed.py for the shape). Required.
- ENGRAM_STORE: optional JSON file holding the live store. Loaded instead of the seed when it
  exists, rewritten after every save, so saves persist across the MCP processes of several
  ``claude -p`` runs of one test.
- ENGRAM_CALL_LOG: optional; every tools/call is appended as one JSON line
  ``{"ts", "pid", "tool", "arguments"}`` so a test can assert what the server really received
  (e.g. the clamped ``limit``).
- ENGRAM_FORMAT=v2: wrap read results in the v2 JSON envelope (§1c, 2b, 3b, 4b, 5c); a search
  appends v2's footer and honours ``response_format: "compact"`` (the text one line, each hit once,
  in ``results[]`` with its preview); ``mem_context`` honours ``max_bytes`` (default 16384, at most
  65536: the block cut there with a ``[truncated]`` marker) and ``compact`` (no previews).
- ENGRAM_PROJECT: the project name the v2 envelope reports (default "myapp").

Search is simple: the query is split into lower-case words; an observation matches when any
word occurs in its title or content; relevance = distinct words matched (title matches count
double); ties go to the most recent (created_at, then id). Numeric arguments must be JSON
numbers, as in Engram (a string id falls back to 0: "id is required").
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import Any

PROTOCOL_FALLBACK = "2025-06-18"
MAX_SEARCH_RESULTS = 20
MAX_OBSERVATION_LENGTH = 2000  # early v1 store: content capped at save time (bytes)
NOW = "2026-08-01 12:00:00"  # saves get deterministic timestamps: NOW, then one second later each


def _truncate(text: str, limit: int) -> str:
    """Engram v1 (early) truncate: the first `limit` BYTES plus "..." (seeds are ASCII)."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", "ignore") + "..."


def _go_quote(text: str) -> str:
    """Go's %q for the strings we meet: double quotes, backslash escapes."""
    return json.dumps(text, ensure_ascii=False)


# -- the store ---------------------------------------------------------------------------


class Store:
    def __init__(self, seed_path: str | None = None, store_path: str | None = None, fmt: str | None = None) -> None:
        """From the environment by default; tests may name the files and the format directly."""
        self.v2 = (fmt or os.environ.get("ENGRAM_FORMAT") or "v1").lower() == "v2"
        seed_path = seed_path or os.environ.get("ENGRAM_SEED", "")
        self.store_path = store_path if seed_path else os.environ.get("ENGRAM_STORE") or None
        source = self.store_path if self.store_path and os.path.exists(self.store_path) else seed_path
        with open(source, encoding="utf-8") as handle:
            data = json.load(handle)
        self.sessions: list[dict[str, Any]] = data.get("sessions", [])
        self.prompts: list[dict[str, Any]] = data.get("prompts", [])
        self.observations: list[dict[str, Any]] = data.get("observations", [])
        self.saved = int(data.get("saved", 0))

    def persist(self) -> None:
        if not self.store_path:
            return
        data = {"sessions": self.sessions, "prompts": self.prompts, "observations": self.observations,
                "saved": self.saved}  # fmt: skip
        tmp = self.store_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(data, handle, ensure_ascii=False, indent=1)
        os.replace(tmp, self.store_path)

    def live(self) -> list[dict[str, Any]]:
        return [o for o in self.observations if not o.get("deleted")]

    def get(self, obs_id: int) -> dict[str, Any] | None:
        return next((o for o in self.live() if o["id"] == obs_id), None)

    def session(self, session_id: str) -> dict[str, Any] | None:
        return next((s for s in self.sessions if s["id"] == session_id), None)

    def now(self) -> str:
        base = time.mktime(time.strptime(NOW, "%Y-%m-%d %H:%M:%S"))
        self.saved += 1
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(base + self.saved))

    def search(self, query: str, typ: str, project: str, scope: str, limit: int) -> list[dict[str, Any]]:
        words = [w for w in re.findall(r"[\w-]+", query.lower()) if w]
        scored = []
        for obs in self.live():
            if typ and obs["type"] != typ:
                continue
            if project and obs.get("project") != project:
                continue
            if scope and obs.get("scope", "project") != scope:
                continue
            title, body = obs["title"].lower(), obs["content"].lower()
            score = sum(2 * (w in title) + (w in body) for w in set(words))
            if score > 0:
                scored.append((score, obs["created_at"], obs["id"], obs))
        scored.sort(key=lambda s: (-s[0], _neg(s[1]), -s[2]))
        return [s[3] for s in scored[:limit]]


def _neg(stamp: str) -> tuple[int, ...]:
    return tuple(-int(x) for x in re.findall(r"\d+", stamp))


# -- v2 envelope -------------------------------------------------------------------------


def _envelope(text: str, extra: dict[str, Any] | None = None) -> str:
    data: dict[str, Any] = {"project": os.environ.get("ENGRAM_PROJECT", "myapp"), "project_path": "",
                            "project_source": "explicit_override", "result": text}  # fmt: skip
    data.update(extra or {})
    out = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return out.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _sync_id(obs_id: int) -> str:
    return f"obs-{obs_id:016x}"


# -- tools -------------------------------------------------------------------------------


def _int_arg(args: dict[str, Any], name: str, default: int) -> int:
    value = args.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return int(value)


def _str_arg(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    return value if isinstance(value, str) else ""


class ToolError(Exception):
    pass


def mem_search(store: Store, args: dict[str, Any]) -> str:
    query = _str_arg(args, "query")
    limit = _int_arg(args, "limit", 10)
    if limit <= 0:
        limit = 10
    limit = min(limit, MAX_SEARCH_RESULTS)
    results = store.search(query, _str_arg(args, "type"), _str_arg(args, "project"), _str_arg(args, "scope"), limit)
    if not results:
        text = f"No memories found for: {_go_quote(query)}"
        return _envelope(text) if store.v2 else text
    lines = [f"Found {len(results)} memories:\n\n"]
    for i, r in enumerate(results, 1):
        project = f" | project: {r['project']}" if r.get("project") else ""
        lines.append(
            f"[{i}] #{r['id']} ({r['type']}) — {r['title']}\n    {_truncate(r['content'], 300)}\n"
            f"    {r['created_at']}{project} | scope: {r.get('scope', 'project')}\n\n"
        )
    text = "".join(lines)
    if not store.v2:
        return text
    compact = args.get("response_format") == "compact"
    items = []
    for r in results:
        item = {"id": r["id"], "pinned": False, "project": r.get("project"), "scope": r.get("scope", "project"),
                "state": "active", "sync_id": _sync_id(r["id"]), "title": r["title"], "type": r["type"]}  # fmt: skip
        if r.get("topic_key"):
            item["topic_key"] = r["topic_key"]
        if compact:  # each hit once: its preview in the item, the text one line
            preview = _truncate(r["content"], 300)
            item.update(preview=preview, truncated=preview != r["content"])
        items.append(item)
    if compact:
        return _envelope(f"Found {len(results)} memories.", {"results": items})
    return _envelope(text + V2_SEARCH_FOOTER, {"results": items})


V2_SEARCH_FOOTER = ("---\nResults above are previews (300 chars). To read the full content of a specific memory, "
                    "call mem_get_observation(id: <ID>).\n")  # fmt: skip


def mem_get_observation(store: Store, args: dict[str, Any]) -> str:
    obs_id = _int_arg(args, "id", 0)
    if obs_id == 0:
        raise ToolError("id is required")
    obs = store.get(obs_id)
    if obs is None:
        raise ToolError(f"Observation #{obs_id} not found")
    project = f"\nProject: {obs['project']}" if obs.get("project") else ""
    scope = f"\nScope: {obs.get('scope', 'project')}"
    topic = f"\nTopic: {obs['topic_key']}" if obs.get("topic_key") else ""
    meta = f"\nDuplicates: {obs.get('duplicates', 1)}\nRevisions: {obs.get('revisions', 1)}"
    text = (
        f"#{obs['id']} [{obs['type']}] {obs['title']}\n{obs['content']}\nSession: {obs['session_id']}"
        f"{project}{scope}{topic}{meta}\nCreated: {obs['created_at']}"
    )
    return _envelope(text) if store.v2 else text


def mem_timeline(store: Store, args: dict[str, Any]) -> str:
    obs_id = _int_arg(args, "observation_id", 0)
    if obs_id == 0:
        raise ToolError("observation_id is required")
    before = _int_arg(args, "before", 5)
    after = _int_arg(args, "after", 5)
    before = 5 if before <= 0 else before
    after = 5 if after <= 0 else after
    focus = store.get(obs_id)
    if focus is None:
        raise ToolError(f"Timeline error: timeline: observation #{obs_id} not found: sql: no rows in result set")
    same = sorted((o for o in store.live() if o["session_id"] == focus["session_id"]), key=lambda o: o["id"])
    earlier = [o for o in same if o["id"] < obs_id][-before:]
    later = [o for o in same if o["id"] > obs_id][:after]
    out = []
    session = store.session(focus["session_id"])
    if session is not None:
        summary = f" — {_truncate(session['summary'], 100)}" if session.get("summary") else ""
        out.append(f"Session: {session['project']} ({session['started_at']}){summary}\n")
        out.append(f"Total observations in session: {len(same)}\n\n")
    if earlier:
        out.append("─── Before ───\n")
        out += [f"  #{e['id']} [{e['type']}] {e['title']} — {_truncate(e['content'], 150)}\n" for e in earlier]
        out.append("\n")
    out.append(f">>> #{focus['id']} [{focus['type']}] {focus['title']} <<<\n")
    out.append(f"    {_truncate(focus['content'], 500)}\n")
    out.append(f"    {focus['created_at']}\n\n")
    if later:
        out.append("─── After ───\n")
        out += [f"  #{e['id']} [{e['type']}] {e['title']} — {_truncate(e['content'], 150)}\n" for e in later]
    text = "".join(out)
    return _envelope(text) if store.v2 else text


def context_sections(store: Store, project: str = "", scope: str = "") -> list[tuple[str, list[str]]]:
    """mem_context's sections as (heading, entries): each entry is one bullet exactly as printed.

    Tests use it to know which entries a context dump really has (a preview may hold Markdown
    headings and bullets of its own: they belong to their entry)."""
    sessions = [s for s in store.sessions if not project or s["project"] == project]
    sessions = sorted(sessions, key=lambda s: _neg(s["started_at"]))[:5]
    observations = [o for o in store.live() if (not project or o.get("project") == project)
                    and (not scope or o.get("scope", "project") == scope)]  # fmt: skip
    observations = sorted(observations, key=lambda o: (_neg(o["created_at"]), -o["id"]))[:20]
    prompts = [p for p in store.prompts if not project or p.get("project") == project]
    prompts = sorted(prompts, key=lambda p: _neg(p["created_at"]))[:10]
    out = []
    if sessions:
        lines = []
        for s in sessions:
            count = sum(1 for o in store.live() if o["session_id"] == s["id"])
            summary = f": {_truncate(s['summary'], 200)}" if s.get("summary") else ""
            lines.append(f"- **{s['project']}** ({s['started_at']}){summary} [{count} observations]\n")
        out.append(("### Recent Sessions\n", lines))
    if prompts:
        out.append(("### Recent User Prompts\n", [f"- {p['created_at']}: {_truncate(p['content'], 200)}\n"
                                                   for p in prompts]))  # fmt: skip
    if observations:
        out.append(("### Recent Observations\n", [f"- [{o['type']}] **{o['title']}**: {_truncate(o['content'], 300)}\n"
                                                   for o in observations]))  # fmt: skip
    return out


CONTEXT_MAX_BYTES = (16384, 65536)  # v2's mem_context: its default max_bytes, and the most it takes


def mem_context(store: Store, args: dict[str, Any]) -> str:
    sections = context_sections(store, _str_arg(args, "project"), _str_arg(args, "scope"))
    if not sections:
        text = "No previous session memories found."
        return _envelope(text) if store.v2 else text
    if store.v2 and args.get("compact") is True:  # v2 compact: each bullet without its preview
        sections = [(heading, [entry.split(": ", 1)[0].rstrip() + "\n" for entry in entries])
                    for heading, entries in sections]  # fmt: skip
    b = ["## Memory from Previous Sessions\n\n"]
    for heading, entries in sections:
        b += [heading, *entries, "\n"]
    by_recency = sorted(store.live(), key=lambda o: (_neg(o["created_at"]), -o["id"]))
    projects: list[str] = []
    for o in by_recency:
        if o.get("project") and o["project"] not in projects:
            projects.append(o["project"])
    text = (
        "".join(b) + f"\n---\nMemory stats: {len(store.sessions)} sessions, {len(store.live())} observations "
        f"across projects: {', '.join(projects) or 'none'}"
    )
    if not store.v2:
        return text
    most = _int_arg(args, "max_bytes", CONTEXT_MAX_BYTES[0])
    most = min(most if most > 0 else CONTEXT_MAX_BYTES[0], CONTEXT_MAX_BYTES[1])
    raw = text.encode("utf-8")
    if len(raw) > most:
        text = raw[:most].decode("utf-8", "ignore") + "\n[truncated]"
    return _envelope(text)


_FAMILIES = {
    "architecture": "architecture", "design": "architecture", "adr": "architecture", "refactor": "architecture",
    "bug": "bug", "bugfix": "bug", "fix": "bug", "incident": "bug", "hotfix": "bug",
    "decision": "decision", "pattern": "pattern", "convention": "pattern", "guideline": "pattern",
    "config": "config", "discovery": "discovery", "learning": "learning", "session_summary": "session",
}  # fmt: skip


def suggest_topic_key(typ: str, title: str, content: str) -> str:
    t = typ.strip().lower()
    family = _FAMILIES.get(t) or (re.sub(r"[^a-z0-9]+", "-", t).strip("-") if t and t != "manual" else "topic")
    segment = " ".join(re.sub(r"[^a-z0-9]+", " ", title.lower()).split())[:100].replace(" ", "-")
    if not segment:
        words = content.lower().split()[:8]
        segment = "-".join(re.sub(r"[^a-z0-9]+", " ", " ".join(words)).split())[:100]
    return f"{family}/{segment or 'general'}"


def _add(store: Store, typ: str, title: str, content: str, project: str, scope: str, topic_key: str,
         session_id: str) -> dict[str, Any]:  # fmt: skip
    if len(content.encode("utf-8")) > MAX_OBSERVATION_LENGTH:
        content = content.encode("utf-8")[:MAX_OBSERVATION_LENGTH].decode("utf-8", "ignore") + "... [truncated]"
    if topic_key:
        for obs in reversed(store.live()):
            if obs.get("topic_key") == topic_key and obs.get("project") == project and obs.get("scope") == scope:
                obs.update(title=title, content=content, type=typ, revisions=obs.get("revisions", 1) + 1)
                return obs
    if store.session(session_id) is None:
        store.sessions.append({"id": session_id, "project": project, "started_at": store.now(), "summary": None})
    obs = {"id": max((o["id"] for o in store.observations), default=0) + 1, "session_id": session_id, "type": typ,
           "title": title, "content": content, "project": project or None, "scope": scope, "topic_key": topic_key or None,
           "created_at": store.now(), "duplicates": 1, "revisions": 1}  # fmt: skip
    store.observations.append(obs)
    return obs


def mem_save(store: Store, args: dict[str, Any]) -> str:
    title, content = _str_arg(args, "title"), _str_arg(args, "content")
    typ = _str_arg(args, "type") or "manual"
    project, scope = _str_arg(args, "project"), _str_arg(args, "scope") or "project"
    topic_key = _str_arg(args, "topic_key")
    session_id = _str_arg(args, "session_id") or (f"manual-save-{project}" if project else "manual-save")
    obs = _add(store, typ, title, content, project, scope, topic_key, session_id)
    store.persist()
    text = f"Memory saved: {_go_quote(title)} ({typ})"
    if not topic_key:
        text += f"\nSuggested topic_key: {suggest_topic_key(typ, title, content)}"
    if not store.v2:
        return text
    return _envelope(text, {"id": obs["id"], "judgment_required": False, "state": "active",
                            "sync_id": _sync_id(obs["id"])})  # fmt: skip


def mem_update(store: Store, args: dict[str, Any]) -> str:
    obs_id = _int_arg(args, "id", 0)
    if obs_id == 0:
        raise ToolError("id is required")
    fields = {
        k: args[k]
        for k in ("title", "content", "type", "project", "scope", "topic_key")
        if isinstance(args.get(k), str)
    }
    if not fields:
        raise ToolError("provide at least one field to update")
    obs = store.get(obs_id)
    if obs is None:
        raise ToolError(f"Failed to update memory: observation #{obs_id} not found")
    obs.update(fields)
    obs["revisions"] = obs.get("revisions", 1) + 1
    store.persist()
    text = (
        f"Memory updated: #{obs['id']} {_go_quote(obs['title'])} ({obs['type']}, scope={obs.get('scope', 'project')})"
    )
    return _envelope(text) if store.v2 else text


def mem_session_summary(store: Store, args: dict[str, Any]) -> str:
    content, project = _str_arg(args, "content"), _str_arg(args, "project")
    session_id = _str_arg(args, "session_id") or (f"manual-save-{project}" if project else "manual-save")
    obs = _add(store, "session_summary", f"Session summary: {project}", content, project, "project", "", session_id)
    store.persist()
    text = f"Session summary saved for project {_go_quote(project)}"
    if not store.v2:
        return text
    return _envelope(text, {"id": obs["id"], "judgment_required": False, "state": "active",
                            "sync_id": _sync_id(obs["id"])})  # fmt: skip


def _schema(props: dict[str, str], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": {k: {"type": t} for k, t in props.items()}, "required": required}


TOOLS: dict[str, tuple[Any, str, dict[str, Any]]] = {
    "mem_search": (mem_search, "Search your persistent memory across all sessions. Use this to find past decisions, "
                   "bugs fixed, patterns used, files changed, or any context from previous coding sessions.",
                   _schema({"query": "string", "type": "string", "project": "string", "scope": "string",
                            "limit": "number"}, ["query"])),
    "mem_timeline": (mem_timeline, "Show chronological context around a specific observation. Use after mem_search.",
                     _schema({"observation_id": "number", "before": "number", "after": "number"}, ["observation_id"])),
    "mem_get_observation": (mem_get_observation, "Get the full content of a specific observation by ID. Use when you "
                            "need the complete, untruncated content of an observation found via mem_search or "
                            "mem_timeline.", _schema({"id": "number"}, ["id"])),
    "mem_context": (mem_context, "Get recent memory context from previous sessions. Shows recent sessions and "
                    "observations to understand what was done before.",
                    _schema({"project": "string", "scope": "string", "limit": "number"}, [])),
    "mem_save": (mem_save, "Save an important observation to persistent memory.",
                 _schema({"title": "string", "content": "string", "type": "string", "session_id": "string",
                          "project": "string", "scope": "string", "topic_key": "string"}, ["title", "content"])),
    "mem_update": (mem_update, "Update an existing observation by ID. Only provided fields are changed.",
                   _schema({"id": "number", "title": "string", "content": "string", "type": "string",
                            "project": "string", "scope": "string", "topic_key": "string"}, ["id"])),
    "mem_session_summary": (mem_session_summary, "Save a comprehensive end-of-session summary.",
                            _schema({"content": "string", "session_id": "string", "project": "string"},
                                    ["content", "project"])),
}  # fmt: skip


READ_ONLY = ("mem_search", "mem_timeline", "mem_get_observation", "mem_context")


def _annotations(name: str) -> dict[str, Any]:
    """As Engram declares them (mcp-go WithReadOnlyHintAnnotation etc.). Claude Code runs the tools of
    one batch concurrently only when they are read-only: without readOnlyHint a batch of four
    mem_search calls runs one after the other (seen on 2.1.197), and so do their hooks."""
    read_only = name in READ_ONLY
    return {"readOnlyHint": read_only, "destructiveHint": False, "idempotentHint": read_only, "openWorldHint": False}


# -- JSON-RPC ----------------------------------------------------------------------------


def _log_call(tool: str, arguments: Any) -> None:
    path = os.environ.get("ENGRAM_CALL_LOG")
    if not path:
        return
    line = json.dumps({"ts": time.time(), "pid": os.getpid(), "tool": tool, "arguments": arguments}, ensure_ascii=False)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def handle(store: Store, message: dict[str, Any]) -> dict[str, Any] | None:
    method = message.get("method")
    msg_id = message.get("id")
    params = message.get("params") or {}
    if msg_id is None:  # a notification
        return None
    if method == "initialize":
        version = params.get("protocolVersion") or PROTOCOL_FALLBACK
        result: Any = {"protocolVersion": version, "capabilities": {"tools": {"listChanged": False}},
                       "serverInfo": {"name": "engram", "version": "0.1.0-e2e"}}  # fmt: skip
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": [{"name": name, "description": desc, "inputSchema": schema, "annotations": _annotations(name)}
                            for name, (_, desc, schema) in TOOLS.items()]}  # fmt: skip
    elif method == "tools/call":
        name = params.get("name", "")
        arguments = params.get("arguments") or {}
        _log_call(name, arguments)
        tool = TOOLS.get(name)
        if tool is None:
            return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32602, "message": f"Unknown tool: {name}"}}
        try:
            result = {"content": [{"type": "text", "text": tool[0](store, arguments)}]}
        except ToolError as err:
            result = {"content": [{"type": "text", "text": str(err)}], "isError": True}
    elif method in ("resources/list", "prompts/list", "resources/templates/list"):
        key = {
            "resources/list": "resources",
            "prompts/list": "prompts",
            "resources/templates/list": "resourceTemplates",
        }
        result = {key[method]: []}
    else:
        return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": f"Method not found: {method}"}}
    return {"jsonrpc": "2.0", "id": msg_id, "result": result}


def main() -> int:
    store = Store()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            message = json.loads(line)
        except ValueError:
            out: dict[str, Any] | None = {"jsonrpc": "2.0", "id": None,
                                          "error": {"code": -32700, "message": "Parse error"}}  # fmt: skip
        else:
            out = handle(store, message) if isinstance(message, dict) else None
        if out is not None:
            sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
