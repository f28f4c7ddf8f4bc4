"""A hook process serves the package's modules from one file in its __pycache__
(governor.runtime.bundle): the bytecode of each module taken from its valid .pyc, used only while
its source is what it was, and written again by a hook that had to import a module the usual way.

Each test runs hook processes from a copy of the package, so it can change sources and the file."""

from __future__ import annotations

import json
import marshal
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from governor.runtime import bundle
from tests.conftest import ROOT, Env

pytestmark = pytest.mark.hook_processes
MARK = "memory-governor-test: decide came from the file"


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the governor package, with no cached bytecode."""
    target = tmp_path / "copy" / "governor"
    shutil.copytree(ROOT / "governor", target, ignore=shutil.ignore_patterns("__pycache__"))
    for data in ("rules", "schemas"):  # where an install puts the shipped policy and its schemas
        shutil.copytree(ROOT / data, target / data)
    return target


def _hook(env: Env, package: Path, *flags: str, umask: int | None = None) -> subprocess.CompletedProcess[bytes]:
    payload = {"session_id": f"bundle-{os.urandom(4).hex()}", "cwd": str(env.project), "hook_event_name": "PreToolUse",
               "transcript_path": "/dev/null", "tool_name": "mcp__engram__mem_search",
               "tool_input": {"query": "auth", "limit": 20}, "tool_use_id": f"t-{os.urandom(4).hex()}"}  # fmt: skip
    command = [sys.executable, *flags, "-I", "-S", str(package / "runtime" / "entry.py"), "claude-code"]
    return subprocess.run(command, input=json.dumps(payload).encode(), capture_output=True, env=env.vars,
                          cwd=str(env.project), timeout=60,
                          preexec_fn=None if umask is None else lambda: os.umask(umask) and None)  # fmt: skip


def _path(package: Path) -> str:
    return str(package / "__pycache__" / bundle.file_name(str(package)))


def _clamped(proc: subprocess.CompletedProcess[bytes]) -> bool:
    """The decision a search asking for 20 gets under the shipped policy: clamped to 3."""
    answer = json.loads(proc.stdout)
    return answer["hookSpecificOutput"]["updatedInput"] == {"query": "auth", "limit": 3}


def _held(package: Path) -> dict[str, tuple]:  # type: ignore[type-arg]
    root, modules = bundle.read(_path(package))
    assert root == str(package)
    return modules


def _plant(package: Path, name: str) -> None:
    """Rewrite the file so that `name`'s bytecode also prints MARK: seen only if it is served."""
    path = _path(package)
    root, modules = bundle.read(path)
    origin, is_package, held, _, cached = modules[name]
    source = Path(origin).read_text() + f"\nimport sys as _s\n_s.stderr.write({MARK!r} + '\\n')\n"
    modules[name] = (origin, is_package, held, marshal.dumps(compile(source, origin, "exec")), cached)
    bundle.write(path, root, modules)


def test_the_second_hook_is_served_from_the_file_until_a_source_changes(env: Env, package: Path) -> None:
    first = _hook(env, package)
    assert _clamped(first), first.stderr
    held = _held(package)
    assert {"governor.engine.decide", "governor.engine.pre_tool", "governor.runtime.runner"} <= set(held)
    assert "governor.runtime.hook" not in held  # imported before the finder: never the file's

    _plant(package, "governor.engine.decide")
    path = Path(_path(package))
    written = path.stat().st_mtime_ns
    served = _hook(env, package)
    assert MARK in served.stderr.decode() and _clamped(served), served.stderr  # the file's bytecode ran
    assert path.stat().st_mtime_ns == written  # every module served: the file is not written again

    source = package / "engine" / "decide.py"
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # touched: a newer mtime
    touched = _hook(env, package)
    assert MARK not in touched.stderr.decode() and _clamped(touched), touched.stderr
    assert _held(package)["governor.engine.decide"][2] == bundle.stamp(source.stat())  # taken again

    _plant(package, "governor.engine.decide")
    mtime = source.stat().st_mtime_ns
    source.write_text(source.read_text() + "\n# the same mtime, another size\n")
    os.utime(source, ns=(mtime, mtime))
    edited = _hook(env, package)
    assert MARK not in edited.stderr.decode() and _clamped(edited), edited.stderr
    again = _hook(env, package)
    assert MARK not in again.stderr.decode() and _clamped(again), again.stderr


