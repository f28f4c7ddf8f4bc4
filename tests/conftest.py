"""Shared fixtures: an isolated HOME and state directory per test, and the CLI as a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "rules" / "memory-budget.yaml"


class Env:
    """A sandbox: its own HOME, XDG dirs, state directory and project directory."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.home = tmp / "home"
        self.state = tmp / "state"
        self.project = tmp / "project"
        for d in (self.home, self.project):
            d.mkdir(parents=True, exist_ok=True)
        self.vars = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "MEMORY_GOVERNOR_STATE_DIR": str(self.state),
            "MEMORY_GOVERNOR_WARM_SERVER": "off",
            "LANG": "C.UTF-8",
        }

    def cli(
        self,
        *args: str,
        input: str | bytes | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        check: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        data = input.encode() if isinstance(input, str) else input
        proc = subprocess.run(
            [sys.executable, "-m", "governor", *args],
            input=data,
            capture_output=True,
            cwd=str(cwd or self.project),
            env={**self.vars, **(env or {})},
            timeout=120,
        )
        out = subprocess.CompletedProcess(
            proc.args,
            proc.returncode,
            proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"),
        )
        if check and out.returncode != 0:
            raise AssertionError(f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}")
        return out

    def cli_json(self, *args: str, **kw: Any) -> Any:
        out = self.cli(*args, **kw)
        return json.loads(out.stdout)

    def write(self, rel: str, text: str) -> Path:
        path = self.project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)
