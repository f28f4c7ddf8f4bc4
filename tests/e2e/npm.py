"""Pinned npm packages for the end-to-end tests, installed once into a cache and reused.

The cache is outside the checkout (`$MEMORY_GOVERNOR_E2E_CACHE`, else
`$XDG_CACHE_HOME/memory-governor-e2e`, else `~/.cache/memory-governor-e2e`), so a fresh clone
on the same machine reuses what an earlier run installed. One folder per set of pins; the check
and the install are file-locked, so parallel test processes (pytest-xdist workers) install once.

No node/npm, or a failed install: the tests that need it are skipped with the reason, except
under CI=true, where they fail instead.

Every harness's pin is declared through `pin(package, version)`, which honours
MEMORY_GOVERNOR_E2E_PINS (`package@version` items, by space or comma: `./scripts/test.sh --newest`
sets it to the newest each registry serves, scripts/newest.py). An overridden version installs
into a folder of its own, so the pinned cache stays as it is.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

OVERRIDE = "MEMORY_GOVERNOR_E2E_PINS"
PINS: dict[str, tuple[str, str]] = {}  # package -> (the version pinned in the code, its registry: npm or pypi)


def overrides(text: str | None = None) -> dict[str, str]:
    """{package: version} from MEMORY_GOVERNOR_E2E_PINS (or `text`): `@scope/name@1.2.3 name@4.5`."""
    text = os.environ.get(OVERRIDE, "") if text is None else text
    out = {}
    for item in text.replace(",", " ").split():
        package, at, version = item.rpartition("@")
        if not at or not package or not version:
            raise ValueError(f"{OVERRIDE}: {item!r} is not package@version")
        out[package] = version
    return out


def pin(package: str, version: str, registry: str = "npm") -> str:
    """The version of `package` (on `registry`: npm, or pypi) the e2e tests run: `version` (the pin),
    unless MEMORY_GOVERNOR_E2E_PINS names another."""
    PINS[package] = (version, registry)
    return overrides().get(package, version)


def cache_root() -> Path:
    explicit = os.environ.get("MEMORY_GOVERNOR_E2E_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "memory-governor-e2e"


def unavailable(reason: str) -> None:
    """Skip the test with the reason; under CI=true, fail it."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"e2e prerequisites missing on CI: {reason}", pytrace=False)
    pytest.skip(reason)


def install(name: str, packages: dict[str, str], ready: Callable[[Path], bool], timeout: float = 900) -> Path:
    """The folder where `packages` ({npm name: version}) are installed, installing them once.

    `ready(folder)` says whether an install there is complete and runs (e.g. `--version`)."""
    if shutil.which("node") is None:
        unavailable(f"node not found: the {name} e2e tests need node and npm")
    pins = "-".join(
        f"{package.strip('@').replace('/', '+')}-{version}" for package, version in sorted(packages.items())
    )
    folder = cache_root() / f"{name}-{pins}"
    folder.mkdir(parents=True, exist_ok=True)
    # `ready` runs the binary, whose first start may unpack into the cache (Copilot's runtime):
    # it runs under the lock too, so two test processes never write one folder at a time.
    with open(cache_root() / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready(folder):
            return folder
        if shutil.which("npm") is None:
            unavailable(f"npm not found: the {name} e2e tests install {', '.join(packages)} with npm")
        (folder / "package.json").write_text(
            json.dumps({"name": f"memory-governor-e2e-{name}", "private": True, "dependencies": packages}, indent=2)
            + "\n"
        )
        try:
            proc = subprocess.run(
                ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=folder, capture_output=True, text=True, timeout=timeout,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as err:
            unavailable(f"npm install of {packages} failed: {err}")
        if proc.returncode != 0 or not ready(folder):
            unavailable(f"npm install of {packages} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return folder


def version_ok(binary: Path, expected: str, args: tuple[str, ...] = ("--version",)) -> bool:
    """Does `binary --version` run and name `expected`?"""
    if not binary.exists():
        return False
    try:
        out = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and expected in out.stdout + out.stderr
