"""Compiled policies kept by content in the state directory (`cache/policies/<sha256>.json`).

A policy compiled once is not compiled again (YAML, pydantic: ~0.5 s of CPU) for another project
whose files say the same (every project on the shipped default alone, a clone, a worktree), nor
when a checkout rewrote a file unchanged. governor.policy.compiled looks here when its own cache
(by the files' paths and stat) misses; governor.policy.acceptance for what git holds.

Hot path: standard library only.
"""

from __future__ import annotations

import os

from governor import fingerprint, jsonio, with_site_packages
from governor.state import ensure_dir, write_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from governor.policy.sources import Sources

FORMAT = 1


def read_json(path: str) -> Any:
    from governor.state import read_regular

    try:
        return jsonio.loads(read_regular(path))
    except (OSError, ValueError):
        return None


def compile_layers(state: str, layers: list[tuple[str, str]], texts: dict[str, str] | None = None
                   ) -> tuple[dict[str, Any] | None, list[str]]:  # fmt: skip
    """`governor.policy.files.compile_layers`, looked up by content first. The key is the sha256 of
    every layer's kind and bytes (each file read once: what is compiled is what was hashed), this
    version and which code compiles it; only a valid policy is kept, so a broken one is reported as
    ever. Used only in a folder that is this user's alone (`folder`)."""
    key, read = _content_key(layers, texts)
    where = folder(state) if key and state else None
    path = os.path.join(where, f"{key}.json") if where else ""
    cached = read_json(path) if path else None
    if isinstance(cached, dict) and _whole(cached, key):
        del cached["key"]
        cached["sources"] = [file for _, file in layers]
        return cached, []
    with_site_packages()
    from governor.policy.files import compile_layers as compile_now

    blob, problems = compile_now(layers, read)
    if blob is not None and where:
        _forget_oldest(where)
        store(path, {**{k: v for k, v in blob.items() if k != "sources"}, "key": key})
    return blob, problems


def compile_committed(state: str, sources: Sources) -> dict[str, Any] | None:
    """`governor.policy.files.compile_committed`, looked up by content first (`compile_layers`)."""
    from governor.policy.committed import committed_layers

    committed = committed_layers(sources)
    return compile_layers(state, *committed)[0] if committed is not None else None


KEEP = 64  # compiled policies kept by content in a state directory; the oldest go first
_NAME_LENGTH = 64 + len(".json")  # a compiled policy's name: its key, a sha256 in hex


def _content_key(layers: list[tuple[str, str]], texts: dict[str, str] | None) -> tuple[str, dict[str, str] | None]:
    """The content key of `layers`, and the texts the compile is to read: every file as read for
    the key, the shipped default too (a file rewritten in between is not compiled under the old
    one's key). No key ("") for a file that cannot be read whole: the compile says what is wrong."""
    from governor.policy.sources import MAX_BYTES, shipped_file
    from governor.state import sha256_hex

    read = dict(texts or {})
    try:
        topics = os.stat(shipped_file("schemas", "memory-topics.yaml"))  # the topic namespaces a policy holds
    except OSError:
        return "", texts
    parts = [fingerprint(), f"\0{FORMAT}\0{topics.st_mtime_ns}\0{topics.st_size}".encode()]
    for kind, file in layers:
        if file in read:
            data = read[file].encode("utf-8", "surrogatepass")
        else:
            try:
                from governor.state import read_regular

                data = read_regular(file, MAX_BYTES + 1, follow=True)
                if len(data) > MAX_BYTES:
                    return "", texts
                read[file] = data.decode("utf-8")
            except (OSError, UnicodeDecodeError):
                return "", texts
        parts.append(f"\0{kind}\0{len(data)}\0".encode())
        parts.append(data)
    return sha256_hex(b"".join(parts)), read


def folder(state: str) -> str | None:
    """`<state>/cache/policies`, made if missing, when it and `<state>/cache` are folders (no link)
    of this user's that no one else can write to; as root, only in a state directory no one else
    can write to either (a command run with sudo and a user's HOME compiles, and keeps nothing)."""
    import stat

    cache = os.path.join(state, "cache")
    folder = os.path.join(cache, "policies")
    try:
        ensure_dir(state)
        if os.geteuid() == 0:
            from governor.policy.managed import ownership_problems

            if ownership_problems([state]):
                return None
        for level in (cache, folder):  # each looked at before anything is made or read below it
            try:
                st = os.lstat(level)
            except FileNotFoundError:
                os.mkdir(level, 0o700)
                st = os.lstat(level)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
                return None
    except OSError:
        return None
    return folder


