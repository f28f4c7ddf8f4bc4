"""The project's hook command and launcher: they run this machine's governor, or say there is none.

A project-scope install is committed, so its hook command must name no machine's paths. The
command (`command`) finds the governor on each machine itself, in sh builtins (no process started,
nothing of the project read: as cheap as the direct command, and no file a program can rewrite
in the project stands in its way); only on a machine without one does it run the committed
launcher `.memory-governor/hook`, and only once it has checked that the launcher is the one the
settings were written with (its sha256 is in the command: a rewritten one is not run, memory calls
are refused, and the user is told). Both find the governor so:

- `$MEMORY_GOVERNOR` (the `memory-governor` program, for a machine where it is not on PATH:
  set it in the shell profile or in the harness's local settings), else `memory-governor` on PATH;
- from that program's `#!` line, its interpreter; the governor's entry file in that
  environment's own site-packages (`lib/pythonX.Y`, X.Y from the interpreter's name or the
  environment's pyvenv.cfg, never the first folder a glob finds) is run as a direct install
  writes it (`python -I -S entry.py`); an editable install,
  or an environment whose version is not known, runs the program under `-I`. Its arguments are
  passed on (`HARNESS`, or OpenCode's plugin's `--describe PROJECT`).
- no governor: the user is told at session start, and a memory call follows the committed
  policy's `on_error`: the policy file as committed at HEAD in a git repository (a working-tree
  edit is not what the team agreed), else the file; closed when that cannot be established (a
  repository with nothing committed or that git cannot read, on_error spelled some other way).
  The local override can only make it closed. Closed: the call is refused, and so is a call of a
  shell, file or fetch tool whose input names the memory the shipped routes lead to, spells it
  with quotes, backslashes, a glob or brace expansion that could stand for it, or uses an
  expansion this cannot read (`$'…'`, `$((…))`, `${…}`, `\\x…`); a payload too long to read within
  bounds is refused too. Open: it passes, and the user was told why. Without a governor these
  checks are best-effort: a command that builds the name at run time (a variable set earlier, an
  interpreter, base64) is not seen.

The script is the same on every machine (doctor checks it is current); it is written with the
settings it serves and removed with the last of them. It finds the governor itself too: OpenCode's
plugin and settings written by earlier versions run it directly.

Cold path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from governor.harnesses.checks import BAD, OK, WARN, Check, coverage, installs, isolations, refused_search
from governor.harnesses.settings import (
    Change,
    hook_groups,
    json_text,
    matcher_names,
    read_json,
    removal,
    with_hooks,
    without_hooks,
)

RELATIVE = os.path.join(".memory-governor", "hook")

_MISSING = (
    "memory-governor is not installed on this machine (no memory-governor on PATH, "
    "MEMORY_GOVERNOR not set), so this project's memory limits do not run here: {effect}. "
    "Install it from a clone of memory-governor (pipx install <path-to-clone>), or set MEMORY_GOVERNOR to "
    "the program, then run "
    "memory-governor doctor."
)
_CLOSED = "memory calls are refused (the project's policy says on_error: closed)"
_OPEN = "memory calls pass ungoverned (the project's policy says on_error: open)"


def _named(prefix: str) -> str:
    """The sh for a payload that names its event and tool, an MCP tool by its prefix."""
    return (
        f"field hook_event_name; event=$value; field tool_name; tool=$value\ncase $tool in {prefix}*) memory=1 ;; esac"
    )


# Copilot's own payloads name no event: each is known by the fields it alone carries (as the
# adapter knows them). Every tool event is answered as a before-tool one: the arguments are the
# model's to fill with any key, and after a tool Copilot ignores a deny (a refused call has no
# after). An MCP tool is <server>-<tool>; none of Copilot's own tools has a `-`.
_COPILOT = r"""field hook_event_name; event=$value
[ -n "$event" ] || case $payload in
  *'"toolName"'*) event=preToolUse ;;
  *'"prompt"'*|*'"agentName"'*|*'"trigger"'*|*'"stopReason"'*) ;;
  *'"source"'*) event=sessionStart ;;
