"""MCP tool names as the harnesses that spell them `mcp__<server>__<tool>` name them to hooks
(Claude Code, Codex CLI), and as replay spells every harness's calls.

Hot path: standard library only, no imports.
"""

from __future__ import annotations


def split_tool_name(name: str) -> tuple[str | None, str | None]:
    """mcp__<server>__<tool> -> (server, tool); anything else -> (None, None)."""
    if not name.startswith("mcp__"):
        return None, None
    server, sep, tool = name[5:].partition("__")
    if not sep or not server or not tool:
        return None, None
    return server, tool
