"""The README's main job (the demo) and `doctor`, run as commands."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ROOT, Env


def test_the_demo_shows_each_kind_of_decision_and_stays_within_budget(env: Env) -> None:
    out = env.cli("demo", check=True).stdout
    for verdict in ("clamped", "denied", "trimmed", "withheld", "deduped", "allowed", "advised", "saved", "armed"):
        assert re.search(rf"^\s+.*\s{verdict}\s", out, re.M), f"no {verdict} line:\n{out}"
    assert re.search(r"mem_get_observation #42\s+withheld\s+1354 tok -> 46: this observation", out), out
    assert re.search(r"\s+deduped\s+.*1 more already above in this conversation: #57", out), "a repeat is no trim"
    assert re.search(r"mem_search\s+rewrote\s+limit 3 -> 6", out), "asked past the hit it may find again"
    totals = [int(n) for n in re.findall(r"memory that reached the model this turn\s+(\d+) tok", out)]
    assert len(totals) == 2 and all(0 < t <= 1200 for t in totals)
    assert "What the model receives for a denial" in out


def test_the_readme_demo_command_runs(env: Env) -> None:
    proc = subprocess.run([str(ROOT / "scripts" / "demo.sh")], capture_output=True, text=True, timeout=600,
                          env={**env.vars, "PYTHON": "python3"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "memory that reached the model this turn" in proc.stdout


def test_doctor_says_what_to_fix_then_passes_after_install(env: Env) -> None:
    before = env.cli("doctor")
    assert before.returncode == 1
    assert "fix: memory-governor install claude-code" in before.stdout
    env.cli("install", "claude-code", check=True)
    after = env.cli("doctor")
    assert after.returncode == 0, after.stdout
    assert re.search(r"ok\s+claude-code hook\s+the installed command answers \(clamped limit 10 -> 3\)", after.stdout)
    assert re.search(r"ok\s+tokenizer\s+o200k_base loads offline", after.stdout)


def test_doctor_reports_a_broken_policy(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: {value: -1, enforce: block}\n")
    out = env.cli("doctor")
    assert out.returncode == 1 and "FAIL  policy" in out.stdout and "policy.yaml:2:" in out.stdout


def test_a_missing_extra_is_told_to_go_into_the_governors_own_environment(env: Env) -> None:
    """memory-governor is installed isolated, from its clone: what doctor says to do about a missing
    extra names pipx in the clone and this very Python, never a bare pip or a package index name."""
    shadow = env.tmp / "shadow"
    (shadow / "opentelemetry").mkdir(parents=True)
    (shadow / "opentelemetry" / "__init__.py").write_text("")  # a package with no SDK in it
    (shadow / "redis").mkdir()
    (shadow / "redis" / "__init__.py").write_text("raise ImportError('no redis here')\n")
    extra = {"PYTHONPATH": str(shadow), "MEMORY_GOVERNOR_ENABLE_TELEMETRY": "1",
             "MEMORY_GOVERNOR_LEDGER_URL": "redis://127.0.0.1:1/0"}  # fmt: skip
    rows = env.cli_json("doctor", "--format", "json", env=extra)
    told = {row["check"]: f"{row['detail']} {row['fix']}" for row in rows if row["status"] == "FAIL"}
    for check, name in (("telemetry", "telemetry"), ("ledger", "redis")):
        assert f"pipx install --force '.[{name}]'" in told[check], told
        assert f"{sys.executable} -m pip install '/path/to/the/clone[{name}]'" in told[check], told
        assert "install 'memory-governor[" not in told[check], told
