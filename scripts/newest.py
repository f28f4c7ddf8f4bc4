#!/usr/bin/env python3
"""The e2e tests against the newest harnesses: what `./scripts/test.sh --newest` runs around pytest.

    python scripts/newest.py resolve          # print MEMORY_GOVERNOR_E2E_PINS for the newest versions
    python scripts/newest.py summary REPORT   # which pins differ, and what failed (pytest's junit XML)

`resolve` asks each registry for the newest version of every pinned package (`npm view PACKAGE
version`; for the Python SDK `pip index versions`), prints a table of pin against newest to stderr
and, on stdout, the `package@version` items that differ (the value for MEMORY_GOVERNOR_E2E_PINS,
which tests/e2e/npm.py `pin` honours). A registry that does not answer leaves that pin as it is,
and says so. `summary` prints the pins that were overridden and the tests that failed, errored or
were skipped (with their reasons: a newest version that would not install is a skip locally).
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
E2E = ROOT / "tests" / "e2e"
# The modules that declare the pins (through npm.pin).
PIN_MODULES = (
    "conftest",
    "codex_env",
    "copilot_env",
    "gemini_env",
    "opencode_env",
    "claude_agent_sdk_env",
    "orchestrators_env",
    "qwen_env",
    "droid_env",
)


def pins() -> dict[str, tuple[str, str]]:
    """{package: (pinned version, registry)}, as the e2e modules declare them (no override applied)."""
    os.environ.pop("MEMORY_GOVERNOR_E2E_PINS", None)
    for path in (str(ROOT), str(E2E)):
        if path not in sys.path:
            sys.path.insert(0, path)
    import importlib

    for name in PIN_MODULES:
        importlib.import_module(name)
    import npm

    return dict(npm.PINS)


def newest(package: str, registry: str) -> str:
    """The newest version `registry` serves of `package` (raises RuntimeError when it does not say)."""
    if registry == "pypi":
        import shutil

        pip = shutil.which("pip")  # the environment's (scripts/test.sh puts .venv/bin first on PATH)
        command = [*([pip] if pip else [sys.executable, "-m", "pip"]), "index", "versions", package,
                   "--disable-pip-version-check"]  # fmt: skip
    else:
        command = ["npm", "view", package, "version"]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise RuntimeError(f"{command[0]}: {err}") from None
    out = proc.stdout.strip()
    if proc.returncode != 0 or not out:
        raise RuntimeError(f"{' '.join(command)} exited {proc.returncode}: {(proc.stderr or out).strip()[-300:]}")
    if registry == "pypi":  # "claude-agent-sdk (0.2.190)" on the first line
        first = out.splitlines()[0]
        if "(" not in first:
            raise RuntimeError(f"pip index versions said {first!r}")
        return first.split("(", 1)[1].split(")", 1)[0].strip()
    return out.splitlines()[-1].strip().strip("'\"")


def resolve() -> int:
    items = []
    rows = []
    for package, (pinned, registry) in sorted(pins().items()):
        try:
            latest = newest(package, registry)
        except RuntimeError as err:
            rows.append((package, pinned, "?", f"kept the pin: {err}"))
            continue
        rows.append((package, pinned, latest, "differs" if latest != pinned else "same"))
        if latest != pinned:
            items.append(f"{package}@{latest}")
    width = max(len(r[0]) for r in rows) if rows else 0
    print("newest versions against the pins:", file=sys.stderr)
    for package, pinned, latest, note in rows:
        print(f"  {package:{width}}  pin {pinned:10}  newest {latest:10}  {note}", file=sys.stderr)
    print(" ".join(items))
    return 0


def summary(report: Path) -> int:
    text = os.environ.get("MEMORY_GOVERNOR_E2E_PINS", "")
    declared = pins()
    from npm import overrides  # on sys.path once pins() ran

    given = overrides(text)
    lines = ["", "== --newest: the e2e tests against the newest harness versions =="]
    differ = [(p, declared.get(p, ("?", ""))[0], v) for p, v in sorted(given.items()) if declared.get(p, ("",))[0] != v]
    if differ:
        lines.append(
            "pins that differ (MEMORY_GOVERNOR_E2E_PINS; --newest: the newest versions), run at the version given:"
        )
        lines += [f"  {package}: pin {pinned} -> ran {version}" for package, pinned, version in differ]
    else:
        lines.append("every pin is the newest version")
    failed, skipped = [], {}
    total = 0
    if report.exists():
        for case in ElementTree.parse(report).iter("testcase"):
            total += 1
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            for tag in ("failure", "error"):
                for node in case.iter(tag):
                    message = (node.get("message") or "").strip().splitlines()
                    failed.append(f"  {tag}: {name}" + (f": {message[0][:200]}" if message else ""))
            for node in case.iter("skipped"):
                reason = (node.get("message") or "").strip().splitlines()
                key = reason[0][:200] if reason else "(no reason)"
                skipped[key] = skipped.get(key, 0) + 1
    else:
        lines.append(f"no test report at {report} (pytest did not run to its end)")
    lines.append(f"{total} tests, {len(failed)} failed or errored, {sum(skipped.values())} skipped")
    lines += failed
    lines += [f"  skipped {n}: {reason}" for reason, n in skipped.items()]
    print("\n".join(lines))
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["resolve"]:
        return resolve()
    if argv[:1] == ["summary"] and len(argv) == 2:
        return summary(Path(argv[1]))
    print("usage: newest.py resolve | newest.py summary REPORT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