def share(source: str, target: str) -> None:
    """Give state directory `target` what state directory `source` keeps rebuilt from elsewhere and
    `target` lacks: the tokenizer tables this installation reads (governor.engine.bpe) and the policies kept by content with
    their patterns' code. For a process that decides in a scratch state directory (a replay, a policy
    test: governor.review.player), in both directions: the caller's caches spare it a compile and a
    table, and what it built joins them. Best effort, and only where it is safe: files of this user's
    (never a link) named as the caches name theirs, from folders of this user's that no one else can
    write to, into folders `folder` accepts; linked, or copied across file systems. Nothing is
    replaced: each file is checked whole by its reader before use (a table's digest, a compiled
    policy's key, the patterns' checks), and written only as a new file."""
    import stat

    into = folder(target)
    if into is None or _foreign(os.path.join(source, "cache")) or _foreign(os.path.join(source, "cache", "policies")):
        return
    from governor.engine import bpe

    tables = {bpe.file_name(unit) for unit in bpe.PATTERNS}  # this installation's (bpe.file_name)
    _forget_oldest(into)  # before, never after: what is shared is kept (a play looks it up next)
    pairs = [(os.path.join(source, "cache"), os.path.dirname(into), tables.__contains__),
             (os.path.join(source, "cache", "policies"), into,
              lambda name: _ours(name, ".json") or _ours(name, ".forms"))]  # fmt: skip
    for source_folder, target_folder, wanted in pairs:
        try:
            names = [name for name in os.listdir(source_folder) if wanted(name)]
            have = set(os.listdir(target_folder))
        except OSError:
            continue
        for name in names:
            if name in have:
                continue
            origin, copy = os.path.join(source_folder, name), os.path.join(target_folder, name)
            try:
                st = os.lstat(origin)
                if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                    continue
                try:
                    os.link(origin, copy)
                except OSError:  # another file system: a copy of the bytes, never through a link
                    with os.fdopen(os.open(origin, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), "rb") as handle:
                        if stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                            write_atomic(copy, handle.read())
            except OSError:
                pass


def _foreign(level: str) -> bool:
    """Not a folder of this user's that only this user can write to (a link, another's, missing)."""
    import stat

    try:
        st = os.lstat(level)
    except OSError:
        return True
    return not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or bool(st.st_mode & 0o022)


def _whole(cached: dict[str, Any], key: str) -> bool:
    """An entry as `compile_layers` keeps it (anything else is a miss, compiled again)."""
    from governor import __version__

    return (cached.get("key") == key and cached.get("version") == __version__
            and isinstance(cached.get("digest"), str) and isinstance(cached.get("policy"), dict)
            and isinstance(cached.get("index"), dict))  # fmt: skip


def _forget_oldest(folder: str) -> None:
    """Keep the folder under KEEP entries (a long-lived machine sees policy after policy): the
    oldest go, and only names this folder's entries have."""
    try:
        listed = os.listdir(folder)
    except OSError:
        return
    for kind in (".json", ".forms"):  # the compiled policies, and their patterns' code (compiled.shared_forms)
        _forget_oldest_of(folder, [name for name in listed if _ours(name, kind)])


def _ours(name: str, kind: str) -> bool:
    """A compiled policy's name (its content key) or one of patterns' files (the policy's digest,
    then the interpreter's): a sha256 in hex first, and nothing else is ever removed."""
    if not name.endswith(kind) or len(name) < _NAME_LENGTH or name[64] != ".":
        return False
    return not name[:64].strip("0123456789abcdef") and (kind == ".forms" or len(name) == _NAME_LENGTH)


def _forget_oldest_of(folder: str, names: list[str]) -> None:
    if len(names) < KEEP:
        return
    aged = []
    for name in names:
        try:
            aged.append((os.lstat(os.path.join(folder, name)).st_mtime, name))
        except OSError:
            pass
    for _, name in sorted(aged)[: len(aged) - KEEP + 1]:
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
