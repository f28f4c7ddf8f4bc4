"""Deterministic seed data for the Engram stand-in (engram_mcp.py) and the knowledge-graph server.

Observations have ids, types, titles, contents, created_at, project, scope, session ids and
(some) topic keys. Several are long (1,500-4,800 characters) so that a full fetch or a context
dump runs into the 1,200-token turn budget. Everything is ASCII, so byte and character counts
agree, and is built from fixed text: the same seed every run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PROJECT = "myapp"

_FILLER = [
    "The handler validates the input before it touches the store, and every error path returns a typed error.",
    "Benchmarks on the staging box showed the change costs under a millisecond per request at p99.",
    "A regression test pins the behaviour; it failed before the fix and passes after it.",
    "Rollout went behind a feature flag first, then to everyone after two quiet days in production.",
    "The alternative we rejected was caching the value per process, which broke under horizontal scaling.",
    "Logs now carry the request id so the on-call engineer can follow one request across services.",
    "Documentation in docs/architecture.md was updated with the new sequence diagram and the failure modes.",
    "The mobile client needed no change because the response shape stayed backwards compatible.",
]


def _long(what: str, why: str, where: str, learned: str, size: int, topic: str) -> str:
    """A structured Engram body padded with numbered notes to about `size` characters."""
    body = f"**What**: {what}\n**Why**: {why}\n**Where**: {where}\n**Learned**: {learned}\n"
    n = 0
    while len(body) < size:
        body += f"Note {n + 1} on {topic}: {_FILLER[n % len(_FILLER)]}\n"
        n += 1
    return body.rstrip("\n")


def _short(what: str, why: str, where: str) -> str:
    return f"**What**: {what}\n**Why**: {why}\n**Where**: {where}"


SESSIONS = [
    {"id": "sess-auth-0301", "project": PROJECT, "started_at": "2025-03-01 14:00:00",
     "summary": "Implemented JWT auth for the API"},
    {"id": "sess-search-0302", "project": PROJECT, "started_at": "2025-03-02 09:00:00",
     "summary": "Hardened the search endpoint against FTS5 syntax errors"},
    {"id": "sess-repo-0304", "project": PROJECT, "started_at": "2025-03-04 17:00:00",
     "summary": "Repository layer and storage decisions"},
]  # fmt: skip

PROMPTS = [
    {"session_id": "sess-auth-0301", "project": PROJECT, "created_at": "2025-03-01 14:01:12",
     "content": "add JWT auth to the API"},
    {"session_id": "sess-search-0302", "project": PROJECT, "created_at": "2025-03-02 09:04:40",
     "content": "why does the search endpoint crash on E-1021?"},
    {"session_id": "sess-repo-0304", "project": PROJECT, "created_at": "2025-03-04 17:02:00",
     "content": "clean up the repository layer errors"},
]  # fmt: skip


def observations() -> list[dict[str, Any]]:
    def obs(id_: int, session: str, typ: str, title: str, content: str, created: str,
            topic: str | None = None, scope: str = "project") -> dict[str, Any]:  # fmt: skip
        return {"id": id_, "session_id": session, "type": typ, "title": title, "content": content,
                "project": PROJECT, "scope": scope, "topic_key": topic, "created_at": created,
                "duplicates": 1, "revisions": 1}  # fmt: skip

    a, s, r = "sess-auth-0301", "sess-search-0302", "sess-repo-0304"
    return [
        obs(40, a, "config", "Added JWT_SECRET env var",
            _short("Added JWT_SECRET to .env.example and documented rotation in the README for auth",
                   "every developer must set it before running the server locally", ".env.example, README.md"),
            "2025-03-01 14:10:00", "config/jwt-secret-env-var"),
        obs(41, a, "pattern", "Auth middleware order",
            _short("auth runs before rate limiting", "unauthenticated floods must not eat the rate budget of real users",
                   "src/middleware/index.ts"), "2025-03-01 14:15:00", "pattern/auth-middleware-order"),
        obs(42, a, "decision", "Switched from sessions to JWT",
            _long("Replaced express-session with jsonwebtoken for auth",
                  "Session storage doesn't scale across multiple instances",
                  "src/middleware/auth.ts, src/routes/login.ts",
                  "Must set httpOnly and secure flags on the cookie; refresh tokens need separate rotation",
                  1600, "jwt auth"), "2025-03-01 14:22:05", "decision/switched-from-sessions-to-jwt"),
        obs(43, a, "bugfix", "Fixed token refresh race",
            _long("refresh tokens rotated twice when two tabs refreshed at once; now a refresh is idempotent within 30 s",
                  "users were logged out at random after the JWT auth rollout",
                  "src/auth/refresh.ts", "make token rotation idempotent per token family", 3200, "token refresh"),
            "2025-03-01 15:05:00", "bug/fixed-token-refresh-race"),
        obs(44, a, "decision", "Tokens expire after 15 minutes",
            _short("access tokens live 15 min, refresh tokens 7 days", "limits the damage of a leaked JWT auth token",
                   "src/auth/config.ts"), "2025-03-01 15:30:00", "decision/token-expiry"),
        obs(57, s, "bugfix", "Fixed FTS5 syntax error on special chars",
            _long("Wrapped each search term in quotes before passing to FTS5 MATCH so that hyphens and colons in "
                  "user queries no longer raise \"fts5: syntax error near\"",
                  "users searching for error codes like E-1021 crashed the search endpoint",
                  "internal/store/search.go", "FTS5 MATCH syntax is not LIKE: always sanitize user input",
                  2600, "fts5 search"), "2025-03-02 09:10:44", "bug/fts5-special-chars"),
        obs(58, s, "pattern", "Search queries go through sanitizeFTS",
            _long("every search entry point calls sanitizeFTS before building the MATCH clause",
                  "one unsanitized path brought the search crash back in a week",
                  "internal/store/search.go, internal/api/search.go", "grep for MATCH in review",
                  1500, "search sanitizing"), "2025-03-02 09:40:00", "pattern/sanitize-fts"),
        obs(59, s, "decision", "Search results capped at 20 per page",
            _short("the search API returns at most 20 hits per page", "bigger pages timed out on mobile",
                   "internal/api/search.go"), "2025-03-02 10:05:00", "decision/search-page-size"),
        obs(61, r, "pattern", "Repository layer returns domain errors",
            _long("every repository method maps driver errors to domain errors (ErrNotFound, ErrConflict)",
                  "handlers must not depend on the SQL driver", "internal/repo/*.go",
                  "wrap with %w so errors.Is still works", 1800, "repository errors"),
            "2025-03-04 17:45:12", "pattern/repository-domain-errors"),
        obs(62, r, "architecture", "Storage uses SQLite in WAL mode",
            _long("the store opens SQLite with journal_mode=WAL and busy_timeout=5000",
                  "readers must not block the single writer during search", "internal/store/open.go",
                  "WAL needs the -wal and -shm files on the same filesystem; never on NFS",
                  4800, "sqlite storage"), "2025-03-04 18:00:00", "architecture/sqlite-wal"),
        obs(63, r, "decision", "Migrations are forward-only",
            _short("no down migrations; a bad migration is fixed by a new one", "down migrations were never tested",
                   "migrations/"), "2025-03-04 18:20:00", "decision/forward-only-migrations"),
        obs(64, r, "preference", "Team prefers table-driven tests",
            _short("new tests are table-driven with t.Run per case", "reviewers asked for it in every PR",
                   "internal/**/*_test.go"), "2025-03-04 18:30:00", "preference/table-driven-tests"),
        obs(65, r, "session_summary", "Session summary: myapp",
            _long("Repository layer cleanup and storage decisions for myapp",
                  "errors leaked driver details into API responses", "internal/repo, internal/store",
                  "domain errors everywhere; WAL for concurrency", 1500, "session summary"),
            "2025-03-04 19:00:00", "session/repository-cleanup"),
        obs(66, r, "bugfix", "Fixed N+1 query in user list",
            _long("the user list loaded each user's roles in its own query; now one JOIN",
                  "the admin page took 9 s with 3,000 users", "internal/repo/users.go",
                  "log query counts per request in development", 3500, "user list query"),
            "2025-03-04 19:30:00", "bug/user-list-n-plus-one"),
    ]  # fmt: skip


def engram_seed() -> dict[str, Any]:
    return {"sessions": SESSIONS, "prompts": PROMPTS, "observations": observations()}


def write_engram_seed(path: Path) -> Path:
    path.write_text(json.dumps(engram_seed(), indent=1), encoding="utf-8")
    return path


def graph_lines() -> list[dict[str, Any]]:
    """A knowledge graph for @modelcontextprotocol/server-memory (its JSONL file format).

    Six entities mention "auth", so one search_nodes returns more entities than L1's max_limit (3).
    """
    lines: list[dict[str, Any]] = []
    names = ["AuthService", "AuthMiddleware", "TokenStore", "LoginRoute", "RefreshWorker", "AuditLog"]
    for i, name in enumerate(names):
        notes = [f"{name} is part of auth."] + [
            f"{name} fact {k + 1}: {_FILLER[(i + k) % len(_FILLER)]}" for k in range(2)
        ]
        lines.append({"type": "entity", "name": name, "entityType": "component", "observations": notes})
    lines.append({"type": "entity", "name": "BillingService", "entityType": "component",
                  "observations": ["BillingService charges customers monthly."]})  # fmt: skip
    lines.append({"type": "relation", "from": "AuthMiddleware", "to": "AuthService", "relationType": "calls"})
    lines.append({"type": "relation", "from": "LoginRoute", "to": "AuthService", "relationType": "calls"})
    lines.append({"type": "relation", "from": "AuthService", "to": "TokenStore", "relationType": "writes"})
    return lines


def write_graph(path: Path) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in graph_lines()), encoding="utf-8")
    return path
