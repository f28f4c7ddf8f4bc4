"""MCP tool names as the harnesses that spell them `mcp__<server>__<tool>` name them to hooks
(Claude Code, Codex CLI), and as replay spells every harness's calls; and `mcp_<server>_<tool>`
(Gemini CLI, VS Code's agent hooks); `<server>/<tool>` (Antigravity).

Hot path: standard library only, no imports.
"""

from __future__ import annotations


def _split(name: str, prefix: str, separator: str) -> tuple[str | None, str | None]:
    """<prefix><server><separator><tool> -> (server, tool), at the first separator after the
    prefix, neither part empty; anything else -> (None, None)."""
    if not name.startswith(prefix):
        return None, None
    server, sep, tool = name[len(prefix) :].partition(separator)
    return (server, tool) if sep and server and tool else (None, None)


def split_tool_name(name: str) -> tuple[str | None, str | None]:
    """mcp__<server>__<tool> -> (server, tool); anything else -> (None, None)."""
    return _split(name, "mcp__", "__")


def split_single(name: str) -> tuple[str | None, str | None]:
    """mcp_<server>_<tool> -> (server, tool), the server being the part up to the first `_` (as
    Gemini CLI parses its own names); anything else -> (None, None)."""
    return _split(name, "mcp_", "_")


def split_slash(name: str) -> tuple[str | None, str | None]:
    """<server>/<tool> -> (server, tool), at the first `/`; anything else -> (None, None)."""
    return _split(name, "", "/")


def split_any(name: str) -> tuple[str | None, str | None]:
    """(server, tool) of a name in any of the spellings above; (None, None) for none of them."""
    for split in (split_tool_name, split_slash, split_single):
        server, tool = split(name)
        if server is not None:
            return server, tool
    return None, None