esac
field toolName; tool=$value; [ -n "$tool" ] || { field tool_name; tool=$value; }
case $tool in *-*) memory=1 ;; esac"""


def _scripted(event: str, tool: str) -> str:
    """The sh for a message a host's script sends (OpenCode's plugin, Pi's extension, Cline's
    plugin): it names its event and tool in these fields, and sends `mcp` as an object for a memory
    tool only."""
    return f"field {event}; event=$value; field {tool}; tool=$value\ncase $payload in *'\"mcp\":{{'*) memory=1 ;; esac"


# What the launcher answers where there is no governor, per harness that runs it: at session
# start a message for the user; before a memory tool a refusal when on_error is closed. Each
# harness: its session-start and before-tool event names, the sh that sets `event` (the event's
# name), `tool` (the tool's) and `memory` (non-empty for a memory tool), and the keys its
# payload gives a tool's input under. Rendered by each harness's own adapter, so the shapes are its own.
_HARNESSES: dict[str, tuple[tuple[str, ...], tuple[str, ...], str, tuple[str, ...]]] = {
    "claude-code": (("SessionStart",), ("PreToolUse",), _named("mcp__"), ("tool_input",)),
    "gemini-cli": (("SessionStart",), ("BeforeTool",), _named("mcp_"), ("tool_input",)),
    "codex": (("SessionStart",), ("PreToolUse",), _named("mcp__"), ("tool_input",)),
    "copilot": (("sessionStart", "SessionStart"), ("preToolUse", "PreToolUse"), _COPILOT, ("toolArgs", "tool_input")),
    "opencode": (("session.start",), ("tool.execute.before",), _scripted("hook", "tool"), ("args",)),
    "kilo": (("session.start",), ("tool.execute.before",), _scripted("hook", "tool"), ("args",)),
    "pi": (("session_start",), ("tool_call",), _scripted("event", "toolName"), ("input",)),
    "cline": (("session_start",), ("tool_call",), _scripted("event", "toolName"), ("input",)),
}

# Without a governor no policy can be read, so the routes to the memory through other tools are
# the shipped ones (rules/memory-budget.yaml, the routes with `use:`; a test holds them equal):
# under on_error: closed, a call of one of these tools whose input names Engram's program or
# folder (`engram`), its HTTP port (7437) or a glob that reaches its database (`eng*.db`,
# `~/.eng*/`) is refused too. Routes a team adds to its own policy are not seen here.
ROUTE_TOOLS = ("Bash", "run_shell_command", "bash", "WebFetch", "web_fetch", "webfetch", "Read", "Grep", "Glob",
               "read_file", "read_many_files", "search_file_content", "glob", "view", "grep", "read", "run_commands",
               "fetch_web_content", "read_files", "search_codebase", "Execute", "LS", "FetchUrl")  # fmt: skip
# The launcher reads a payload's first PREFIX bytes, and a key's value only within NEAR bytes of
# the start: sh's pattern removal is quadratic in how far it looks, so both are bounded.
PREFIX = 65536
NEAR = 4096
_WORD = "[A-Za-z0-9_-]"
MEMORY_NAMES = ("*engram*", "*7437*", *(f"*[!A-Za-z0-9_-]eng{_WORD * n}[*?[]*" for n in range(11)))


def path(project: str) -> str:
    return os.path.join(project, RELATIVE)


# The hooks file beside which a harness that names no project directory (Codex) has the launcher.
BESIDE = os.path.join(".codex", "hooks.json")


def command(harness: str, project_variable: str | None) -> str:
    """The hook command a project-scope install writes: the same on every clone. It finds this
    machine's governor itself (FAST: the launcher's own way, with no process started and no file
    of the project read), and runs the committed launcher only where there is none, once it has
    checked it is the launcher these settings were written with (`verified`): a launcher a
    program rewrote is not run (memory calls are refused, the user told). Where the variable is
    not set (another harness running these hooks), the hook's folder is the project. A harness
    that sets none (`None`: Codex) runs its hooks in the session's folder, which the model cannot
    move: the launcher is the one beside the hooks file, in that folder or the nearest above it
    that holds both. Not git's idea of the top (`git rev-parse --show-toplevel`), which `git
    config core.worktree` or a `.git` file moves to any folder. Codex runs the command with the
    user's own `$SHELL`, so there it is one `sh -c` argument."""
    if project_variable is None:
        found = f'[ -f "$d/{RELATIVE}" ] && [ -f "$d/{BESIDE}" ]'
        walk = f'd=$PWD; until [ -z "$d" ] || {{ {found}; }}; do d=${{d%/*}}; done'
        return "sh -c " + _quote(f'{walk}; set -- "${{d:-.}}/{RELATIVE}" {harness}; {script(harness)}')
    return f'set -- "${{{project_variable}:-.}}/{RELATIVE}" {harness}; {script(harness)}'


# The governor found as the launcher finds it (`$MEMORY_GOVERNOR`, else `memory-governor` in an
# absolute folder of PATH; its interpreter from its `#!` line; the entry file in that environment's
# own site-packages, by the interpreter's version or pyvenv.cfg's), in sh builtins alone: no fork,
# no second sh, nothing of the project read. "$1" is the launcher; the rest are its arguments
# (the harness, or OpenCode's plugin's `--describe PROJECT`), passed on.
FAST = r"""l=$1; shift; m=${MEMORY_GOVERNOR:-}
if [ -z "$m" ]; then o=$IFS; IFS=:; set -f; for d in $PATH; do case $d in /*) if [ -f "$d/memory-governor" ] && [ -x "$d/memory-governor" ]; then m=$d/memory-governor; break; fi ;; esac; done; IFS=$o; set +f; fi
if [ -n "$m" ] && [ -f "$m" ]; then f=; IFS= read -r f < "$m"; p=${f#'#!'}
case $p in */python*) if [ -x "$p" ] && [ "$p" != "$f" ]; then v=${p##*/python}
case $v in [0-9]*.[0-9]*) ;; *) v=; c=${p%/bin/*}/pyvenv.cfg
if [ -f "$c" ]; then while IFS='= ' read -r k w; do case $k in version|version_info) [ -n "$v" ] || v=$w ;; esac; done < "$c"; fi
a=${v%%.*} b=${v#*.}; b=${b%%.*}; v=$a.$b; case $a.$b in [0-9]*.[0-9]*) ;; *) v= ;; esac; case $a$b in *[!0-9]*) v= ;; esac ;; esac
e=${p%/bin/*}/lib/python$v/site-packages/governor/runtime/entry.py
[ -n "$v" ] && [ -f "$e" ] && exec "$p" -I -S "$e" "$@"
exec "$p" -I "$m" hook "$@"; fi ;; esac
exec "$m" hook "$@"; fi"""

