"""Copilot's session log, and calls that would read it back.

Seen on 1.0.102: `~/.copilot/session-state/<id>/events.jsonl` (`$COPILOT_HOME/session-state`)
keeps every tool's original result as `detailedContent` beside the `content` the model got, so
the whole memory result of a call the governor trimmed is on disk, and Copilot's own `view`,
`grep`, `glob` and `bash` can read it. A call of one of them that names the log folder, a log in
it, or a pattern or a folder above it that takes it in (`~/.copilot`, `~/.copilot/*`, the home
folder itself: `grep -r X ~`, `find ~ -name events.jsonl`) is
reported as `spilled` for any governed server (''), so the engine refuses it as it refuses
Claude Code's spill files. Other files under `~/.copilot` (`mcp-config.json`, `hooks/`) are left
alone. A command that builds the path another way (encoded, from variables) is not seen: the
hooks are no sandbox.

Imported only when a file tool is called.
"""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# Copilot's own file tools, and the same in the Claude-style payload of a .claude hooks file.
FILE_TOOLS = frozenset(("view", "grep", "glob", "bash", "Read", "Grep", "Glob", "Bash"))
LOG_FOLDER = "session-state"
_STOP = r"[^\s'\"`;|&)<>]*"
_WILDCARD = re.compile(r"[*?\[{]")


def _home_references(env: Mapping[str, str]) -> list[tuple[re.Pattern[str], str]]:
    """References to a folder the log is under, each with the path from it to the log folder:
    Copilot's home (`.copilot`, or $COPILOT_HOME as it is set), and the user's home (`~`, `$HOME`,
    its path), which a recursive grep or find takes in whole; group 1: the rest of the path."""
    homes = [r"(?<![\w.-])\.copilot"]
    custom = env.get("COPILOT_HOME")
    if custom and len(custom) > 1:
        homes.append(re.escape(os.path.normpath(custom)))
    users = [r"~", r"\$HOME", r"\$\{HOME\}"]
    home = env.get("HOME")
    if home and len(home) > 1:
        users.append(re.escape(os.path.normpath(home)))
    tail = rf"(?:[/\\]+({_STOP}))?(?=$|[\s'\"`;|&)<>])"
    return [(re.compile(rf"(?:{'|'.join(homes)}){tail}"), LOG_FOLDER),
            (re.compile(rf"(?<![\w.~/$-])(?:{'|'.join(users)}){tail}"), f".copilot/{LOG_FOLDER}")]  # fmt: skip


def log_read(tool_input: dict[str, Any], env: Mapping[str, str]) -> str | None:
    """'' (any governed server) when a file tool's input names Copilot's session log, its folder,
    or a folder or pattern above it that takes it in; None otherwise."""
    from governor.engine.fields import judged, text_fields
    from governor.engine.shell import reads_trees

    homes = _home_references(env)
    for raw in text_fields(tool_input):
        text = judged(raw).replace("\\", "/")
        if re.search(rf"(?<![\w.-]){LOG_FOLDER}(?:/|$|(?=[\s'\"`;|&)]))", text):
            return ""
        whole = reads_trees(text, tool_input)
        for pattern, below in homes:
            for found in pattern.finditer(text):
                rest = (found.group(1) or "").lstrip("/")
                wild = _WILDCARD.search(rest)
                fixed = rest[: wild.start()] if wild else rest
                if not rest and below != LOG_FOLDER and not whole:
                    continue  # the home folder named by a command that does not read its tree ("ls ~", "cd ~")
                if not rest or (wild and below.startswith(fixed)):
                    return ""
    return None
