"""A hook process's modules from one file, read as needed: `governor/__pycache__/hook-modules.*.bin`.

A hook deciding alone imports ~35 of the package's modules (a warm one ~6), and each import
through the path finder costs ~0.1 ms of Python-level work (the folder's listing, the cached
file's name, open, read, the .pyc's header against its source) before the module's code runs.
This finder serves them from one file instead: an index, then for each module the bytecode
Python cached for it (its .pyc, taken only while valid for its source as Python itself checks it,
and not written before the source last changed), read when the module is imported. The file is
kept in the package's own __pycache__ beside those .pyc files, with the mode each of them gets
(the source's), so it is exactly as trusted as they are; one per interpreter, optimisation level
and path to the package, as the .pyc files are named; never in a folder the state directory, the
environment or the user's project names.

A module is served only while its source is the file it was when its bytecode was taken (its
size, modification and change times in ns and inode: any write, an upgrade or a moved file changes
one) and its bytecode has the digest the index gives it (the index has its own), so an edit is imported as usual; a name
the file does not hold or outside the package, a file that cannot be read, one from another
interpreter or for another folder, or any entry that is not what this module wrote: the same. The
hook that imported a module the usual way writes the file again after its answer (`refresh`);
a package folder the process cannot write to (a managed install), or an interpreter that writes
no bytecode, is never written, and its hooks import as usual.

Standard library only, and only what the interpreter has loaded at start (`marshal`, `os`, `sys`,
`_imp`, the frozen import machinery).
"""

import _frozen_importlib  # importlib's bootstrap, loaded at every start
import _frozen_importlib_external
import _imp
import marshal
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAGIC: bytes = _frozen_importlib_external.MAGIC_NUMBER
_KEY: int = _frozen_importlib_external._RAW_MAGIC_NUMBER  # type: ignore[attr-defined]  # source_hash's key
PACKAGE = "governor"
# The file is opened as a state file is (governor.state.SAFE_FLAGS: no link, no FIFO waited on).
_SAFE = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def stat_is_file(fd: int) -> bool:
    return os.fstat(fd).st_mode & 0o170000 == 0o100000


HEAD = b"MGHM"  # then the index's length (4 bytes, little-endian), its digest (8), the index, each module's bytecode
FIRST_READ = 1 << 16  # the index (a few KB) in one read; a module's bytecode is read when it is imported
_CODE = type(_frozen_importlib.ModuleSpec.__init__.__code__)


def file_name(root: str) -> str:
    """The file for the package at `root`, for this interpreter: its cache tag and optimisation
    level, as its .pyc files are named, and the folder's own path (a package reached by two paths,
    a symlink, gets a file for each instead of each rewriting the other's)."""
    optimize = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""
    where = _imp.source_hash(_KEY, root.encode("utf-8", "surrogateescape"))
    return f"hook-modules.{sys.implementation.cache_tag}{optimize}.{where.hex()}.bin"


def stamp(found: os.stat_result) -> tuple[int, int, int, int]:
    """What identifies a source file as the one its bytecode was taken from: any write changes its
    change time (which no one can set back), a replacement its inode."""
    return found.st_mtime_ns, found.st_size, found.st_ctime_ns, found.st_ino