_CHANGED = (
    "memory-governor: {launcher} is not the launcher these hook settings were installed with (a program changed "
    "it), and no memory-governor is installed on this machine to decide instead: memory calls are refused until it "
    "is restored (git checkout -- {launcher})."
)


def digest() -> str:
    """The sha256 of the launcher's text: the settings' command runs no other."""
    from governor.state import sha256_hex

    return sha256_hex(text().encode())


def script(harness: str) -> str:
    """FAST, then the launcher if it is the one these settings were written with (read once: what
    is checked is what runs), else the refusals it can give without it (`_changed`)."""
    verified = (
        '[ -f "$l" ] && x=$(cat "$l") && y=$(printf \'%s\\n\' "$x" | { sha256sum || shasum -a 256; } 2>/dev/null) && '
        f'case $y in "{digest()} "*) exec sh -c "$x" "$l" "$@" ;; esac'
    )
    return f"{FAST}\n{verified}\n{_changed(harness)}"


def _changed(harness: str) -> str:
    """sh for a launcher that is not the one installed, with no governor here: the user is told at
    session start, and a call before a tool whose payload could be a memory call (an MCP tool, or a
    name of the memory's) is refused; nothing else is answered. Each answer is the harness's own,
    rendered by its adapter around the message ($r)."""
    from governor import harnesses
    from governor.engine import events as ev
    from governor.engine.events import Decision

    message = _CHANGED.format(launcher=RELATIVE.replace(os.sep, "/"))
    told_stderr = f"case $1 in -*) exit 1 ;; esac; r={_quote(message)}; printf '%s\\n' \"$r\" >&2\n"
    if harness not in _HARNESSES:  # no answers known for it without a governor: the message alone
        return told_stderr + "exit 0"
    adapter = harnesses.adapter(harness)
    starts, pres, _, _ = _HARNESSES[harness]
    mark = "\0"  # where the message goes in each answer's printf format

    def form(answer: Any) -> str:
        return _quote(json.dumps(answer).replace("%", "%%").replace(json.dumps(mark)[1:-1], "%s") + "\\n")

    context = f"Tell the user, once: {mark}" if harness in _TELL_THE_MODEL else ""
    told = form(adapter.render(starts[0], Decision(ev.NONE, "launcher_changed", context=context, user_message=mark)))
    refused = form(adapter.refusal(pres[0], mark))
    before = "|".join(f"*'\"{name}\"'*" for name in pres) + ("|*'\"toolName\"'*" if harness == "copilot" else "")
    start = "|".join(f"*'\"{name}\"'*" for name in starts)
    memory = "*'\"mcp_'*|*'\"mcp\":{'*|*'-mem_'*|*engram*|*7437*"

    def args(form: str) -> str:  # the message, once for each place in the format
        return " ".join(['"$r"'] * form.count("%s"))

    return (f"{told_stderr}s=$({{ head -c {PREFIX}; cat >/dev/null; }})\n"
            f"case $s in {before}) case $s in {memory}) printf {refused} {args(refused)} ;; esac ;; "
            f"{start}) printf {told} {args(told)} ;; esac; exit 0")  # fmt: skip


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


