"""`memory-governor doctor`: is everything in place, and if not, what to do about it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
import time

import click

from governor import compiled
from governor.commands.install import SESSION_EVENTS, TOOL_EVENTS, _is_ours, governed_tools, settings_path
from governor.state import state_dir

OK, BAD, INFO = "ok", "FAIL", "info"


class Report:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str]] = []

    def add(self, status: str, what: str, detail: str, fix: str = "") -> None:
        self.rows.append((status, what, detail, fix))

    @property
    def failed(self) -> bool:
        return any(status == BAD for status, *_ in self.rows)


def _installs(report: Report, project: str, tools: list[str]) -> list[str]:
    commands: list[str] = []
    found_any = False
    for scope in ("project", "local", "user"):
        path = settings_path(scope, project)
        if not os.path.exists(path):
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                settings = json.load(handle)
        except (OSError, ValueError) as err:
            report.add(BAD, f"settings ({scope})", f"{path} cannot be read as JSON: {err}", "fix the file by hand")
            continue
        hooks = settings.get("hooks") if isinstance(settings, dict) else None
        events = {}
        for event, groups in (hooks or {}).items():
            for group in groups if isinstance(groups, list) else []:
                for hook in group.get("hooks", []) if isinstance(group, dict) else []:
                    if _is_ours(hook):
                        events[event] = group.get("matcher", "")
                        commands.append(hook["command"])
        if not events:
            continue
        found_any = True
        missing = [e for e in (*TOOL_EVENTS, *SESSION_EVENTS) if e not in events]
        uncovered = [t for t in tools if t not in str(events.get("PreToolUse", "")).split("|")]
        if missing or uncovered:
            detail = (f"missing events: {', '.join(missing)}; " if missing else "") + (
                f"tools not matched: {', '.join(uncovered[:4])}" if uncovered else ""
            )
            report.add(BAD, f"install ({scope})", f"{path}: {detail.strip('; ')}",
                       f"memory-governor install claude-code --scope {scope}")  # fmt: skip
        else:
            report.add(OK, f"install ({scope})", f"{path}: {len(events)} hook events, {len(tools)} memory tools")
    if not found_any:
        report.add(BAD, "install", "no Claude Code settings file here has memory-governor's hooks",
                   "memory-governor install claude-code")  # fmt: skip
    return commands


def _hook_selftest(report: Report, command: str, tool: str) -> None:
    """Run the installed command on a synthetic search with limit 10: it must clamp to the ladder."""
    with tempfile.TemporaryDirectory(prefix="memory-governor-doctor-") as scratch:
        env = {**os.environ, "MEMORY_GOVERNOR_STATE_DIR": os.path.join(scratch, "state"),
               "MEMORY_GOVERNOR_WARM_SERVER": "off"}  # fmt: skip
        payload = {"session_id": "doctor", "hook_event_name": "PreToolUse", "cwd": os.getcwd(), "tool_name": tool,
                   "tool_input": {"query": "doctor", "limit": 10}, "tool_use_id": "doctor-1"}  # fmt: skip
        started = time.perf_counter()
        try:
            proc = subprocess.run(shlex.split(command), input=json.dumps(payload).encode(), capture_output=True,
                                  env=env, timeout=30)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as err:
            report.add(BAD, "hook", f"the installed command does not run: {err}", "memory-governor install claude-code")
            return
        elapsed = (time.perf_counter() - started) * 1000
        try:
            answer = json.loads(proc.stdout) if proc.stdout.strip() else {}
        except ValueError:
            answer = {}
        clamped = answer.get("hookSpecificOutput", {}).get("updatedInput", {}).get("limit")
        if proc.returncode == 0 and clamped is not None:
            report.add(OK, "hook", f"the installed command answers (clamped limit 10 -> {clamped}) in {elapsed:.0f} ms")
        else:
            error = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no answer"]
            report.add(BAD, "hook", f"the installed command did not clamp a search: {error[0]}",
                       "memory-governor install claude-code  (then run doctor again)")  # fmt: skip


@click.command("doctor")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def command(fmt: str) -> int:
    """Check install, policy, ledger, tokenizer and warm server; say what to fix."""
    from governor.policy_files import build

    report = Report()
    env = os.environ
    sources = compiled.Sources(env, os.getcwd())
    eff = build(sources.layers())
    layers = " < ".join(kind for kind, _ in sources.layers())
    if eff.ok:
        report.add(OK, "policy", f"valid ({layers})")
    else:
        report.add(BAD, "policy", f"{len(eff.problems)} problem(s), first: {eff.problems[0]}",
                   "memory-governor policy check")  # fmt: skip
    policy, _ = compiled.load(env, os.getcwd(), state_dir(env))
    tools = governed_tools(policy.data)
    commands = _installs(report, sources.project, tools)
    if commands:
        _hook_selftest(report, commands[0], tools[0])
    state = state_dir(env)
    try:
        from governor.ledger import open_ledger

        ledger = open_ledger(state, policy.data["ledger"]["busy_timeout_ms"])
        check = ledger.one("PRAGMA quick_check")[0]
        sessions = ledger.one("SELECT COUNT(*) FROM sessions")[0]
        ledger.close()
        if check == "ok":
            report.add(OK, "ledger", f"{state}: {sessions} session(s)")
        else:
            report.add(BAD, "ledger", f"{state}: integrity check says {check}", "memory-governor gc, or move it aside")
    except Exception as err:
        report.add(
            BAD, "ledger", f"{state}: {err}", "make the state directory writable, or set MEMORY_GOVERNOR_STATE_DIR"
        )
    try:
        from governor.tokens import build as fresh_counter

        started = time.perf_counter()
        fresh_counter(policy.unit).count("doctor")  # a fresh load, not the one this process may have cached
        report.add(OK, "tokenizer", f"{policy.unit} loads offline in {(time.perf_counter() - started) * 1000:.0f} ms")
    except Exception as err:
        report.add(BAD, "tokenizer", str(err), "see the message; or set token_counter: chars in the policy")
    from governor.server import running_pid

    pid = running_pid(dict(env))
    mode = policy.data["runtime"]["warm_server"]
    if mode == "off":
        report.add(INFO, "warm server", "off by policy: every hook decides in its own process")
    else:
        detail = f"running (pid {pid})" if pid else "not running: the next hook starts it"
        report.add(INFO, "warm server", detail)
    if fmt == "json":
        click.echo(
            json.dumps([{"status": s, "check": w, "detail": d, "fix": f} for s, w, d, f in report.rows], indent=2)
        )
    else:
        for status, what, detail, fix in report.rows:
            click.echo(f"{status:4}  {what:18} {detail}")
            if fix:
                click.echo(f"{'':24} fix: {fix}")
    return 1 if report.failed else 0