def test_a_file_that_is_not_the_bundle_is_ignored_and_written_again(env: Env, package: Path) -> None:
    assert _clamped(_hook(env, package))
    path = Path(_path(package))
    good = path.read_bytes()
    magic = sys.modules["_frozen_importlib_external"].MAGIC_NUMBER
    index = marshal.dumps((magic, str(package), {}))
    for junk in (b"", b"MGHM", b"MGHM\xff\xff\xff\x7f", b"\x00not marshal", good[: len(good) // 2],
                 bundle.frame(index)[:-3], bundle.frame(index)[:8] + bytes(8) + index,
                 _file(("another magic", str(package), {})), _file((magic, "/elsewhere", {})), _file([1, 2, 3])):  # fmt: skip
        path.write_bytes(junk)
        proc = _hook(env, package)
        assert _clamped(proc) and not proc.stderr, (junk[:40], proc.stderr)
        assert "governor.engine.decide" in _held(package), junk[:40]


def _file(index: object) -> bytes:
    header = marshal.dumps(index)
    return bundle.frame(header)


def test_an_entry_it_did_not_write_is_not_served(env: Env, package: Path) -> None:
    assert _clamped(_hook(env, package))
    path = Path(_path(package))
    root, modules = bundle.read(str(path))
    origin, is_package, held, _, cached = modules["governor.engine.decide"]
    for entry in [("only", "three", "fields"), (origin, is_package, held, b"\x00junk", cached),
                  (origin, is_package, held, marshal.dumps("not code"), cached)]:  # fmt: skip
        if len(entry) == 5:
            bundle.write(str(path), root, {**modules, "governor.engine.decide": entry})
        else:  # one the writer could not lay out: placed in the index by hand
            header = marshal.dumps((sys.modules["_frozen_importlib_external"].MAGIC_NUMBER, root,
                                    {"governor.engine.decide": entry}))  # fmt: skip
            path.write_bytes(bundle.frame(header))
        proc = _hook(env, package)
        assert _clamped(proc) and not proc.stderr, (entry, proc.stderr)
        assert marshal.loads(_held(package)["governor.engine.decide"][3]).co_filename == origin


def test_no_file_is_written_where_bytecode_is_not(env: Env, package: Path) -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)  # .pyc files to take
    proc = _hook(env, package, "-B")  # the interpreter writes no bytecode: nor is the file written
    assert _clamped(proc), proc.stderr
    assert not Path(_path(package)).exists()


def test_what_another_copy_or_interpreter_wrote_is_not_served(env: Env, package: Path) -> None:
    """A file naming another folder, or another interpreter's bytecode (its magic number), holds
    real entries here: none of them runs."""
    assert _clamped(_hook(env, package))
    _plant(package, "governor.engine.decide")
    path = Path(_path(package))
    planted = path.read_bytes()
    length = int.from_bytes(planted[4:8], "little")
    magic, root, index = marshal.loads(planted[16 : 16 + length])
    for header in [(magic, str(package.parent / "other" / "governor"), index), (b"\x00\x00\r\n", root, index)]:
        rewritten = marshal.dumps(header)
        path.write_bytes(bundle.frame(rewritten) + planted[16 + length :])  # (a digest that matches: read on)
        proc = _hook(env, package)
        assert MARK not in proc.stderr.decode() and _clamped(proc), (header[:2], proc.stderr)
    path.write_bytes(planted[:8] + bytes(8) + planted[16:])  # its index's digest not the index's: none of it
    proc = _hook(env, package)
    assert MARK not in proc.stderr.decode() and _clamped(proc), proc.stderr
    path.write_bytes(planted)
    assert MARK in _hook(env, package).stderr.decode()  # the same file, as written: served (the check bites)
    root, modules = bundle.read(str(path))  # a name outside the package, whatever the file says: never served
    origin, _, held, code, cached = modules["governor.engine.decide"]
    bundle.write(str(path), root, {**modules, "_sqlite3": (origin, False, held, code, cached)})
    proc = _hook(env, package)
    assert proc.stderr.decode().count(MARK) == 1 and _clamped(proc), proc.stderr  # decide's, not _sqlite3's


