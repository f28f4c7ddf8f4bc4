"""Compiled policies kept by content in the state directory (`cache/policies/<sha256>.json`).

A policy compiled once is not compiled again (YAML, pydantic: ~0.5 s of CPU) for another project
whose files say the same (every project on the shipped default alone, a clone, a worktree), nor
when a checkout rewrote a file unchanged. governor.policy.compiled looks here when its own cache
(by the files' paths and stat) misses; governor.policy.acceptance for what git holds.

Hot path: standard library only.
"""

from __future__ import annotations

import os

from governor import jsonio, with_site_packages
from governor.state import ensure_dir, write_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from governor.policy.sources import Sources

FORMAT = 1


def read_json(path: str) -> Any:
    try:
        with open(path, "rb") as handle:
            return jsonio.loads(handle.read())
    except (OSError, ValueError):
        return None


def compile_layers(state: str, layers: list[tuple[str, str]], texts: dict[str, str] | None = None
                   ) -> tuple[dict[str, Any] | None, list[str]]:  # fmt: skip
    """`governor.policy.files.compile_layers`, looked up by content first. The key is the sha256 of
    every layer's kind and bytes, this version and the compiler's files (their size and mtime); only
    a valid policy is kept, so a broken one is reported as ever."""
    key, read = _content_key(layers, texts)
    path = os.path.join(state, "cache", "policies", f"{key}.json") if key and state else ""
    cached = read_json(path) if path else None
    if isinstance(cached, dict) and cached.get("key") == key and isinstance(cached.get("policy"), dict):
        del cached["key"]
        cached["sources"] = [file for _, file in layers]
        return cached, []
    with_site_packages()
    from governor.policy.files import compile_layers as compile_now

    blob, problems = compile_now(layers, read)
    if blob is not None and path:
        try:
            ensure_dir(os.path.dirname(path))
            _forget_oldest(os.path.dirname(path))
        except OSError:
            return blob, problems
        store(path, {**{k: v for k, v in blob.items() if k != "sources"}, "key": key})
    return blob, problems


def compile_committed(state: str, sources: Sources) -> dict[str, Any] | None:
    """`governor.policy.files.compile_committed`, looked up by content first (`compile_layers`)."""
    from governor.policy.committed import committed_layers

    committed = committed_layers(sources)
    return compile_layers(state, *committed)[0] if committed is not None else None


CONTENT_KEEP = 64  # compiled policies kept by content in a state directory; the oldest go first
_COMPILER = tuple(os.path.join(os.path.dirname(os.path.abspath(__file__)), name) for name in ("files.py", "model.py"))


def _content_key(layers: list[tuple[str, str]], texts: dict[str, str] | None) -> tuple[str, dict[str, str] | None]:
    """The content key of `layers`, and the texts the compile is to read: the project's files as
    read for the key (a file rewritten in between is not compiled under the old one's key). No key
    ("") for a file that cannot be read whole: the compile says what is wrong with it."""
    from governor import __version__
    from governor.policy.sources import MAX_BYTES
    from governor.state import sha256_hex

    read = dict(texts or {})
    parts = [f"{__version__}\0{FORMAT}".encode()]
    for file in _COMPILER:
        try:
            st = os.stat(file)
        except OSError:
            return "", texts
        parts.append(f"\0{st.st_mtime_ns}\0{st.st_size}".encode())
    for kind, file in layers:
        if file in read:
            data = read[file].encode("utf-8", "surrogatepass")
        else:
            try:
                with open(file, "rb") as handle:
                    data = handle.read(MAX_BYTES + 1)
                if len(data) > MAX_BYTES:
                    return "", texts
                if kind != "default":  # the shipped default is read as shipped (its digest: libyaml)
                    read[file] = data.decode("utf-8")
            except (OSError, UnicodeDecodeError):
                return "", texts
        parts.append(f"\0{kind}\0{len(data)}\0".encode())
        parts.append(data)
    return sha256_hex(b"".join(parts)), read


def _forget_oldest(folder: str) -> None:
    """Keep the folder under CONTENT_KEEP files (a long-lived machine sees policy after policy)."""
    names = [name for name in os.listdir(folder) if name.endswith(".json")]
    if len(names) < CONTENT_KEEP:
        return
    aged = []
    for name in names:
        try:
            aged.append((os.stat(os.path.join(folder, name)).st_mtime, name))
        except OSError:
            pass
    for _, name in sorted(aged)[: len(aged) - CONTENT_KEEP + 1]:
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass


def store(path: str, blob: dict[str, Any]) -> None:
    """Best effort: a cache that cannot be written costs the next hook a compile, nothing more."""
    if not path:
        return
    try:
        write_atomic(path, jsonio.dumps(blob).encode())  # policy order kept: matchers and precedence follow it
    except OSError:
        pass
