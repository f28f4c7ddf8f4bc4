"""Which project a session governs: fixed by the harness, never re-derived from files the model writes.

The project root is the nearest ancestor with a `.memory-governor/` folder, and the model can
create folders: `../.memory-governor/policy.yaml`, or the project's own folder moved aside, would
make a new "project" appear whose first policy is accepted unseen. So the root is looked up once
and kept in the state directory (`projects/`):

- the folder the harness says the session runs in (its project directory variable, else the
  event's cwd: governor.runtime.runner) is fixed at the session's first event;
- the project root of that folder is fixed the first time the governor sees the folder, and
  every later session from it uses that root, whatever folders appear or go; only the user
  moves it (`memory-governor policy accept` there).

A policy never accepted before may be taken as it is only at the first event of a session in a
folder never seen before (the model has not acted yet). A policy first seen later in a session (its record deleted,
the state directory redirected) starts from what the team committed, else the shipped default
(governor.policy.acceptance).

Hot path: standard library only; one or two small files read per hook, written once.
"""

from __future__ import annotations

import os
import time

from governor import jsonio
from governor.state import ensure_dir, sha256_hex

FOLDER = "projects"


def _key(kind: str, value: str) -> str:
    return f"{kind}-{sha256_hex(value.encode('utf-8', 'surrogatepass'))[:24]}.json"


def _read(path: str, field: str) -> str | None:
    try:
        from governor.state import read_regular

        value = jsonio.loads(read_regular(path, 65536)).get(field)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and os.path.isabs(value) else None


def _create(path: str, field: str, value: str) -> bool:
    """Write the pin unless there is one (True: this call wrote it)."""
    try:
        ensure_dir(os.path.dirname(path))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as handle:
        handle.write(jsonio.dumps({field: value, "at": time.time()}))
    return True


def pinned(cwd: str | None, state: str, session: object = None) -> tuple[str, bool]:
    """(project root, first): the root the session in folder `cwd` governs, and whether this is
    the first event of a session in a folder never seen (a policy never accepted before may be
    taken as it is only then)."""
    from governor.policy.sources import project_root

    folder = os.path.abspath(cwd or os.getcwd())
    first = True
    try:
        if session is not None:
            at = os.path.join(state, FOLDER, _key("session", repr(session)))
            first = _create(at, "folder", folder)
            folder = (None if first else _read(at, "folder")) or folder
        at = os.path.join(state, FOLDER, _key("folder", folder))
        root = _read(at, "project")
        if root is not None:
            return root, False  # a folder seen before: its policy was accepted then, or is held
        root = project_root(folder)
        if not _create(at, "project", root):
            return _read(at, "project") or root, False  # another hook pinned it a moment ago
        return root, first
    except OSError:
        return project_root(folder), first  # no usable state directory: on_error reports it


def repin(cwd: str | None, state: str) -> tuple[str, str | None]:
    """The user moves the project root of `cwd` to where the folders say it is now (`policy accept`):
    (the root now, the root it was pinned to when that differs)."""
    from governor.policy.sources import project_root
    from governor.state import write_atomic

    folder = os.path.abspath(cwd or os.getcwd())
    at = os.path.join(state, FOLDER, _key("folder", folder))
    was = _read(at, "project")
    root = project_root(folder)
    if was != root:
        ensure_dir(os.path.dirname(at))
        write_atomic(at, jsonio.dumps({"project": root, "at": time.time()}).encode("utf-8", "surrogateescape"))
    return root, was if was not in (None, root) else None


def prune(state: str, before: float) -> int:
    """Remove the session pins last written before `before` (`gc`); folder pins stay: they say
    which root a folder was first seen with."""
    removed = 0
    folder = os.path.join(state, FOLDER)
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for name in names:
        path = os.path.join(folder, name)
        try:
            if name.startswith("session-") and os.stat(path).st_mtime < before:
                os.unlink(path)
                removed += 1
        except OSError:
            continue
    return removed
