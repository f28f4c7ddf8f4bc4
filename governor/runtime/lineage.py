"""Where the process that asked for a decision stands among processes (governor.engine.nesting):
the session's own process, the processes above it, and the governor's marker from its
environment, read from /proc.

A process is named by a key no other process has on any boot: `<boot>:<pid>:<start>` (the first
8 hex digits of the kernel's boot id, the pid, and its start time in clock ticks since boot,
field 22 of /proc/<pid>/stat). A pid used again later, or on another boot or host, is another key.

The session's own process: from the process that asked (a hook process, the warm server's
caller, a program deciding in its own process), the first that is neither the governor's own
(its entry file or proxy, the `memory-governor` command) nor a shell running a command or a
script (`sh -c …`: how harnesses run hooks). An interactive shell ends the search with none (a
person who pipes an event into a hook by hand owns no session), as does init (pid 1, everyone's
ancestor, which is never a candidate either). The MCP proxy is started by its client itself: the
proxy's parent is the session's own process, exactly (`direct`), so a proxy a model starts from
its shell is seen under the model's harness.

The marker (`MEMORY_GOVERNOR_PARENT`) is the own process's key of the session a harness's tools
were started under, passed to their environment (Claude Code: the SessionStart hook writes it to
CLAUDE_ENV_FILE; the Agent SDK and OpenCode: the program's own environment). It is kept only
while the process it names runs, on this boot: a stale or forged value names nothing.

Where /proc cannot be read (another OS, a hardened mount), a caller has no lineage: nesting is
then not seen, and the per-user window (governor.engine.window) is what holds.

Hot path: standard library only (`os`).
"""

from __future__ import annotations

import os

from governor.engine.case import Lineage
from governor.engine.nesting import MARKER

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

DEPTH = 64  # ancestors read at most
SHELLS = frozenset((b"sh", b"dash", b"bash", b"zsh", b"ksh", b"mksh", b"ash", b"yash", b"busybox", b"fish", b"tcsh",
                    b"csh"))  # fmt: skip
_OURS = (b"governor/runtime/entry.py", b"governor/runtime/proxy.py")
_boot: list[str] = []  # this boot's id (first 8 hex digits), read once per process


def boot() -> str:
    if not _boot:
        try:
            with open("/proc/sys/kernel/random/boot_id", "rb") as handle:
                _boot.append(handle.read(64).strip().replace(b"-", b"")[:8].decode("ascii", "replace"))
        except OSError:
            _boot.append("")
    return _boot[0]


def _read(path: str, size: int = 4096) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, size)
    finally:
        os.close(fd)


def _stat(pid: int) -> tuple[int, str, bytes] | None:
    """(parent pid, start time, command name) of a live process, else None."""
    try:
        data = _read(f"/proc/{pid}/stat", 1024)
    except OSError:
        return None
    close = data.rfind(b")")
    fields = data[close + 2 :].split()
    if close < 0 or len(fields) < 20 or not fields[1].isdigit() or not fields[19].isdigit():
        return None
    return int(fields[1]), fields[19].decode("ascii"), data[data.find(b"(") + 1 : close]


def key_of(pid: int) -> str | None:
    """The key of live process `pid`, or None."""
    found = _stat(pid)
    return None if found is None or not boot() else f"{boot()}:{pid}:{found[1]}"


def alive(process: str) -> bool:
    """Is `process` (a key) a process running now, on this boot?"""
    parts = process.split(":")
    if len(parts) != 3 or parts[0] != boot() or not parts[1].isdigit() or not parts[2].isdigit() or not parts[0]:
        return False
    found = _stat(int(parts[1]))
    return found is not None and found[1] == parts[2]


def _argv(pid: int) -> list[bytes]:
    try:
        return _read(f"/proc/{pid}/cmdline", 65536).split(b"\0")[:-1] or [b""]
    except OSError:
        return [b""]


def _ours(argv: list[bytes]) -> bool:
    """The governor itself: the `memory-governor` command, or an interpreter running it, its hook or
    proxy file, or `-m governor` (the program an interpreter runs: its first operand)."""
    if os.path.basename(argv[0]) == b"memory-governor":
        return True
    skip = False
    for index, arg in enumerate(argv[1:], 1):
        if skip or arg in (b"-X", b"-W"):  # options that take a value
            skip = not skip
            continue
        if arg == b"-m":
            return argv[index + 1 : index + 2] == [b"governor"]
        if not arg.startswith(b"-"):
            return os.path.basename(arg) == b"memory-governor" or arg.endswith(_OURS)
    return False


def _shell(comm: bytes, argv: list[bytes]) -> str:
    """'' not a shell; 'runs' a shell running a command or script; 'person' an interactive one."""
    if comm not in SHELLS and os.path.basename(argv[0]).lstrip(b"-") not in SHELLS:
        return ""
    for arg in argv[1:]:
        if arg == b"--":
            continue
        if not arg.startswith((b"-", b"+")):
            return "runs"  # a script
        if not arg.startswith(b"--") and (b"c" in arg or b"s" in arg):
            return "runs"  # -c, -lc, -ec, -s
    return "person"


def of(pid: int, env: Mapping[str, str], twin: bool = False, direct: bool = False) -> Lineage | None:
    """The lineage of process `pid` (the caller), or None where /proc says nothing of it.

    `direct`: the caller's parent is the session's own process (the MCP proxy). `twin`: a hook's
    event also decided by the program that started the harness (the Agent SDK's callbacks): the
    own process's parent is that program, running the same session, not one it was started under."""
    chain: list[tuple[int, str, bytes]] = []  # (pid, start, name), from the caller up
    at = pid
    while at > 1 and len(chain) < DEPTH:
        found = _stat(at)
        if found is None:
            break
        chain.append((at, found[1], found[2]))
        at = found[0]
    if not chain or not boot():
        return None
    own_at: int | None = None
    if direct:
        own_at = 1 if len(chain) > 1 else None
    else:
        for index, (process, _, name) in enumerate(chain):
            argv = _argv(process)
            kind = _shell(name, argv)
            if kind == "person":
                break
            if kind or _ours(argv):
                continue
            own_at = index
            break
    keys = [f"{boot()}:{process}:{start}" for process, start, _ in chain]
    above = keys[(own_at if own_at is not None else 0) + 1 :]
    own = keys[own_at] if own_at is not None else None
    marker = env.get(MARKER) or None
    if twin and own is not None and above:
        if marker == above[0]:
            marker = None
        above = above[1:]
    if marker is not None and (marker == own or not alive(marker)):
        marker = None
    return Lineage(own, tuple(above), marker)
