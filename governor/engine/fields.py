"""The free-text fields of a call's arguments, as every check that reads them sees them.

A save's never-save detectors (governor.engine.saves), the routes (governor.engine.screening)
and an adapter's look for spilled results in a file tool's arguments read the same text: every
string in the arguments, nested ones too (a bounded number), each judged by its two ends when
it is long, with compatibility forms folded. Apart from the detectors, so a hook that only reads
fields (a Bash or Read call) compiles none of their patterns.

Hot path: standard library only, no `re`.
"""

from __future__ import annotations

import unicodedata

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

WINDOW = 65_536  # characters judged from each end of a longer field
MAX_FIELDS = 64  # free-text fields of one call looked at (nested arguments included)


def judged(text: str) -> str:
    """What the checks look at: the field, or its two ends; compatibility forms folded
    (a fullwidth colon or letter is judged as the plain one)."""
    if len(text) > 2 * WINDOW:
        text = text[:WINDOW] + "\n" + text[-WINDOW:]
    return unicodedata.normalize("NFKC", text)


def text_fields(tool_input: Any, depth: int = 0) -> Iterator[str]:
    """Every free-text value of a call's arguments (nested ones too, a bounded number)."""
    if isinstance(tool_input, str):
        yield tool_input
    elif depth < 4 and isinstance(tool_input, dict):
        for value in list(tool_input.values())[:MAX_FIELDS]:
            yield from text_fields(value, depth + 1)
    elif depth < 4 and isinstance(tool_input, list):
        for value in tool_input[:MAX_FIELDS]:
            yield from text_fields(value, depth + 1)


# What each field of a tool's arguments is, by the names the harnesses give them: a shell command,
# a path the tool opens, an address it fetches; any other field is data it carries (a file's new
# text, a search pattern, a prompt), which no route reads unless it names the field. A list of
# records (Cline's `files: [{path, …}]`, `requests: [{url, prompt}]`) is read field by field.
SHELL_FIELDS = frozenset(("command", "cmd"))
COMMANDS_FIELDS = frozenset(("commands",))  # a list of command lines, each run on its own
PATH_FIELDS = frozenset(("file_path", "path", "notebook_path", "filePath", "absolute_path", "dir_path", "directory",
                         "paths", "file_paths", "filename", "target_file", "absolutePath", "dirPath"))  # fmt: skip
ADDRESS_FIELDS = frozenset(("url", "uri"))
GLOB_FIELDS = frozenset(("glob", "include"))  # a search tool's file-name patterns, under its path
PATCH_FIELDS = frozenset(("input", "patch"))  # a patch: the files its headers name are written
_PATCH_START = "*** Begin Patch"
_PATCH_HEADERS = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")


def roles(tool_input: Any, only: list[str] | None = None, depth: int = 0) -> dict[str, list[Any]]:
    """A call's fields by what they are: "shell" (a command line, or a program and its arguments),
    "path", "address", and "data" (fields `only` names that are none of those); `only`: just those
    fields (at the top level; a record in a list keeps its own fields' roles)."""
    out: dict[str, list[Any]] = {"shell": [], "path": [], "address": [], "glob": [], "data": []}
    if not isinstance(tool_input, dict):
        return out
    for name, value in list(tool_input.items())[:MAX_FIELDS]:
        if only is not None and name not in only:
            continue
        if name in SHELL_FIELDS and (isinstance(value, str) or _argv(value)):
            out["shell"].append(value if isinstance(value, str) else [str(v) for v in value])
            continue
        if name in COMMANDS_FIELDS and isinstance(value, list):
            out["shell"] += [v for v in value[:MAX_FIELDS] if isinstance(v, str)]
            continue
        if name in PATCH_FIELDS and isinstance(value, str) and value.lstrip().startswith(_PATCH_START):
            out["path"] += [judged(path) for path in patched(value)]
            continue
        if isinstance(value, list) and depth < 3 and any(isinstance(v, dict) for v in value):
            for record in value[:MAX_FIELDS]:
                for kind, found in roles(record, None, depth + 1).items():
                    out[kind] += found
            continue
        kind = "path" if name in PATH_FIELDS else "address" if name in ADDRESS_FIELDS else "data"
        kind = "glob" if name in GLOB_FIELDS else kind
        if kind == "data" and only is None:
            continue
        out[kind] += [judged(text) for text in text_fields(value)]
    return out


def patched(patch: str) -> list[str]:
    """The files a patch in the `*** Begin Patch` form adds, updates, deletes or moves to."""
    return [line[len(header) :].strip() for line in patch.splitlines()[:4096] for header in _PATCH_HEADERS
            if line.startswith(header)]  # fmt: skip


def _argv(value: Any) -> bool:
    return isinstance(value, list) and 0 < len(value) <= 4096 and all(isinstance(v, str) for v in value)