class Finder:
    """On sys.meta_path, first: the package's modules the file holds, while each is current."""

    def __init__(
        self, path: str, root: str, fd: int = -1, index: "dict[str, Any] | None" = None, base: int = 0
    ) -> None:
        self.path = path  # the file
        self.root = root  # the package's folder
        self.fd = fd  # the file as it was when read (a hook writing it anew replaces it whole), or -1
        self.base = base  # where the bytecode starts in it (after the index)
        self.index = index or {}  # name -> (origin, is a package, stamp, offset, length, digest, cached)
        self.served: set[str] = set()
        self.before = set(sys.modules)  # imported before it was installed: never its to hold

    def find_spec(self, name: str, path: "Any" = None, target: "Any" = None) -> "Any":
        entry = self.index.get(name)
        if entry is None:
            return None
        try:
            origin, package, held, _, _, _, cached = entry
            if not (name == PACKAGE or name.startswith(PACKAGE + ".")) or not origin.startswith(self.root + os.sep):
                return None  # never a name or a file outside the package, whatever the file says
            if stamp(os.stat(origin)) != held:
                return None  # changed since: imported as usual, and taken again after the answer
            code = marshal.loads(self.bytecode(entry))
            if type(code) is not _CODE:
                return None
            spec = _frozen_importlib.ModuleSpec(name, self, origin=origin, is_package=bool(package))  # type: ignore[arg-type]
            spec.has_location = True
            spec.cached = cached  # (named, not derived from the origin: no name-building per import)
            if package:
                spec.submodule_search_locations = [os.path.dirname(origin)]
        except Exception:
            return None  # an entry this module did not write: the usual import
        spec.loader_state = code
        return spec

    def bytecode(self, entry: "Any") -> bytes:
        """An entry's bytecode, read from the file and checked against its digest (ValueError)."""
        offset, length, digest = entry[3], entry[4], entry[5]
        data = os.pread(self.fd, length, self.base + offset)
        if len(data) != length or _imp.source_hash(_KEY, data) != digest:
            raise ValueError("the bytecode is not what the index says")  # (marshal may crash on damaged code)
        return data

    def create_module(self, spec: "Any") -> None:
        return None  # the usual module object

    def exec_module(self, module: "Any") -> None:
        spec = module.__spec__
        self.served.add(spec.name)
        _imp._fix_co_filename(spec.loader_state, spec.origin)  # type: ignore[attr-defined]  # as the .pyc loader does
        exec(spec.loader_state, module.__dict__)  # the package's own bytecode, as the .pyc loader runs it


def install(root: str) -> Finder:
    """Serve the package at `root` (its folder) from its file, where there is a usable one."""
    finder = Finder(os.path.join(root, "__pycache__", file_name(root)), root)
    try:
        finder.fd = os.open(finder.path, os.O_RDONLY | _SAFE)
        if not stat_is_file(finder.fd):
            raise ValueError(f"{finder.path} is not a regular file")
        finder.index, finder.base = _index(finder.fd, root)
    except Exception:  # none yet, or not one this module wrote (marshal raises what it likes on junk)
        finder.index = {}  # imported as usual, and written after the answer
    sys.meta_path.insert(0, finder)
    return finder


def frame(index: bytes) -> bytes:
    """What precedes the bytecode: the marker, the marshalled index's length and digest, the index."""
    return HEAD + len(index).to_bytes(4, "little") + _imp.source_hash(_KEY, index) + index


def _index(fd: int, root: str) -> "tuple[dict[str, Any], int]":
    """The file's index (when it is this module's, for `root`) and where its bytecode starts."""
    head = os.read(fd, FIRST_READ)
    if head[:4] != HEAD:
        return {}, 0
    length = int.from_bytes(head[4:8], "little")
    if 16 + length > len(head):
        head += os.pread(fd, 16 + length - len(head), len(head))
    index = head[16 : 16 + length]
    if len(index) != length or _imp.source_hash(_KEY, index) != head[8:16]:
        return {}, 0  # damaged, or not this module's (unmarshalled only once it is what was written)
    held = marshal.loads(index)
    if (
        isinstance(held, tuple)
        and len(held) == 3
        and held[0] == MAGIC
        and held[1] == root
        and isinstance(held[2], dict)
    ):
        return held[2], 16 + length
    return {}, 0


