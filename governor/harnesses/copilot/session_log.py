"""Copilot's session log, and calls that would read it back.

Seen on 1.0.102: `~/.copilot/session-state/<id>/events.jsonl` (`$COPILOT_HOME/session-state`)
keeps every tool's original result as `detailedContent` beside the `content` the model got, so
the whole memory result of a call the governor trimmed is on disk, and Copilot's own `view`,
`grep`, `glob` and `bash` can read it. A call of one of them that names the log folder, a log in
it, or a pattern or a folder above it that takes it in (`~/.copilot`, `~/.copilot/*`, `grep -r X
~/.copilot`; governor.harnesses.kept_results: a read of the contents, not a listing, and not a
search from the home folder itself) is
reported as `spilled` for any governed server (''), so the engine refuses it as it refuses
Claude Code's spill files. Other files under `~/.copilot` (`mcp-config.json`, `hooks/`) are left
alone. A command that builds the path another way (encoded, from variables) is not seen: the
hooks are no sandbox.

Imported only when a file tool is called.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# Copilot's own file tools, and the same in the Claude-style payload of a .claude hooks file.
FILE_TOOLS = {"view": "read", "grep": "search", "glob": "list", "bash": "shell", "Read": "read", "Grep": "search",
              "Glob": "list", "Bash": "shell"}  # fmt: skip
LOG_FOLDER = "session-state"


def log_read(tool_name: str, tool_input: dict[str, Any], env: Mapping[str, str], cwd: str = "") -> str | None:
    """'' (any governed server) when a file or shell tool's call reads Copilot's session log, its
    folder, or a folder above it inside the home folder; None otherwise."""
    from governor.harnesses.kept_results import read_back, reads

    home = env.get("HOME") or os.path.expanduser("~")
    copilot = env.get("COPILOT_HOME") or os.path.join(home, ".copilot")
    folder = os.path.join(copilot, LOG_FOLDER)
    found = read_back(
        reads(FILE_TOOLS[tool_name], tool_input, cwd or "/", env), folder, home, (copilot,), ("events.jsonl",)
    )
    return None if found is None else ""
