"""`./scripts/test.sh --newest`'s plumbing, offline: MEMORY_GOVERNOR_E2E_PINS moves each harness's pin
(tests/e2e/npm.py `pin`), scripts/newest.py turns what the registries say into that variable and
reports which pins differ and what failed. The registries' commands (`npm view`, `pip index
versions`) are programs on PATH here that answer as the registries do; the real run asks npm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

E2E = ROOT / "tests" / "e2e"
NEWEST = ROOT / "scripts" / "newest.py"
# What each e2e module calls the version it installs.
READ_PINS = f"""
import json, sys
sys.path[:0] = [{str(ROOT)!r}, {str(E2E)!r}]
import conftest, codex_env, copilot_env, gemini_env, opencode_env, claude_agent_sdk_env, npm
print(json.dumps({{"claude-code": list(conftest.CLAUDE_CODE_VERSIONS), "codex": codex_env.CODEX_VERSION,
                  "copilot": copilot_env.COPILOT_VERSION, "gemini": gemini_env.GEMINI_CLI_VERSION,
                  "opencode": opencode_env.OPENCODE_VERSION, "sdk": claude_agent_sdk_env.SDK_VERSION,
                  "ts-sdk": claude_agent_sdk_env.TS_SDK_VERSION, "pins": npm.PINS}}))
"""


def read_pins(override: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "MEMORY_GOVERNOR_E2E_PINS"}
    if override is not None:
        env["MEMORY_GOVERNOR_E2E_PINS"] = override
    proc = subprocess.run([sys.executable, "-c", READ_PINS], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_without_the_variable_every_module_runs_its_pin() -> None:
    seen = read_pins(None)
    pins = {package: version for package, (version, _) in seen["pins"].items()}
    assert seen["codex"] == pins["@openai/codex"] and seen["gemini"] == pins["@google/gemini-cli"]
    assert seen["copilot"] == pins["@github/copilot"] and seen["opencode"] == pins["opencode-ai"]
    assert seen["sdk"] == pins["claude-agent-sdk"] and seen["pins"]["claude-agent-sdk"][1] == "pypi"
    assert seen["ts-sdk"] == pins["@anthropic-ai/claude-agent-sdk"]
    assert seen["claude-code"][1] == pins["@anthropic-ai/claude-code"] and len(seen["claude-code"]) == 2


def test_the_variable_moves_each_named_pin_and_only_those() -> None:
    plain = read_pins(None)
    seen = read_pins("@openai/codex@9.1.0, @google/gemini-cli@8.2.0 opencode-ai@7.3.0 "
                     "claude-agent-sdk@6.4.0 @anthropic-ai/claude-agent-sdk@5.5.0 @anthropic-ai/claude-code@4.6.0")  # fmt: skip
    assert (seen["codex"], seen["gemini"], seen["opencode"], seen["sdk"], seen["ts-sdk"]) == (
        "9.1.0", "8.2.0", "7.3.0", "6.4.0", "5.5.0")  # fmt: skip
    assert seen["copilot"] == plain["copilot"], "a package not named keeps its pin"
    # Claude Code: the recent pin becomes the newest; the long-standing one stays
    assert seen["claude-code"] == [plain["claude-code"][0], "4.6.0"]
    assert seen["pins"] == plain["pins"], "PINS records what the code pins, whatever runs"


def test_a_malformed_item_is_refused() -> None:
    sys.path.insert(0, str(E2E))
    import npm

    with pytest.raises(ValueError, match="package@version"):
        npm.overrides("@openai/codex")
    assert npm.overrides("@scope/a@1.0 b@2") == {"@scope/a": "1.0", "b": "2"}


def registries(tmp_path: Path, npm_versions: dict[str, str], pypi_versions: dict[str, str]) -> dict[str, str]:
    """`npm view PACKAGE version` and `pip index versions PACKAGE` answering with these versions
    (a package not listed: the registry's 404, exit 1)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    npm = ["#!/bin/sh", 'case "$2" in']
    npm += [f'  "{p}") echo "{v}" ;;' for p, v in npm_versions.items()]
    npm += ['  *) echo "npm error 404 Not Found - GET https://registry.npmjs.org/$2" >&2; exit 1 ;;', "esac"]
    pip = ["#!/bin/sh", 'case "$3" in']
    pip += [f'  "{p}") echo "{p} ({v})"; echo "Available versions: {v}" ;;' for p, v in pypi_versions.items()]
    pip += ['  *) echo "ERROR: No matching distribution found for $3" >&2; exit 1 ;;', "esac"]
    for name, lines in (("npm", npm), ("pip", pip)):
        (bin_dir / name).write_text("\n".join(lines) + "\n")
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "MEMORY_GOVERNOR_E2E_PINS"}
    return {**env, "PATH": f"{bin_dir}:{env.get('PATH', '')}"}


def test_resolve_names_the_newest_versions_that_differ_and_keeps_a_pin_it_cannot_learn(tmp_path: Path) -> None:
    pins = {package: version for package, (version, _) in read_pins(None)["pins"].items()}
    npm_versions = {p: v for p, v in pins.items() if p not in ("claude-agent-sdk", "@github/copilot")}
    npm_versions["@openai/codex"] = "0.999.0"
    env = registries(tmp_path, npm_versions, {"claude-agent-sdk": "0.9.1"})
    proc = subprocess.run([sys.executable, str(NEWEST), "resolve"], capture_output=True, text=True, env=env,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["@openai/codex@0.999.0", "claude-agent-sdk@0.9.1"]
    table = {line.split()[0]: line for line in proc.stderr.splitlines()[1:]}
    assert table["@openai/codex"].split()[1:5] == ["pin", pins["@openai/codex"], "newest", "0.999.0"]
    assert table["@openai/codex"].endswith("differs") and table["@google/gemini-cli"].endswith("same")
    assert "kept the pin" in table["@github/copilot"] and "404" in table["@github/copilot"]


def test_summary_says_which_pins_differ_and_what_failed(tmp_path: Path) -> None:
    suite = tmp_path / "test_sample.py"
    suite.write_text("import pytest\n\ndef test_passes():\n    pass\n\ndef test_fails():\n    assert 1 == 2, 'the hook answered nothing'\n\n"
                     "def test_skips():\n    pytest.skip('npm install of @openai/codex@0.999.0 failed')\n")  # fmt: skip
    report = tmp_path / "report.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", str(suite),
                    f"--junitxml={report}"], capture_output=True, cwd=tmp_path, timeout=120)  # fmt: skip
    env = {**os.environ, "MEMORY_GOVERNOR_E2E_PINS": "@openai/codex@0.999.0"}
    proc = subprocess.run([sys.executable, str(NEWEST), "summary", str(report)], capture_output=True, text=True,
                          env=env, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    pin = read_pins(None)["pins"]["@openai/codex"][0]
    assert f"@openai/codex: pin {pin} -> ran 0.999.0" in proc.stdout
    assert "3 tests, 1 failed or errored, 1 skipped" in proc.stdout
    failures = [line for line in proc.stdout.splitlines() if line.strip().startswith("failure:")]
    assert len(failures) == 1 and "test_fails" in failures[0] and "the hook answered nothing" in failures[0]
    assert "skipped 1: " in proc.stdout and "npm install of @openai/codex@0.999.0 failed" in proc.stdout
    same = subprocess.run([sys.executable, str(NEWEST), "summary", str(report)], capture_output=True, text=True,
                          env={**os.environ, "MEMORY_GOVERNOR_E2E_PINS": ""}, timeout=120)  # fmt: skip
    assert "every pin is the newest version" in same.stdout
