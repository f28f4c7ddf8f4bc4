"""The regular expressions a prompt's decision runs, built without importing `re` where it can.

`re` compiles in Python: importing it (with `enum`, which it imports) costs a hook that decides
alone ~5 ms, and each pattern it compiles a few tenths more. What it hands the interpreter is
the `_sre` code of the pattern, which depends only on the pattern, its flags and the
interpreter. So the code of every pattern a prompt's decision may run (the policy's memory-need
patterns and recall phrases, and the fixed ones of classify, recall and need_model) is kept in
one file per compiled policy and interpreter, and `_sre.compile` builds from it the same
pattern `re.compile` would (equal by `Pattern.__eq__`, which compares the code; checked for
every pattern when the file is written).

The file is trusted only whole: its blake2b digest over everything after the first line, the
interpreter it was built by (`sys.hexversion`, `_sre.MAGIC`, `CODESIZE`, `MAXREPEAT`,
`MAXGROUPS`, the byte order), this package's version and the digest of the policy it stands
for. Anything else (missing, damaged, another interpreter or policy) and the patterns are
compiled by `re` as before, and the file is written again. A pattern the file does not hold
is compiled by `re`. The sources are the policy's and this package's, never a prompt's words.

Hot path: standard library only; `re` only on a miss.
"""

from __future__ import annotations

import _sre  # type: ignore[import-not-found]
import _thread
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from re import Match, Pattern
    from typing import Any

FORMAT = 1
IGNORECASE = 2  # re.I (_sre's SRE_FLAG_IGNORECASE), without importing re for it
_ESCAPED = {i: "\\" + chr(i) for i in b"()[]{}?*+-|^$\\.&~# \t\n\r\v\f"}  # re.escape's (3.7 on)

SHIPPED: list[tuple[str, int]] = []  # every Lazy pattern's (source, flags), in import order
_built: dict[tuple[str, int], Pattern[str]] = {}
_forms: dict[tuple[str, int], tuple[int, int, int, int, dict[str, int], tuple[str | None, ...]]] = {}
_body: memoryview | None = None
_where: tuple[str, str] | None = None  # (file, policy digest) the next lookup reads
_read: tuple[str, str] | None = None  # what _forms was read from
_sources: Callable[[], Iterable[tuple[str, int]]] | None = None
_shared: Callable[[], str | None] | None = None
_lock = _thread.allocate_lock()


def escape(text: str) -> str:
    """re.escape(text), without importing re (tests/test_patterns.py compares them)."""
    return text.translate(_ESCAPED)


def use(stem: str | None, policy_digest: str, sources: Callable[[], Iterable[tuple[str, int]]],
        shared: Callable[[], str | None] | None = None) -> None:  # fmt: skip
    """Where the forms of this policy's patterns are kept (`stem`: its compiled file without
    `.json`; None: nowhere, `re` compiles), and how to list them if the file must be written.
    `shared`: the stem of the same policy's file for every project of the state directory, read
    when `stem`'s is missing (a new project whose files say what another's say) and copied to it,
    and written when `stem`'s is."""
    global _where, _sources, _shared
    with _lock:  # one policy's three at once (the warm server's threads decide for several projects)
        _where = (file_for(stem), policy_digest) if stem else None
        _sources, _shared = sources, shared


def file_for(stem: str) -> str:
    """One file per interpreter: two of them sharing a state directory do not rewrite each other's."""
    return f"{stem}.{sys.hexversion:x}-{_sre.MAGIC}.forms"


def compiled(source: str, flags: int = 0) -> Pattern[str]:
    """`re.compile(source, flags)`, from its kept form when there is one."""
    key = (source, flags)
    found = _built.get(key)
    if found is not None:
        return found
    with _lock:
        if _where is not None and _where != _read:
            _load(*_where)
        form = _forms.get(key)
        if form is not None and _body is not None:
            final, start, length, groups, groupindex, indexgroup = form
            try:
                code = _body[start : start + length].tolist()
                found = _sre.compile(source, final, code, groups, groupindex, indexgroup)
            except Exception:  # _sre refuses code it cannot run: compile it instead
                found = None
        if found is None:
            import re

            found = re.compile(source, flags)
        _built[key] = found
        return found


class Lazy:
    """A module's pattern, built when first used (most prompts reach few of them), and listed in
    SHIPPED so the forms file holds it."""

    __slots__ = ("_pattern", "flags", "source")

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source, self.flags = source, flags
        self._pattern: Pattern[str] | None = None
        SHIPPED.append((source, flags))

    def _re(self) -> Pattern[str]:
        if self._pattern is None:
            self._pattern = compiled(self.source, self.flags)
        return self._pattern

    def search(self, text: str, *where: int) -> Match[str] | None:
        return self._re().search(text, *where)

    def match(self, text: str) -> Match[str] | None:
        return self._re().match(text)

    def fullmatch(self, text: str) -> Match[str] | None:
        return self._re().fullmatch(text)

    def finditer(self, text: str, *where: int) -> Iterator[Match[str]]:
        return self._re().finditer(text, *where)

    def findall(self, text: str) -> list[Any]:
        return self._re().findall(text)

    def split(self, text: str) -> list[str]:
        return self._re().split(text)

    def sub(self, replacement: str, text: str) -> str:
        return self._re().sub(replacement, text)


