"""What `install` put in a harness's settings, and whether it is still there at a session's start.

`install <harness>` records, in the state directory (and in the default one when
MEMORY_GOVERNOR_STATE_DIR moves it), each file it wrote with a digest of what the hooks depend
on: in a JSON settings file its `hooks`, the switches that turn them off (`disableAllHooks`,
`hooksConfig`) and the `env` the hooks run with; in Codex's config.toml its `[hooks…]` tables (the
hooks' trust) and `[features]`; any other file (OpenCode's plugin) whole. At SessionStart the hook compares; a file changed since, or gone, is named to the
user, who re-runs `install` if the change was theirs; `uninstall` removes the record. A hook that was switched off runs no
SessionStart, so this tells of the changes that leave some hook running (another scope's,
another event's); the harness-settings route refuses the model's writes to these files.

Hot path (SessionStart only): standard library, a few small files read.
"""

from __future__ import annotations

import os

from governor import jsonio
from governor.state import ensure_dir, read_regular, write_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FOLDER = "installs"
KEYS = ("hooks", "disableAllHooks", "allowManagedHooksOnly", "hooksConfig", "env")  # what a JSON file's hooks hang on
MAX_FILE = 4 * 1024 * 1024


def _digest(path: str) -> str | None:
    """What the hooks depend on in `path`, as a sha256; None when a file other than JSON settings is
    not there."""
    from hashlib import sha256

    try:
        data = read_regular(path, MAX_FILE, follow=True)
    except FileNotFoundError:
        if not path.endswith(".json"):
            return None
        data = b"{}"  # a settings file that is not there holds no hooks, switches or env either
    except OSError:
        return "unreadable"
    if path.endswith(".json"):
        try:
            parsed = jsonio.loads(data)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            data = jsonio.dumps({key: parsed[key] for key in KEYS if key in parsed}).encode()
    elif path.endswith(".toml"):
        data = _toml_hook_lines(data)
    return sha256(data).hexdigest()


def _toml_hook_lines(data: bytes) -> bytes:
    """Codex's config.toml: only its `[hooks…]` and `[features]` tables (the hooks' trust and
    their switch), so Codex trusting another folder or a model setting is no change of the hooks."""
    import re

    kept, inside = [], False
    for line in data.decode("utf-8", "replace").splitlines():
        bare = line.strip()
        if bare.startswith("["):
            inside = re.match(r"\[+\s*(?:hooks|features)\b", bare) is not None
        if (inside or re.match(r"(?:hooks|features)\s*\.", bare)) and bare and not bare.startswith("#"):
            kept.append(bare)
    return "\n".join(kept).encode()


def _path(state: str, harness: str, project: str, scope: str) -> str:
    from zlib import crc32

    key = f"{crc32(os.path.abspath(project).encode('utf-8', 'surrogatepass')):08x}"
    return os.path.join(state, FOLDER, f"{harness}-{scope}-{key}.json")


def record(states: list[str], harness: str, project: str, scope: str, files: list[str]) -> None:
    """After `install`: what each of `files` holds now, in each of `states`."""
    entry = {"harness": harness, "project": os.path.abspath(project), "scope": scope,
             "files": {os.path.abspath(f): _digest(f) for f in dict.fromkeys(files)}}  # fmt: skip
    for state in dict.fromkeys(states):
        path = _path(state, harness, project, scope)
        try:
            ensure_dir(os.path.dirname(path))
            write_atomic(path, jsonio.dumps(entry).encode())
        except OSError:
            if state == states[0]:
                raise


def forget(states: list[str], harness: str, project: str, scope: str) -> None:
    """After `uninstall`: nothing of that install is left to compare with."""
    for state in dict.fromkeys(states):
        try:
            os.unlink(_path(state, harness, project, scope))
        except FileNotFoundError:
            pass


def changed(states: list[str], harness: str, project: str | None) -> list[str]:
    """Notices for the user: each installed file of `harness` (for `project`, or any project's
    user-scope install) whose hooks, their switches or their environment changed since install."""
    seen: dict[str, dict[str, Any]] = {}
    for state in dict.fromkeys(states):
        try:
            names = sorted(os.listdir(os.path.join(state, FOLDER)))
        except OSError:
            continue
        for name in names:
            if not name.startswith(f"{harness}-") or name in seen:
                continue
            try:
                entry = jsonio.loads(read_regular(os.path.join(state, FOLDER, name), 65536))
            except (OSError, ValueError):
                continue
            if isinstance(entry, dict) and isinstance(entry.get("files"), dict):
                seen[name] = entry
    out = []
    for entry in seen.values():
        if entry.get("scope") != "user" and (project is None or entry.get("project") != os.path.abspath(project)):
            continue
        moved = [path for path, digest in entry["files"].items() if _digest(str(path)) != digest]
        if moved:
            out.append(
                f"memory-governor: the {harness} hooks memory-governor installed ({entry.get('scope')} scope) changed "
                f"since install: {', '.join(moved[:3])} (its hooks, the switches that turn them off or their "
                f"environment). If you made the change, run `memory-governor install {harness} --scope "
                f"{entry.get('scope')}` again; otherwise the memory's limits may not hold: look at the file."
            )
    return out