def hooks_installed(scope: str, project: str, path: str, before: Any, after: Any, done: str) -> list[Change]:
    """A JSON hooks file's install (and the launcher a project-scope one runs)."""
    return with_install(scope, project, Change(path, before, after, done, "already installed", json_text))


def hooks_removed(scope: str, project: str, harness: str, path: str, before: Any, after: Any) -> list[Change]:
    """A JSON hooks file's uninstall (and the launcher, with the last settings that run it)."""
    return with_uninstall(scope, project, harness, Change(path, before, after, "hooks removed", "not installed",
                                                          json_text))  # fmt: skip


def groups_removed(scope: str, project: str, harness: str, path: str, ours: Callable[[Any], bool]) -> list[Change]:
    """The uninstall of a JSON settings file with Claude-style hook groups: every hook `ours`
    recognises removed (the file too, when the install made it and nothing else is left)."""
    before = read_json(path)
    return hooks_removed(scope, project, harness, path, before, removal(path, without_hooks(before, ours)))


class HooksFile:
    """A harness whose hooks are Claude-style groups (`{"hooks": {event: [{matcher, hooks}]}}`) in
    a JSON settings file at `path(scope, project)`, ours where `ours(hook)`; at project scope they
    run the launcher through `project_variable`. Its install, uninstall, and what its doctor shares."""

    def __init__(self, harness: str, path: Callable[[str, str], str], scopes: tuple[str, ...],
                 ours: Callable[[Any], bool], project_variable: str) -> None:  # fmt: skip
        self.harness, self.path, self.scopes, self.ours, self.variable = harness, path, scopes, ours, project_variable

    def plan_install(self, scope: str, project: str, groups: Callable[[str], dict[str, list[dict[str, Any]]]],
                     done: str) -> list[Change]:  # fmt: skip
        """Our hook groups (`groups(command)`, for the command this scope runs) in place of any earlier ones."""
        path = self.path(scope, project)
        before = read_json(path)
        after = with_hooks(before, groups(hook_command_for(scope, self.harness, self.variable)), self.ours)
        return hooks_installed(scope, project, path, before, after, done)

    @staticmethod
    def groups(command: str, before: list[str], after: list[str], patterns: list[str], after_events: tuple[str, ...],
               session_events: tuple[str, ...], timeout: int) -> dict[str, list[dict[str, Any]]]:  # fmt: skip
        """Our hook groups running `command`: PreToolUse for exactly the tools `before`, each of
        `after_events` for the tools `after` (both also for the regexes `patterns`), each of
        `session_events` every time."""
        from governor.harnesses.settings import exact_matcher

        entry = {"type": "command", "command": command, "timeout": timeout}
        out = {"PreToolUse": [{"matcher": exact_matcher(before, patterns), "hooks": [entry]}]}
        out.update({event: [{"matcher": exact_matcher(after, patterns), "hooks": [entry]}] for event in after_events})
        return {**out, **{event: [{"hooks": [entry]}] for event in session_events}}

    def plan_uninstall(self, scope: str, project: str) -> list[Change]:
        return groups_removed(scope, project, self.harness, self.path(scope, project), self.ours)

    def project_files(self, project: str) -> list[str]:
        """The project-scope files whose hooks run the launcher."""
        return [self.path("project", project)]

    def installed(self, project: str, needed: tuple[str, ...], tools: list[str],
                  pre_event: str = "PreToolUse") -> tuple[list[Check], list[str], list[str]]:  # fmt: skip
        """Each scope's file holding our hooks, judged: the launcher at project scope, every event of
        `needed` hooked, every tool of `tools` in an exact matcher of `pre_event`. With the hook
        commands found, and the scopes whose install is complete."""
        checks: list[Check] = []
        commands: list[str] = []
        complete: list[str] = []
        paths = [(scope, self.path(scope, project)) for scope in self.scopes]
        for scope, path, events in installs(self.harness, paths, lambda p: hook_groups(read_json(p), self.ours),
                                            checks):  # fmt: skip
            if not events:
                continue
            commands += [hook["command"] for groups in events.values() for _, hook in groups]
            if scope == "project":
                checks += doctor(project, self.harness, path, commands, self.variable)
            missing = [e for e in needed if e not in events]
            matched = {name for matcher, _ in events.get(pre_event, []) for name in matcher_names(matcher)}
            uncovered = [t for t in tools if t not in matched]
            checks.append(coverage(self.harness, scope, path, events, missing, uncovered, len(tools)))
            if not missing and not uncovered:
                complete.append(scope)
        return checks, commands, complete

    def refusing_doctor(self, project: str, needed: tuple[str, ...], tools: list[str],
                        payload: Callable[[str], dict[str, Any]]) -> list[Check]:  # fmt: skip
        """The doctor of a harness that applies no rewritten arguments: `installed`, each hook
        command's isolation, and the first one on a synthetic search with limit 10 (`payload(tool)`),
        which it must refuse, naming the limit."""
        checks, commands, _ = self.installed(project, needed, tools)
        checks += isolations(self.harness, commands)
        if commands and tools:
            env = {self.variable: os.path.abspath(project)}
            checks.append(refused_search(self.harness, commands[0], payload(tools[0]), env))
        return checks


