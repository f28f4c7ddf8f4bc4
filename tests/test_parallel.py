"""The suite runs side by side (pytest-xdist, `./scripts/test.sh`): each e2e module, per Claude
Code pin, stays in one worker; every other test is spread on its own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.conftest import ROOT, xdist_scope

# A plugin the workers load: it writes which worker ran which test.
PROBE = """
import os
def pytest_runtest_logstart(nodeid, location):
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # unset in the controller, which relays the reports
    if worker:
        with open(os.environ["ASSIGNED"], "a") as out:
            out.write(worker + " " + nodeid + "\\n")
"""


def test_the_scope_of_a_test_is_its_e2e_module_and_pin_else_itself() -> None:
    assert xdist_scope("tests/e2e/test_codex.py::test_save_discipline") == "tests/e2e/test_codex.py"
    assert xdist_scope("tests/e2e/test_mcp_proxy.py::test_x[cc2.1.197]") == "tests/e2e/test_mcp_proxy.py@cc2.1.197"
    assert xdist_scope("tests/e2e/test_claude_code.py::test_y[cc2.1.332-deny]") == (
        "tests/e2e/test_claude_code.py@cc2.1.332"
    )
    assert xdist_scope("tests/test_ledger.py::test_z[3]") == "tests/test_ledger.py::test_z[3]"


def test_under_loadgroup_each_e2e_module_and_pin_runs_in_one_worker(tmp_path: Path) -> None:
    (tmp_path / "assignprobe.py").write_text(PROBE)
    assigned = tmp_path / "assigned.txt"
    # Not this run's own xdist variables (when it runs in a worker itself): the inner controller would pass for one.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST_", "PYTEST_CURRENT_TEST"))}
    env.update(PYTHONPATH=str(tmp_path), ASSIGNED=str(assigned))
    # --setup-plan: the tests are scheduled and reported but nothing runs (no harness binary needed).
    files = ["tests/e2e/test_mcp_proxy.py", "tests/e2e/test_transcripts.py", "tests/test_call_keys.py"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "assignprobe", "-p", "no:cacheprovider",
                           "--setup-plan", "-q", "-n", "2", "--dist", "loadgroup", *files],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for line in assigned.read_text().splitlines():
        worker, nodeid = line.split(" ", 1)
        workers[xdist_scope(nodeid)].add(worker)
    e2e = {scope for scope in workers if scope.startswith("tests/e2e/")}
    assert e2e >= {"tests/e2e/test_mcp_proxy.py@cc2.1.197", "tests/e2e/test_mcp_proxy.py@cc2.1.332"}, sorted(workers)
    split = {scope: sorted(names) for scope, names in workers.items() if scope in e2e and len(names) > 1}
    assert not split, f"an e2e module ran in more than one worker: {split}"
    assert len({w for names in workers.values() for w in names}) == 2, "both workers took work"
