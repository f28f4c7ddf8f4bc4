"""The README's main job (the demo) and `doctor`, run as commands."""

from __future__ import annotations

import re
import subprocess

from tests.conftest import ROOT, Env


def test_the_demo_shows_each_kind_of_decision_and_stays_within_budget(env: Env) -> None:
    out = env.cli("demo", check=True).stdout
    for verdict in ("clamped", "denied", "trimmed", "withheld", "deduped", "allowed", "advised", "saved", "armed"):
        assert re.search(rf"^\s+.*\s{verdict}\s", out, re.M), f"no {verdict} line:\n{out}"
    assert re.search(r"mem_get_observation #42\s+withheld\s+1354 tok -> 48: this observation", out), out
    assert re.search(r"mem_search\s+deduped\s+.*1 entry already shown", out), "a pointer is no trim"
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
