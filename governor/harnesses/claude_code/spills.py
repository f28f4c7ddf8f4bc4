"""Results Claude Code spills to a file, and calls that would read them back.

Seen on the real binary (2.1.197 and 2.1.332): an MCP result over Claude Code's output
limit never reaches PostToolUse as text. The hook gets, as `tool_response`,

    Error: result (146,257 characters across 725 lines) exceeds maximum allowed tokens.
    Output has been saved to <dirname(transcript_path)>/<session_id>/tool-results/
    mcp-<server>-<tool>-<digits>.txt (2.1.332: -<digits>-<6 letters>.txt). ...

and the model is told to `Read` that file in chunks. So the adapter reads the file (only
that file: this session's own tool-results folder, a regular file named for this very
server and tool) and hands the engine the result itself, which the model then gets in the
pointer's place, trimmed to the turn's budget; and a Read, Grep, Glob or Bash call that
names such a file (or the folder, a folder above it such as `~/.claude/projects` or the home
folder, or a pattern over one) is reported as `spilled`, so the engine refuses it for a governed
server (governor.harnesses.kept_results: a read of the contents; listing names is none).

Behind the wall the decision service runs as a user of its own and cannot open a file under a
private home: the hook reads it as the user and carries its text to the service
(governor.harnesses.claude_code.carry_spill).

Imported only when a result looks spilled or a file tool is called.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

MAX_SPILL = 64 * 1024 * 1024  # read at most this much of a spilled result
POINTER = r"\AError: result \([^)\n]{1,200}\) exceeds maximum allowed tokens\. Output has been saved to (/[^\n]{1,4096}?\.txt)"
# 2.1.197 names a spill mcp-<server>-<tool>-<ms>.txt; 2.1.332 adds a random suffix: -<ms>-<6 letters>.txt
_SPILL_TAIL = r"-\d{6,}(?:-[A-Za-z0-9]{1,16})?\.txt"


def spilled_result(payload: dict[str, Any], text: str, server: str, tool: str) -> str | None:
    """The result a pointer stands for, read from this session's own spill file; None when the
    text is no pointer, or the file is not exactly where and what Claude Code writes."""
    import re

    found = re.match(POINTER, text)
    transcript, session = payload.get("transcript_path"), payload.get("session_id")
    if found is None or not isinstance(transcript, str) or not isinstance(session, str) or "/" in session:
        return None
    path = found.group(1)
    expected = os.path.join(os.path.dirname(transcript), session, "tool-results")
    name = os.path.basename(path)
    if not re.fullmatch(rf"mcp-{re.escape(server)}-{re.escape(tool)}{_SPILL_TAIL}", name):
        return None
    try:
        if os.path.realpath(os.path.dirname(path)) != os.path.realpath(expected):
            return None
        from governor.state import open_regular

        with open(open_regular(path), "rb") as handle:  # no link followed, no FIFO waited on
            if os.fstat(handle.fileno()).st_uid != os.getuid():
                return None
            return handle.read(MAX_SPILL).decode("utf-8", "replace")
    except OSError:
        return None


CARRIED = "memory_governor_spilled"  # behind the wall: the spill file's text, read by the hook as the user


def carried(payload: dict[str, Any], text: str) -> str | None:
    """The spilled text a walled hook carried for a spill pointer `text` (claude_code.carry_spill), or None."""
    import re

    found = payload.get(CARRIED)
    return found if isinstance(found, str) and re.match(POINTER, text) else None


def spill_read(kind: str, tool_input: dict[str, Any], payload: dict[str, Any], env: Mapping[str, str] | None = None
               ) -> str | None:  # fmt: skip
    """If a file or shell tool's call (`kind`: governor.harnesses.kept_results.KINDS) reads back a
    result this session spilled: '<server>-<tool>' of it ('' for any: the folder, a folder above
    it, a pattern over it). None when it reads none."""
    from governor.harnesses.kept_results import read_back, reads

    transcript, session = payload.get("transcript_path"), payload.get("session_id")
    if (
        not isinstance(transcript, str)
        or not isinstance(session, str)
        or not os.path.isabs(transcript)
        or "/" in session
    ):
        return None
    folder = os.path.join(os.path.dirname(transcript), session, "tool-results")
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else ""
    home = (env or os.environ).get("HOME") or os.path.expanduser("~")
    claude = os.path.dirname(os.path.dirname(os.path.dirname(transcript)))  # ~/.claude, above projects/<project>/
    name = read_back(reads(kind, tool_input, cwd or "/", env), folder, home, (claude,), ("mcp-*.txt",))
    if not name:
        return name
    if not name.startswith("mcp-"):
        return None  # a file Claude Code kept for a tool of no MCP server
    stem = name[4:]
    for end in range(len(stem) - 1, 0, -1):  # mcp-<server>-<tool>-<ms>[-<letters>].txt: what comes before <ms>
        if stem[end] == "-" and stem[end + 1 : end + 7].isdigit():
            return stem[:end]
    return stem
