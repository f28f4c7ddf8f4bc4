"""What `doctor` reports, and running an installed hook command once to see that it answers.

Cold path.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import Any

OK, BAD, WARN, INFO = "ok", "FAIL", "warn", "info"
# An MCP server that looks like a memory server by its name or command (Engram, server-memory, ...):
# one the policy does not map is a memory no limit counts.
MEMORY_LIKE = re.compile(r"engram|memor|mem0|remember|recall|knowledge|brain", re.I)


class Check:
    """One line of the doctor's report: a status, what was checked, what was found, the fix."""

    __slots__ = ("detail", "fix", "status", "what")

    def __init__(self, status: str, what: str, detail: str, fix: str = "") -> None:
        self.status, self.what, self.detail, self.fix = status, what, detail, fix

    def as_dict(self) -> dict[str, str]:
        return {"status": self.status, "check": self.what, "detail": self.detail, "fix": self.fix}


class HookRun:
    __slots__ = ("answer", "error", "millis", "returncode", "stderr")

    def __init__(self, returncode: int, answer: Any, stderr: str, millis: float, error: str = "") -> None:
        self.returncode, self.answer, self.stderr, self.millis, self.error = returncode, answer, stderr, millis, error

    @property
    def last_error(self) -> str:
        lines = self.stderr.strip().splitlines()
        return self.error or (lines[-1] if lines else "no answer")


def isolation(harness: str, command: str) -> Check | None:
    """A hook command written by an older install runs without -I: then the user's PYTHONPATH
    or a module in the hook's folder could stand in for the governor's own code."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if "-I" in words[1:3] or "hook" in words[1:2] or any(".memory-governor/hook" in w for w in words[1:3]):
        return None  # the project's launcher (named, or found by `sh -c`) runs the governor isolated
    return Check(BAD, f"{harness} hook", "the installed command runs without -I, so modules on the user's path "
                 "could stand in for the governor's", f"memory-governor install {harness}  (writes it with -I)")  # fmt: skip


def isolations(harness: str, commands: Iterable[str]) -> list[Check]:
    """`isolation` of each distinct hook command, in order: the ones that run without -I."""
    return [unsafe for unsafe in (isolation(harness, c) for c in sorted(set(commands))) if unsafe is not None]


def run_hook_command(command: str, payload: dict[str, Any], harness_env: dict[str, str] | None = None,
                     cwd: str | None = None) -> HookRun:  # fmt: skip
    """Run an installed hook command on one payload, against a scratch state directory.
    `harness_env`: the variables the harness sets for its hooks (its project directory), which
    the command may name (`$CLAUDE_PROJECT_DIR`): then it runs in a shell, as the harness runs it,
    in `cwd` (the project)."""
    with tempfile.TemporaryDirectory(prefix="memory-governor-doctor-") as scratch:
        env = {**os.environ, **(harness_env or {}), "MEMORY_GOVERNOR_STATE_DIR": os.path.join(scratch, "state"),
               "MEMORY_GOVERNOR_WARM_SERVER": "off"}  # fmt: skip
        started = time.perf_counter()
        try:
            words = ["/bin/sh", "-c", command] if harness_env is not None else shlex.split(command)
            proc = subprocess.run(words, input=json.dumps(payload).encode(), capture_output=True,
                                  env=env, timeout=30, cwd=cwd)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired, ValueError) as err:
            return HookRun(-1, None, "", 0.0, f"the installed command does not run: {err}")
        millis = (time.perf_counter() - started) * 1000
        try:
            answer = json.loads(proc.stdout) if proc.stdout.strip() else None
        except ValueError:
            answer = None
        return HookRun(proc.returncode, answer, proc.stderr.decode("utf-8", "replace"), millis)


def coverage(harness: str, scope: str, path: str, events: dict[str, Any], missing: list[str], uncovered: list[str],
             tools: int) -> Check:  # fmt: skip
    """An install's hooks file, judged: every event it needs and every tool the policy governs
    matched (OK), or what is missing (FAIL, with the install that writes it whole)."""
    if missing or uncovered:
        detail = (f"missing events: {', '.join(missing)}; " if missing else "") + (
            f"tools not matched: {', '.join(uncovered[:4])}" if uncovered else ""
        )
        return Check(BAD, f"{harness} ({scope})", f"{path}: {detail.strip('; ')}",
                     f"memory-governor install {harness} --scope {scope}")  # fmt: skip
    return Check(OK, f"{harness} ({scope})", f"{path}: {len(events)} hook events, {tools} memory tools")


def unmapped_memory_servers(policy: dict[str, Any], servers: list[tuple[str, str, str]]) -> list[Check]:
    """A memory server the policy does not map is a memory no limit counts: say so. `servers`:
    (the file that names it, its name, its command or URL as words)."""
    mapped = {server for mapping in policy["tools"] for server in mapping["servers"]}
    return [Check(WARN, "memory server", f"{path}: MCP server '{name}' looks like a memory server the policy does "
                  "not map: its tools are not governed", f"map it in the policy: tools: [{{servers: [{name}], ...}}]")
            for path, name, words in servers if name not in mapped and MEMORY_LIKE.search(f"{name} {words}")]  # fmt: skip


def server_entries(path: str, section: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """(path, name, entry) of each MCP server in a config file's server section (an object of entries)."""
    items = section.items() if isinstance(section, dict) else ()
    return [(path, str(name), entry if isinstance(entry, dict) else {}) for name, entry in items]


def installs(harness: str, paths: Iterable[tuple[str, str]], read: Callable[[str], Any],
             checks: list[Check]) -> list[tuple[str, str, Any]]:  # fmt: skip
    """(scope, path, what `read` made of it) of each (scope, path) whose file is there; a file
    it cannot read (ValueError) is a FAIL added to `checks`, and left out."""
    found = []
    for scope, path in paths:
        if not os.path.exists(path):
            continue
        try:
            found.append((scope, path, read(path)))
        except ValueError as err:
            checks.append(Check(BAD, f"{harness} ({scope})", str(err), "fix the file by hand"))
    return found


def refused_search(harness: str, command: str, payload: dict[str, Any], harness_env: dict[str, str] | None) -> Check:
    """Run an installed hook command on a synthetic search with limit 10 (`payload`) for a harness
    that applies no rewritten arguments: it must refuse it, naming the limit to call again with
    (in `hookSpecificOutput`, or a top-level `decision: deny` and `reason`: Antigravity)."""
    run = run_hook_command(command, payload, harness_env)
    answer = run.answer if isinstance(run.answer, dict) else {}
    specific = answer.get("hookSpecificOutput")
    reason = str(specific.get("permissionDecisionReason", "")) if isinstance(specific, dict) else ""
    if not reason and answer.get("decision") == "deny":
        reason = str(answer.get("reason", ""))
    if run.returncode == 0 and '"limit":' in reason:
        return Check(OK, f"{harness} hook", f"the installed command answers (a search with limit 10 refused: "
                     f"{reason[:80]}) in {run.millis:.0f} ms")  # fmt: skip
    return Check(BAD, f"{harness} hook", f"the installed command did not clamp a search: {run.last_error}",
                 f"memory-governor install {harness}  (then run doctor again)")  # fmt: skip
