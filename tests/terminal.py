"""A command run by a person at a terminal: a pseudo-terminal that is the process's controlling one.

`memory-governor policy accept` needs the user's own terminal (the model's shell tool has none);
tests play the user through a pty, typing `typed` at it.
"""

from __future__ import annotations

import fcntl
import os
import pty
import subprocess
import termios
from pathlib import Path


def at_a_terminal(argv: list[str], cwd: Path, env: dict[str, str], typed: str = "",
                  timeout: float = 120) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run `argv` with a new session whose controlling terminal is a pty; `typed` is what the
    person types. Its output (stdout and stderr, as the terminal shows them) is `stdout`."""
    master, slave = pty.openpty()

    def controlling_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=str(cwd), env=env,
                            start_new_session=True, preexec_fn=controlling_terminal)  # fmt: skip
    os.close(slave)
    if typed:
        os.write(master, typed.encode())
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the last process holding the terminal closed it
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    code = proc.wait(timeout=timeout)
    return subprocess.CompletedProcess(argv, code, b"".join(chunks).decode("utf-8", "replace"), "")