# Harnesses that show the user nothing a hook prints (Copilot in `-p` mode): the model is told
# too, at session start, to pass it on.
_TELL_THE_MODEL = frozenset(("copilot",))


def _answers(harness: str) -> tuple[str, str, str]:
    """(session start answer with on_error closed, with it open, refusal of a memory call)."""
    from governor import harnesses
    from governor.engine import events as ev
    from governor.engine.events import Decision

    adapter = harnesses.adapter(harness)
    starts, pres, _, _ = _HARNESSES[harness]

    def told(effect: str) -> str:
        message = _MISSING.format(effect=effect)
        context = f"Tell the user, once: {message}" if harness in _TELL_THE_MODEL else ""
        decision = Decision(ev.NONE, "governor_missing", context=context, user_message=message)
        return json.dumps(adapter.render(starts[0], decision))

    refused = adapter.refusal(pres[0], _MISSING.format(effect=_CLOSED))
    return told(_CLOSED), told(_OPEN), json.dumps(refused)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _indent(lines: str, by: str) -> str:
    return "".join(f"{by}{line}\n" for line in lines.splitlines())


def text() -> str:
    """The launcher script."""
    cases = []
    for harness, (starts, pres, reads, inputs) in _HARNESSES.items():
        closed, opened, refused = _answers(harness)
        cases.append(
            f"  {harness})\n"
            + _indent(reads, "    ")
            + f"    case $event in {'|'.join(starts)}) event=start ;; {'|'.join(pres)}) event=pre ;; esac\n"
            f"    inputs={_quote(' '.join(inputs))}\n"
            f"    told_closed={_quote(closed)}\n"
            f"    told_open={_quote(opened)}\n"
            f"    refused={_quote(refused)} ;;\n"
        )
    return (
        _SCRIPT.replace("@CASES@", "".join(cases).rstrip("\n"))
        .replace("@ROUTE_TOOLS@", "|".join(ROUTE_TOOLS))
        .replace("@MEMORY_NAMES@", "|".join(MEMORY_NAMES))
        .replace("@PREFIX@", str(PREFIX))
        .replace("@NEAR@", str(NEAR))
    )


