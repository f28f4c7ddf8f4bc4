"""Calls that read back what a harness keeps of its tools' results on disk.

Some harnesses keep a tool's whole result in a file of their own (Claude Code spills a large
one to `tool-results/`, Copilot CLI logs every one in `session-state/`), where the model's own
file and shell tools can read what the governor trimmed. An adapter names its file tools by what
they do (`read` a file, `search` the files under a folder, `list` names, run a `shell` command)
and the folder it keeps results in; `read_back` says whether a call reads that folder's contents:
a file in it, or, recursively, the folder or one above it inside the home folder
(`grep -r X ~/.claude`). Listing names is no read (`find ~ -name '*.txt'`, a glob tool), nor is a
search from the home folder itself or above (`rg TODO ~`): it is not aimed at the kept results.

Hot path: standard library only, no `re`; imported only for a file or shell tool's call.
"""

from __future__ import annotations

import os

from governor.engine.words import CLASS, HERE, QUERY, RUNTIME, STAR, could_be, decided

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

KINDS = ("read", "search", "list", "shell")
UNREAD = "\x00unread\x00"  # marks the text of a command whose reading could not finish


def reads(kind: str, tool_input: dict[str, Any], cwd: str, env: Mapping[str, str] | None = None
          ) -> list[tuple[str, bool]]:  # fmt: skip
    """The paths a call reads the contents of, each with whether the folder tree under it is read."""
    from governor.engine.fields import roles

    fields = roles(tool_input)
    home = (env or os.environ).get("HOME") or os.path.expanduser("~")
    if kind == "shell":
        from governor.engine.routes import reading

        out: list[tuple[str, bool]] = []
        for command in fields["shell"]:
            found = reading(command, cwd, env, home)  # the routes ask for the same reading after
            if isinstance(found, str):  # not read: judged on its text
                out.append((UNREAD + (command if isinstance(command, str) else " ".join(command)), True))
            else:
                out += found.reads
        return out
    if kind == "list":
        return []
    paths = fields["path"] or ([cwd] if kind == "search" else [])
    if kind == "search" and fields["glob"]:  # a search narrowed to file names: the files it reads
        paths = [os.path.join(p, g) for p in paths for g in fields["glob"]]
    out = []
    for path in paths:
        path = home + path[1:] if path == "~" or path.startswith("~/") else path
        path = os.path.normpath(path if path.startswith("/") else os.path.join(cwd or "/", path))
        out.append((path.replace("*", STAR).replace("?", QUERY).replace("[", CLASS), kind == "search"))  # a pattern
    return out


def read_back(found: list[tuple[str, bool]], folder: str, home: str, roots: tuple[str, ...] = (),
              names: tuple[str, ...] = ("*",)) -> str | None:  # fmt: skip
    """For a call that reads back a file kept in `folder`: its name ('' for any file there, a
    whole-folder read or a read that cannot be told apart); None when it reads none. A folder above
    `folder` read whole counts when it lies strictly inside the home folder, or at or inside one of
    `roots` (the harness's own folder); a file found anywhere under the home folder (`find ~ …
    -exec cat {} +`) counts only when it is named as the kept files are (`names`, globs)."""
    folder = os.path.normpath(folder)
    home = os.path.normpath(home) if home not in ("", "/") else ""
    inside = [os.path.normpath(r) for r in roots if r not in ("", "/")]
    inside = [r for r in inside if not home or not (home + "/").startswith(r + "/")]  # never home or above it
    if home:
        inside.append(home + "/")
    for path, recursive in found:
        if path.startswith(UNREAD):  # a command that could not be read: does its text name the folder?
            if os.path.basename(folder) in path:
                return ""
            continue
        plain = path.replace(HERE, "")
        known = plain if decided(plain) else plain[: min(plain.find(m) for m in RUNTIME if m in plain)]
        known = known if decided(plain) else known.rsplit("/", 1)[0]  # the folder it is certainly under
        if known == folder or known.startswith(folder + "/"):
            return plain[len(folder) + 1 :].split("/", 1)[0] if decided(plain) else ""
        if not folder.startswith(known.rstrip("/") + "/"):
            continue  # beside the kept folder, not above it
        aimed = any(_inside(known, r) for r in inside)
        if decided(plain):
            if recursive and aimed:
                return ""
        elif aimed and (could_be(path, folder + "/*") or (recursive and could_be(path, folder))):
            return ""
        elif any(could_be(plain.rsplit("/", 1)[-1], name, first=True) for name in names):
            return ""  # found under the home folder or above it, by the kept files' own name
        elif home and plain.startswith(home + "/") and could_be(home + HERE + plain[len(home) :], folder + "/*"):
            return ""  # a pattern from home that names the kept folder itself (`**/tool-results/*.txt`)
    return None


def _inside(path: str, root: str) -> bool:
    """Is `path` at or inside `root` (strictly inside, for a root written with a trailing `/`)?"""
    return (path + "/").startswith(root if root.endswith("/") else root + "/") and path + "/" != root