def test_served_code_names_its_own_file_and_the_file_is_as_private_as_the_bytecode(env: Env, package: Path) -> None:
    """Bytecode taken in one place names its source there: the finder points it at this copy's file,
    as the .pyc loader does. The file gets the mode of the package's source (as each .pyc does),
    whatever the umask of the hook that wrote it."""
    (package / "__init__.py").chmod(0o644)
    proc = _hook(env, package, umask=0)
    assert proc.returncode == 0 and _clamped(proc), proc.stderr
    assert Path(_path(package)).stat().st_mode & 0o777 == 0o644
    path = _path(package)
    root, modules = bundle.read(path)
    origin, is_package, held, _, cached = modules["governor.engine.decide"]
    source = (
        Path(origin).read_text()
        + "\nimport sys as _s\n_s.stderr.write('ran as ' + _s._getframe().f_code.co_filename + '\\n')\n"
    )
    code = marshal.dumps(compile(source, "/somewhere/else/decide.py", "exec"))
    bundle.write(path, root, {**modules, "governor.engine.decide": (origin, is_package, held, code, cached)})
    served = _hook(env, package)
    assert f"ran as {origin}" in served.stderr.decode(), served.stderr


def test_a_pyc_older_than_its_source_is_not_taken(env: Env, package: Path) -> None:
    """An edit in the same second as the .pyc, of the same size, passes Python's own check of the
    .pyc (its source's mtime in seconds and size): the file does not take that bytecode."""
    assert _clamped(_hook(env, package))
    path = Path(_path(package))
    source = package / "engine" / "decide.py"
    cached = Path(_held(package)["governor.engine.decide"][4])
    path.unlink()
    second = (source.stat().st_mtime_ns // 1_000_000_000) * 1_000_000_000
    os.utime(cached, ns=(second + 200_000_000, second + 200_000_000))  # the .pyc: written at .2 s
    text = source.read_text()
    source.write_text(text.replace("one entry", "One entry", 1) if "one entry" in text else text[:-1] + " ")
    os.utime(source, ns=(second + 900_000_000, second + 900_000_000))  # then the source, at .9 s, same size
    assert _clamped(_hook(env, package))
    assert "governor.engine.decide" not in _held(package)
    assert "governor.engine.pre_tool" in _held(package)


def test_hooks_starting_at_once_leave_one_whole_file(env: Env, package: Path) -> None:
    assert _clamped(_hook(env, package, "-B"))  # no file yet, and no .pyc: every hook below takes its own
    payload = {"session_id": "bundle-2", "cwd": str(env.project), "hook_event_name": "PreToolUse",
               "transcript_path": "/dev/null", "tool_name": "mcp__engram__mem_search",
               "tool_input": {"query": "auth", "limit": 20}}  # fmt: skip
    command = [sys.executable, "-I", "-S", str(package / "runtime" / "entry.py"), "claude-code"]
    procs = [subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env.vars, cwd=str(env.project)) for _ in range(6)]  # fmt: skip
    for n, proc in enumerate(procs):
        out, err = proc.communicate(
            json.dumps({**payload, "session_id": f"s-{n}", "tool_use_id": "t"}).encode(), timeout=60
        )
        assert json.loads(out)["hookSpecificOutput"]["updatedInput"]["limit"] == 3, err
    held = _held(package)
    for name, (origin, _, stamp, code, _) in held.items():
        assert bundle.stamp(os.stat(origin)) == stamp, name
        marshal.loads(code)
    assert not [p for p in (package / "__pycache__").iterdir() if p.name.endswith(".tmp")]