def write(path: str, root: str, modules: "dict[str, tuple[Any, ...]]") -> None:
    """The file for `root`: `modules` name -> (origin, is a package, stamp, bytecode, cached),
    written whole beside it with the mode of the package's source (as each .pyc gets its source's)
    and moved into place (hooks read it while it is written)."""
    index, offset = {}, 0
    for name, (origin, package, held, code, cached) in modules.items():
        index[name] = (origin, package, held, offset, len(code), _imp.source_hash(_KEY, code), cached)
        offset += len(code)  # (offsets count from the end of the index)
    header = marshal.dumps((MAGIC, root, index))
    try:
        mode = os.stat(os.path.join(root, "__init__.py")).st_mode & 0o666
    except OSError:
        return
    temporary = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError:
        return
    try:
        with open(fd, "wb") as file:
            file.write(frame(header) + b"".join(m[3] for m in modules.values()))
        os.replace(temporary, path)  # whole or not at all
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def read(path: str) -> "tuple[str, dict[str, tuple[Any, ...]]]":
    """What `write` wrote: (root, name -> (origin, is a package, stamp, bytecode, cached))."""
    fd = os.open(path, os.O_RDONLY | _SAFE)
    try:
        if not stat_is_file(fd):
            raise ValueError(f"{path} is not a regular file")
        head = os.read(fd, 16)
        if head[:4] != HEAD:
            raise ValueError(f"{path} is not a module file")
        length = int.from_bytes(head[4:8], "little")
        _, root, index = marshal.loads(os.pread(fd, length, 16))
        finder = Finder(path, root, fd, index, 16 + length)
        return root, {name: (*entry[:3], finder.bytecode(entry), entry[6]) for name, entry in index.items()}
    finally:
        os.close(fd)


def refresh(finder: Finder) -> None:
    """After the answer: when this process imported one of the package's modules the usual way,
    write the file again with every module it holds now (never fails the hook)."""
    try:
        _refresh(finder)
    except BaseException:  # the answer is out: nothing here may change the exit
        pass


def _refresh(finder: Finder) -> None:
    prefix = PACKAGE + "."
    loaded = {name: module for name, module in list(sys.modules.items())
              if name == PACKAGE or name.startswith(prefix)}  # fmt: skip
    fresh = [name for name, module in loaded.items()
             if name not in finder.served and name not in finder.before and _cached_source(finder, module)]  # fmt: skip
    if not fresh or sys.dont_write_bytecode or not os.access(os.path.dirname(finder.path), os.W_OK):
        return
    modules = {}
    for name, entry in finder.index.items():  # what it held, still current (another event's modules)
        if name not in loaded or name in finder.served:
            try:
                if stamp(os.stat(entry[0])) == entry[2]:
                    modules[name] = (*entry[:3], finder.bytecode(entry), entry[6])
            except Exception:  # gone, or not what the index says: dropped
                continue
    taken = 0
    for name in fresh:
        entry = _take(finder, loaded[name])
        if entry is not None:
            modules[name] = entry
            taken += 1
    if taken or set(modules) != set(finder.index):  # else the same file again: not written
        write(finder.path, finder.root, modules)


def _cached_source(finder: Finder, module: "Any") -> bool:
    """A module of the package imported from its source file, with a .pyc named for it."""
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None)
    return (isinstance(origin, str) and origin.endswith(".py") and origin.startswith(finder.root + os.sep)
            and isinstance(getattr(spec, "cached", None), str))  # fmt: skip


def _take(finder: Finder, module: "Any") -> "tuple[Any, ...] | None":
    """(origin, is a package, stamp, bytecode, cached) from the module's .pyc, if that is valid for
    its source as Python checks it (a timestamp .pyc: the source's mtime in seconds and its size; a
    hash-based one: the source's hash) and was not written before the source last changed (an edit
    in the same second as the .pyc, of the same size, passes Python's check)."""
    spec = module.__spec__
    origin, cached = spec.origin, spec.cached
    try:
        found = os.stat(origin)
        written = os.stat(cached).st_mtime_ns
        with open(cached, "rb") as file:
            data = file.read()
    except OSError:
        return None
    if len(data) < 16 or data[:4] != MAGIC or written < found.st_mtime_ns:
        return None
    flags = int.from_bytes(data[4:8], "little")
    if flags == 0:
        if (int.from_bytes(data[8:12], "little") != int(found.st_mtime) & 0xFFFFFFFF
                or int.from_bytes(data[12:16], "little") != found.st_size & 0xFFFFFFFF):  # fmt: skip
            return None
    elif flags in (1, 3):  # hash-based (pip writes them when SOURCE_DATE_EPOCH is set)
        try:
            with open(origin, "rb") as file:
                source = file.read()
        except OSError:
            return None
        if _imp.source_hash(_KEY, source) != data[8:16] or stamp(os.stat(origin)) != stamp(found):
            return None
    else:
        return None
    return origin, spec.submodule_search_locations is not None, stamp(found), data[16:], cached