def _interpreter() -> list[Any]:
    return [sys.hexversion, _sre.MAGIC, _sre.CODESIZE, _sre.MAXREPEAT, _sre.MAXGROUPS, sys.byteorder]


def _load(path: str, policy_digest: str) -> None:
    """_forms from `path` if it is whole and stands for this interpreter, package and policy, or
    else from the shared file for the policy (then copied to `path`); else none, and the file
    written again (from the patterns `re` compiles for it), and copied as the shared one."""
    global _read
    _read = (path, policy_digest)
    if _read_forms(path, policy_digest) is not None:
        return
    try:
        stem = _shared() if _shared is not None else None
    except Exception:
        stem = None
    other = file_for(stem) if stem else None
    data = _read_forms(other, policy_digest) if other is not None else None
    if data is not None:
        _copy(path, data)  # the bytes just checked, as a file of the project's own
        return
    if _sources is not None:
        try:
            data = _write(path, policy_digest, _sources())
        except Exception:  # best effort: the next process compiles with re again
            return
        if other is not None and data is not None:
            _copy(other, data)


def _read_forms(path: str, policy_digest: str) -> bytes | None:
    """_forms and _body from `path`, if it is a file of this user's (not a link) that is whole
    and stands for this interpreter, package and policy: its bytes; else None."""
    global _body
    import stat

    from governor import __version__

    _forms.clear()
    _body = None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as handle:
            found = os.fstat(handle.fileno())
            if not stat.S_ISREG(found.st_mode) or found.st_uid != os.geteuid():
                raise ValueError("not a file of this user's")
            data = handle.read()
        first = data.index(b"\n") + 1
        if _digest(memoryview(data)[first:]) != data[: first - 1].decode("ascii"):
            raise ValueError("damaged")
        start = data.index(b"\n", first) + 1
        from governor import jsonio

        head = jsonio.loads(data[first:start])
        if (head["format"], head["interpreter"], head["governor"], head["policy"]) != (
            FORMAT, _interpreter(), __version__, policy_digest):  # fmt: skip
            raise ValueError("stands for another interpreter, package or policy")
        body = memoryview(data)[start:].cast("I")
        for source, flags, final, offset, length, groups, groupindex, indexgroup in head["forms"]:
            _forms[(source, flags)] = (final, offset, length, groups, groupindex, tuple(indexgroup))
        _body = body
        return data
    except Exception:  # missing, damaged or another's: as if absent (never a failed decision)
        _forms.clear()
        return None


def _copy(path: str, data: bytes) -> None:
    """Best effort: the file is checked whenever it is read."""
    from governor.state import write_atomic

    try:
        write_atomic(path, data)
    except OSError:
        pass


def _write(path: str, policy_digest: str, sources: Iterable[tuple[str, int]]) -> bytes | None:
    """The forms file for `sources` (its bytes), each form checked: what `_sre.compile` builds
    from it equals what `re.compile` does (a pattern for which it does not is left out, for `re`
    to compile)."""
    import re

    from governor import __version__, jsonio
    from governor.state import ensure_dir, write_atomic

    try:
        from re import _compiler, _parser  # type: ignore[attr-defined]
    except ImportError:  # Python 3.10
        import sre_compile as _compiler
        import sre_parse as _parser
    if _sre.CODESIZE != 4:
        return None
    forms: list[list[Any]] = []
    code: list[int] = []
    for source, flags in dict.fromkeys(sources):
        try:
            parsed = _parser.parse(source, flags)
            ops = _compiler._code(parsed, flags)
            groupindex = dict(parsed.state.groupdict)
            indexgroup: list[str | None] = [None] * parsed.state.groups
            for name, number in groupindex.items():
                indexgroup[number] = name
            final, groups = flags | parsed.state.flags, parsed.state.groups - 1
            built = _sre.compile(source, final, ops, groups, groupindex, tuple(indexgroup))
            expected = re.compile(source, flags)
        except Exception:  # a pattern re refuses, or one this form cannot hold: re's business
            continue
        if built != expected or built.groupindex != expected.groupindex:
            continue
        _built.setdefault((source, flags), expected)
        forms.append([source, flags, final, len(code), len(ops), groups, groupindex, indexgroup])
        code.extend(ops)
    from array import array

    head = jsonio.dumps({"format": FORMAT, "interpreter": _interpreter(), "governor": __version__,
                         "policy": policy_digest, "forms": forms}).encode()  # fmt: skip
    head += b" " * (-(len(head) + 1 + 65) % 4) + b"\n"  # the code starts 4-aligned
    rest = head + array("I", code).tobytes()
    ensure_dir(os.path.dirname(path))
    data = _digest(rest).encode("ascii") + b"\n" + rest
    write_atomic(path, data)
    return data


def _digest(data: bytes | memoryview) -> str:
    from governor.state import blake2b_hex

    return blake2b_hex(data)