def test_each_optimisation_level_and_each_path_to_the_package_has_its_own_file(
    env: Env, package: Path, tmp_path: Path
) -> None:
    """-O bytecode (no asserts) is never served to a plain hook, nor the other way round; a package
    reached through a symlink too gets its own file, and none of them is written again and again."""
    link = tmp_path / "link"
    link.symlink_to(package.parent)
    linked = link / "governor"
    runs = [(package, ()), (package, ("-O",)), (linked, ()), (linked, ("-O",))]
    for where, flags in runs:
        assert _clamped(_hook(env, where, *flags))
    files = sorted(p.name for p in (package / "__pycache__").glob("hook-modules.*.bin"))
    assert len(files) == 4 and sum(".opt-1." in name for name in files) == 2, files
    written = {p.name: p.stat().st_mtime_ns for p in (package / "__pycache__").glob("hook-modules.*.bin")}
    for where, flags in runs:
        assert _clamped(_hook(env, where, *flags))
    assert {p.name: p.stat().st_mtime_ns for p in (package / "__pycache__").glob("hook-modules.*.bin")} == written


def test_a_hash_checked_pyc_is_taken_and_a_same_size_edit_with_its_mtime_put_back_is_not_served(
    env: Env, package: Path
) -> None:
    """Builds that pin file times write hash-checked .pyc files: those are taken, each checked against
    its source's hash; an edit that keeps the size and puts the mtime back still changes the source's
    change time, so the bytecode taken before is not served."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "--invalidation-mode", "checked-hash", str(package)],
                   check=True)  # fmt: skip
    assert _clamped(_hook(env, package))
    assert "governor.engine.decide" in _held(package)
    _plant(package, "governor.engine.decide")
    assert MARK in _hook(env, package).stderr.decode()
    source = package / "engine" / "decide.py"
    before = source.stat()
    text = source.read_text()
    source.write_text(text.replace("is the one entry", "is the One entry", 1))
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert source.stat().st_size == before.st_size and source.stat().st_mtime_ns == before.st_mtime_ns
    proc = _hook(env, package)
    assert MARK not in proc.stderr.decode() and _clamped(proc), proc.stderr


def test_an_entry_whose_file_is_outside_the_package_or_whose_bytecode_is_damaged_is_not_served(
    env: Env, package: Path, tmp_path: Path
) -> None:
    assert _clamped(_hook(env, package))
    _plant(package, "governor.engine.decide")
    path = _path(package)
    root, modules = bundle.read(path)
    origin, is_package, _, code, cached = modules["governor.engine.decide"]
    outside = tmp_path / "elsewhere" / "decide.py"
    outside.parent.mkdir()
    outside.write_text(Path(origin).read_text())
    moved = (str(outside), is_package, bundle.stamp(outside.stat()), code, cached)
    bundle.write(path, root, {**modules, "governor.engine.decide": moved})
    proc = _hook(env, package)
    assert MARK not in proc.stderr.decode() and _clamped(proc), proc.stderr

    _plant(package, "governor.engine.decide")
    data = bytearray(Path(path).read_bytes())
    at = data.index(MARK.encode())  # one bit of the planted bytecode flipped: it still loads, and differs
    data[at] ^= 0x20
    Path(path).write_bytes(bytes(data))
    proc = _hook(env, package)
    assert proc.returncode == 0 and _clamped(proc), proc.stderr
    assert "emory-governor-test" not in proc.stderr.decode(), proc.stderr  # the damaged copy did not run