_SCRIPT = r"""#!/bin/sh
# memory-governor's hook launcher, committed with the project: it runs this machine's governor,
# wherever it is installed, so the project's hook settings name no machine's paths.
# Written by `memory-governor install`; `memory-governor doctor` checks it is current.
[ $# -gt 0 ] || set -- claude-code
harness=$1
mg=${MEMORY_GOVERNOR:-$(command -v memory-governor 2>/dev/null)}
if [ -n "$mg" ] && [ -f "$mg" ]; then
  first=
  IFS= read -r first < "$mg"
  py=${first#'#!'}
  case $py in
    */python*)  # a long path is written as a `#!/bin/sh` exec line instead: then run the program
      if [ -x "$py" ] && [ "$py" != "$first" ]; then
        # The environment's own site-packages, by its interpreter's version (its name, python3.12,
        # else the environment's pyvenv.cfg): no other lib/python* folder there is ever run.
        version=${py##*/python}
        case $version in
          [0-9]*.[0-9]*) ;;
          *)
            version=
            if [ -f "${py%/bin/*}/pyvenv.cfg" ]; then
              while IFS='= ' read -r key value; do
                case $key in version|version_info) [ -n "$version" ] || version=$value ;; esac
              done < "${py%/bin/*}/pyvenv.cfg"
              major=${version%%.*}
              minor=${version#*.}
              minor=${minor%%.*}
              case $major.$minor in [0-9]*.[0-9]*) version=$major.$minor ;; *) version= ;; esac
              case $major$minor in *[!0-9]*) version= ;; esac
            fi ;;
        esac
        entry=${py%/bin/*}/lib/python$version/site-packages/governor/runtime/entry.py
        [ -n "$version" ] && [ -f "$entry" ] && exec "$py" -I -S "$entry" "$@"
        exec "$py" -I "$mg" hook "$@"
      fi ;;
  esac
  exec "$mg" hook "$@"
fi
# No governor on this machine: tell the user, and follow on_error as the project's policy is
# committed (at HEAD in a git repository: an edit in the working tree is not what the team agreed),
# closed when that cannot be established. The local override can only make it closed.
case $harness in -*) exit 1 ;; esac  # --describe (OpenCode's plugin): nothing to describe
here=$(dirname "$0")
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_CONFIG_PARAMETERS
mode= policy=
if git -C "$here" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  if git -C "$here" cat-file -e HEAD:./policy.yaml 2>/dev/null; then
    policy=$(git -C "$here" show HEAD:./policy.yaml 2>/dev/null) || mode=closed
  elif ! git -C "$here" rev-parse -q --verify HEAD >/dev/null 2>&1; then
    mode=closed  # no commit yet: nothing agreed
  fi  # else not committed: the shipped default's on_error
elif [ -e "$here/../.git" ]; then
  mode=closed  # a repository git cannot read here
elif [ -e "$here/policy.yaml" ]; then
  policy=$(cat "$here/policy.yaml" 2>/dev/null) || mode=closed
fi
if [ -z "$mode" ]; then
  mode=open
  if printf '%s\n' "$policy" | grep -Eq "^on_error:[[:space:]]*[\"']?closed"; then
    mode=closed
  elif printf '%s\n' "$policy" | grep -q on_error &&
     ! printf '%s\n' "$policy" | grep -Eq "^on_error:[[:space:]]*[\"']?open[\"']?[[:space:]]*(#.*)?$"; then
    mode=closed  # on_error spelled some other way: not read here, so not open
  fi
fi
if [ -f "$here/policy.local.yaml" ] && grep -Eq "^on_error:[[:space:]]*[\"']?closed" "$here/policy.local.yaml"; then
  mode=closed
fi
# The payload's first PREFIX bytes (the rest is read and dropped): every harness writes the
# names this reads first. Each lookup is one linear `case` and a strip that stops near the start,
# so no payload keeps this past a harness's timeout; what it cannot read there (`unsure`) is refused
# under closed.
payload=$({ head -c @PREFIX@; cat >/dev/null; })
unsure=
[ ${#payload} -lt @PREFIX@ ] || unsure=1
value=
field() {  # value: the first string value of a key within NEAR bytes of the start (a crude reader)
  value=
  case $payload in *\"$1\"*) ;; *) return 0 ;; esac
  before=${payload%%\"$1\"*}
  [ ${#before} -le @NEAR@ ] || { unsure=1; return 0; }
  rest=${payload#*\"$1\"}
  before=${rest%%\"*}
  [ ${#before} -le 16 ] || { unsure=1; return 0; }
  rest=${rest#*\"}
  value=${rest%%\"*}
}
names_memory() {  # does this input name the memory, or spell it some way this cannot read?
  case $1 in *"\$'"*|*'$(('*|*'$['*|*'${'*|*'\\x'*|*'\\u'*|*'\\'[0-7]*) return 0 ;; esac
  plain=$(printf '%s' "$1" | tr -d "\\\\\"'")  # quotes and backslashes gone: 7""437, e\ngram
  case $plain in @MEMORY_NAMES@) return 0 ;; esac
  found=1 old_ifs=$IFS; set -f
  IFS=' 	'
  for word in $plain; do  # a brace expansion ({e,}ngram): not read here
    case $word in [{]*,*}*|[{]*..*}*|*[!:]{*,*}*|*[!:]{*..*}*) found=0 ;; esac
  done
  IFS=' 	/:=,;|&<>(){}'
  for word in $plain; do  # a glob that could stand for one of the memory's names
    case $word in
      *[*?[]*) for name in engram .engram engram.db 7437; do case $name in $word) found=0 ;; esac; done ;;
    esac
  done
  IFS=$old_ifs; set +f
  return $found
}
event= tool= memory=
case $harness in
@CASES@
  *) exit 0 ;;
esac
if [ "$event" = start ]; then
  if [ "$mode" = closed ]; then printf '%s\n' "$told_closed"; else printf '%s\n' "$told_open"; fi
elif [ "$mode" = closed ] && { [ "$event" = pre ] || [ -n "$unsure" ]; }; then
  if [ -n "$memory" ] || [ -n "$unsure" ]; then
    printf '%s\n' "$refused"
  else
    case $tool in
      @ROUTE_TOOLS@)  # a route to the memory through another tool (the shipped routes)
        for key in $inputs; do
          case $payload in *\"$key\"*) ;; *) continue ;; esac
          input=${payload%%\"$key\"*}
          [ ${#input} -le @NEAR@ ] || { printf '%s\n' "$refused"; break; }
          input=${payload#*\"$key\"}
          if names_memory "$input"; then printf '%s\n' "$refused"; fi
          break
        done ;;
    esac
  fi
fi
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
