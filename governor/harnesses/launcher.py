"""The project's hook launcher: one small committed sh script that runs this machine's governor.

A project-scope install is committed, so its hook command must name no machine's paths. It
runs `.memory-governor/hook HARNESS` (by the harness's project directory variable), and the
launcher finds the governor on each machine:

- `$MEMORY_GOVERNOR` (the `memory-governor` program, for a machine where it is not on PATH:
  set it in the shell profile or in the harness's local settings), else `memory-governor` on PATH;
- from that program's `#!` line, its interpreter; the governor's entry file beside it in that
  environment's site-packages is run as a direct install writes it (`python -I -S entry.py`),
  so the launcher costs one `sh` start; an editable install runs the program under `-I`.
- no governor: the user is told at session start, and a memory call follows the committed
  policy's `on_error` (closed: it is refused; open: it passes, and the user was told why).

The script is the same on every machine (doctor checks it is current); it is written with the
settings it serves and removed with the last of them.

Cold path.
"""

from __future__ import annotations

import json
import os
from typing import Any

from governor.harnesses.checks import BAD, OK, WARN, Check
from governor.harnesses.settings import Change

RELATIVE = os.path.join(".memory-governor", "hook")

_MISSING = (
    "memory-governor is not installed on this machine (no memory-governor on PATH, "
    "MEMORY_GOVERNOR not set), so this project's memory limits do not run here: {effect}. "
    "Install it (pip install memory-governor), or set MEMORY_GOVERNOR to the program, then run "
    "memory-governor doctor."
)
_CLOSED = "memory calls are refused (the project's policy says on_error: closed)"
_OPEN = "memory calls pass ungoverned (the project's policy says on_error: open)"

# What the launcher answers where there is no governor, per harness that runs it: at session
# start a message for the user; before a memory tool (its name begins with the prefix) a refusal
# when on_error is closed. Rendered by each harness's own adapter, so the shapes are its own.
_HARNESSES = {
    "claude-code": ("SessionStart", "PreToolUse", "tool_name", "mcp__"),
    "gemini-cli": ("SessionStart", "BeforeTool", "tool_name", "mcp_"),
    "codex": ("SessionStart", "PreToolUse", "tool_name", "mcp__"),
}


def path(project: str) -> str:
    return os.path.join(project, RELATIVE)


def command(harness: str, project_variable: str | None) -> str:
    """The hook command a project-scope install writes: the same on every clone. Where the
    variable is not set (another harness running these hooks), the hook's folder is the project;
    a harness that sets none (`None`) finds its project as it does, at the top of the git work tree."""
    if project_variable is None:
        return f'sh "$(git rev-parse --show-toplevel 2>/dev/null || pwd)/{RELATIVE}" {harness}'
    return f'sh "${{{project_variable}:-.}}/{RELATIVE}" {harness}'


def hook_command_for(scope: str, harness: str, project_variable: str | None) -> str:
    """The command a harness's hooks run: the launcher at project scope (committed), else this
    machine's interpreter and entry file."""
    from governor.harnesses import hook_command

    return command(harness, project_variable) if scope == "project" else hook_command(harness)


def with_install(scope: str, project: str, settings: Change) -> list[Change]:
    """A project-scope install writes the launcher its settings run."""
    return [plan(project, True), settings] if scope == "project" else [settings]


def with_uninstall(scope: str, project: str, harness: str, settings: Change) -> list[Change]:
    """A project-scope uninstall removes the launcher with the last settings that run it."""
    return [settings, plan(project, used_elsewhere(project, harness))] if scope == "project" else [settings]


def _answers(harness: str) -> tuple[str, str, str]:
    """(session start answer with on_error closed, with it open, refusal of a memory call)."""
    from governor import harnesses
    from governor.engine import events as ev
    from governor.engine.events import Decision

    adapter = harnesses.adapter(harness)
    start, pre, _, _ = _HARNESSES[harness]

    def told(effect: str) -> str:
        message = _MISSING.format(effect=effect)
        return json.dumps(adapter.render(start, Decision(ev.NONE, "governor_missing", user_message=message)))

    refused = adapter.refusal(pre, _MISSING.format(effect=_CLOSED))
    return told(_CLOSED), told(_OPEN), json.dumps(refused)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def text() -> str:
    """The launcher script."""
    cases = []
    for harness, (start, pre, field, prefix) in _HARNESSES.items():
        closed, opened, refused = _answers(harness)
        cases.append(
            f"  {harness})\n"
            f"    event=$(field hook_event_name)\n"
            f'    if [ "$event" = {start} ]; then\n'
            f"      if [ \"$mode\" = closed ]; then printf '%s\\n' {_quote(closed)}; "
            f"else printf '%s\\n' {_quote(opened)}; fi\n"
            f'    elif [ "$event" = {pre} ] && [ "$mode" = closed ]; then\n'
            f"      case $(field {field}) in {prefix}*) printf '%s\\n' {_quote(refused)} ;; esac\n"
            f"    fi ;;\n"
        )
    return _SCRIPT.replace("@CASES@", "".join(cases).rstrip("\n"))


