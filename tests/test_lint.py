"""The code stays ruff- and mypy-clean (configured in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(ROOT / ".venv" / "bin")) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (scripts/test.sh installs it with the dev extra)")
    return found


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff(args: list[str]) -> None:
    proc = subprocess.run([_tool("ruff"), *args, "governor", "tests", "scripts"], cwd=ROOT,
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    if "No module named mypy" in proc.stderr:
        pytest.skip("mypy is not installed")
    assert proc.returncode == 0, proc.stdout + proc.stderr
