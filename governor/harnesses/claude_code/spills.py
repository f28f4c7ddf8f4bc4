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
server.

Imported only when a result looks spilled or a file tool is called.
"""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_SPILL = 64 * 1024 * 1024  # read at most this much of a spilled result
POINTER = re.compile(
    r"\AError: result \([^)\n]{1,200}\) exceeds maximum allowed tokens\. Output has been saved to (/[^\n]{1,4096}?\.txt)"
)
# A reference to a spilled file, the folder, or a pattern over it; group 1: what follows the folder.
_FOLDER_REFERENCE = re.compile(r"tool-results(?:[/\\]+([^\s/\\'\"`;|&)]*))?")
# 2.1.197 names a spill mcp-<server>-<tool>-<ms>.txt; 2.1.332 adds a random suffix: -<ms>-<6 letters>.txt
_SPILL_TAIL = r"-\d{6,}(?:-[A-Za-z0-9]{1,16})?\.txt"
_FILE_REFERENCE = re.compile(rf"(?<![\w.-])mcp-([\w.-]{{1,300}}?){_SPILL_TAIL}")
_WILDCARD = re.compile(r"[*?\[{]")


def spilled_result(payload: dict[str, Any], text: str, server: str, tool: str) -> str | None:
    """The result a pointer stands for, read from this session's own spill file; None when the
    text is no pointer, or the file is not exactly where and what Claude Code writes."""
    found = POINTER.match(text)
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


_PATH = re.compile(r"[^\s'\"`;|&()<>=,]+")


def _above(text: str, payload: dict[str, Any], whole: bool = True) -> bool:
    """Does `text` name a folder this session's spills are under (its session folder, the
    project's, `~/.claude/projects`, `~/.claude`, the home folder), or a pattern that takes one in,
    which a recursive grep or find reads whole? Only folders at or below the home folder or
    Claude Code's own folder count (`find / …` is not seen)."""
    transcript, session = payload.get("transcript_path"), payload.get("session_id")
    if not isinstance(transcript, str) or not isinstance(session, str) or not os.path.isabs(transcript):
        return False
    folder = os.path.join(os.path.dirname(transcript), session, "tool-results")
    roots = [os.path.expanduser("~"), os.path.dirname(os.path.dirname(os.path.dirname(transcript)))]
    roots = [root.rstrip("/") for root in roots if root not in ("", "/")]
    for token in _PATH.findall(text):
        for home in ("$HOME", "${HOME}"):
            token = os.path.expanduser("~") + token[len(home) :] if token.startswith(home) else token
        token = os.path.expanduser(token)
        if not token.startswith("/"):
            continue
        wild = _WILDCARD.search(token)
        fixed = token[: wild.start()] if wild else os.path.normpath(token).rstrip("/") + "/"
        if not (folder + "/").startswith(fixed) or not (wild or whole):
            continue  # a folder above, named by a command that does not read its tree ("ls ~", "cd ~")
        if any((fixed.rstrip("/") + "/").startswith(root + "/") or fixed.startswith(root) for root in roots):
            return True
    return False


def spill_read(tool_input: dict[str, Any], payload: dict[str, Any] | None = None) -> str | None:
    """If a file tool's input names a spilled MCP result: '<server>-<tool>' of it, or a prefix
    of that ('' for any, e.g. the folder, a folder above it or `mcp-*`). None when it names none."""
    from governor.engine.fields import judged, text_fields
    from governor.engine.shell import reads_trees

    names: list[str] = []
    for raw in text_fields(tool_input):
        text = judged(raw)
        if payload is not None and _above(text, payload, whole=reads_trees(raw, tool_input)):
            names.append("")
        for found in _FILE_REFERENCE.finditer(text):
            names.append(found.group(1))
        for found in _FOLDER_REFERENCE.finditer(text):
            rest = found.group(1) or ""
            wild = _WILDCARD.search(rest)
            fixed = rest[: wild.start()] if wild else rest
            if "mcp-".startswith(fixed) or not rest:
                names.append("")  # the folder itself, or a pattern that takes in every MCP spill
            elif fixed.startswith("mcp-"):
                names.append(re.sub(rf"{_SPILL_TAIL}$", "", fixed[4:]) if not wild else fixed[4:])
    if not names:
        return None
    return min(names, key=len)  # the widest reference decides