_SCRIPT = r"""#!/bin/sh
# memory-governor's hook launcher, committed with the project: it runs this machine's governor,
# wherever it is installed, so the project's hook settings name no machine's paths.
# Written by `memory-governor install`; `memory-governor doctor` checks it is current.
harness=${1:-claude-code}
mg=${MEMORY_GOVERNOR:-$(command -v memory-governor 2>/dev/null)}
if [ -n "$mg" ] && [ -f "$mg" ]; then
  first=
  IFS= read -r first < "$mg"
  py=${first#'#!'}
  case $py in
    */python*)  # a long path is written as a `#!/bin/sh` exec line instead: then run the program
      if [ -x "$py" ] && [ "$py" != "$first" ]; then
        for entry in "${py%/bin/*}"/lib/python3*/site-packages/governor/runtime/entry.py; do
          [ -f "$entry" ] && exec "$py" -I -S "$entry" "$harness"
        done
        exec "$py" -I "$mg" hook "$harness"
      fi ;;
  esac
  exec "$mg" hook "$harness"
fi
# No governor on this machine: tell the user, and follow the project's on_error.
here=$(dirname "$0")
mode=open
for policy in "$here/policy.yaml" "$here/policy.local.yaml"; do
  if [ -f "$policy" ] && grep -Eq "^on_error:[[:space:]]*[\"']?closed" "$policy"; then mode=closed; fi
done
payload=$(cat)
field() {
  rest=${payload#*\"$1\"}
  [ "$rest" = "$payload" ] && return 0
  rest=${rest#*\"}
  printf '%s' "${rest%%\"*}"
}
case $harness in
@CASES@
esac
exit 0
"""


def plan(project: str, wanted: bool) -> Change:
    """The launcher as it should be: written (`wanted`) or removed."""
    where = path(project)
    try:
        with open(where, encoding="utf-8") as handle:
            before: Any = handle.read()
    except FileNotFoundError:
        before = None
    after = text() if wanted else None
    done = "hook launcher written (commit it with the settings)" if wanted else "hook launcher removed"
    same = "hook launcher current" if wanted else "no hook launcher"
    return Change(where, before, after, done, same, str, mode=0o755, backup=before not in (None, text()))


def current(project: str) -> bool:
    try:
        with open(path(project), encoding="utf-8") as handle:
            return handle.read() == text()
    except OSError:
        return False


def used_elsewhere(project: str, harness: str) -> bool:
    """Does another harness's project install still run the launcher? (Then it stays.)"""
    from governor import harnesses

    for name in harnesses.names():
        setup = harnesses.part(name, "setup") if name != harness else None
        for where in getattr(setup, "project_files", lambda _p: [])(project):
            try:
                with open(where, encoding="utf-8", errors="replace") as handle:
                    if RELATIVE.replace(os.sep, "/") in handle.read():
                        return True
            except OSError:
                continue
    return False


def doctor(project: str, harness: str, settings_file: str, commands: list[str], project_variable: str | None
           ) -> list[Check]:  # fmt: skip
    """Do the project's (committed) settings run the launcher, is it current, and does it find a
    governor here?"""
    import shutil

    if command(harness, project_variable) not in commands:
        return [Check(WARN, "hook launcher", f"{settings_file} is committed but names this machine's interpreter: "
                      "on a teammate's clone that path does not exist and the hooks do not run",
                      f"memory-governor install {harness}  (writes the launcher; commit {RELATIVE} with it)")]  # fmt: skip
    where = path(project)
    if not current(project):
        state = "is missing" if not os.path.exists(where) else "differs from the one this version writes"
        return [Check(BAD, "hook launcher", f"{where} {state}, and {settings_file} runs it",
                      f"memory-governor install {harness}  (then commit {RELATIVE})")]  # fmt: skip
    found = os.environ.get("MEMORY_GOVERNOR") or shutil.which("memory-governor")
    if not found:
        return [Check(BAD, "hook launcher", f"{where} finds no memory-governor on PATH and MEMORY_GOVERNOR is "
                      "not set: on this machine the hooks run ungoverned or refuse memory calls (on_error)",
                      "put memory-governor on PATH, or set MEMORY_GOVERNOR to it (in the shell profile, or the "
                      "harness's local settings)")]  # fmt: skip
    return [Check(OK, "hook launcher", f"{where} is current and runs {found}")]
