"""`memory-governor policy ...`: check, explain, diff, render and schema for team leads."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from governor.policy.diff import LOOSENED, TIGHTENED, compare
from governor.policy.files import Effective, build, check_files, digest_of
from governor.policy.sources import Sources, shipped_policy_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from governor.engine.rules import CompiledPolicy

EXIT_INVALID = 1
EXIT_LOOSENED = 3


@click.group("policy")
def group() -> None:
    """Check, explain, compare and render policies."""


def _current(cwd: str | None = None) -> tuple[Sources, Effective]:
    sources = Sources(os.environ, cwd)
    return sources, build(sources.layers())


IGNORED = "ignored under the managed install"


class Managed:
    """A managed install on this machine (governor.policy.managed): Claude Code's hooks enforce
    its policy over the shipped default and nothing else, for every user and project."""

    def __init__(self, config: str, cwd: str | None) -> None:
        from governor.policy import managed

        self.config = config
        self.policy = managed.policy_path(config)
        self.env = managed.environment(os.environ, config)  # the one its hooks decide in
        self.sources = managed.sources(self.env, os.path.abspath(cwd or os.getcwd()), config)
        ordinary = Sources(os.environ, cwd)
        # What an ordinary install would read here, and a managed hook does not.
        self.ignored = [path for path in dict.fromkeys(ordinary.watched[1:4]) if path and os.path.isfile(path)]

    def load(self) -> tuple[CompiledPolicy | None, list[str]]:
        """The policy its hooks enforce, and notices; None when not even the shipped default compiles."""
        from governor.policy import managed
        from governor.state import state_dir

        return managed.load(self.env, self.sources.project, self.config, state_dir(self.env))

    def says(self) -> str:
        return f"managed: {self.policy}"


def managed_install(cwd: str | None = None) -> Managed | None:
    """The managed install whose policy this machine's hooks enforce, or None (an ordinary one)."""
    from governor.harnesses.claude_code.setup import managed_config

    config = managed_config()
    return Managed(config, cwd) if config else None


def _is_ignored(file: str, managed: Managed | None) -> bool:
    return managed is not None and os.path.realpath(file) in {os.path.realpath(p) for p in managed.ignored}


def _print_problems(eff: Effective) -> None:
    for problem in eff.problems:
        click.echo(str(problem), err=True)


@group.command("check")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def check(files: tuple[str, ...], fmt: str) -> int:
    """Validate policy FILES (each a team policy over the shipped default), or the effective
    policy of this project. Exit 0 when valid, 1 with every problem as file:line:col."""
    managed = managed_install()
    results: list[tuple[str, Effective, bool]] = []  # (what, checked, ignored under a managed install)
    if files:
        results = [(file, check_files([file]), _is_ignored(file, managed)) for file in files]
    else:
        sources, eff = _current()
        layers = sources.layers()
        if managed is not None:  # what the hooks enforce, then the project's own files, which they do not read
            results.append((" < ".join(path for _, path in managed.sources.layers()), build(managed.sources.layers()),
                            False))  # fmt: skip
        if managed is None or len(layers) > 1:
            results.append((" < ".join(path for _, path in layers), eff, managed is not None))
    ok = all(eff.ok for _, eff, _ in results)
    if fmt == "json":
        click.echo(
            json.dumps(
                {
                    "ok": ok,
                    "managed": managed.policy if managed else None,
                    "checked": [
                        {"file": name, "ok": eff.ok, "in_force": not ignored,
                         "problems": [p.as_dict() for p in eff.problems]}
                        for name, eff, ignored in results
                    ],
                },
                indent=2,
            )
        )  # fmt: skip
    else:
        for name, eff, ignored in results:
            aside = f" (not in force: {IGNORED}, {managed.says() if managed else ''})" if ignored else ""
            if eff.ok:
                click.echo(f"{name}: ok{aside}")
            else:
                _print_problems(eff)
                click.echo(f"{name}: {len(eff.problems)} problem(s){aside}", err=True)
    return 0 if ok else EXIT_INVALID


def _in_force(sources: Sources) -> tuple[dict[str, Any] | None, list[Any], str]:
    """What the hooks enforce here: (the policy in force, or None when it is the files as they
    are; the changes in the files that are held back; a note when nothing was accepted yet)."""
    from governor.policy import acceptance, compiled
    from governor.state import state_dir

    state = state_dir(os.environ)
    if acceptance.read(state, sources.project) is None:
        return None, [], ("no policy has been accepted here yet: a session's first hook takes the committed files "
                          "(git HEAD), else these files as they are (docs/teams.md)")  # fmt: skip
    current, notices = compiled.from_files(sources, state)
    enforcing, _ = acceptance.enforced(current, notices, sources, state, first=False)
    if enforcing.digest == current.digest:
        return None, [], ""
    return enforcing.data, acceptance.held_changes(enforcing.blob, current), ""


def _touches(key: str, changes: list[Any]) -> list[Any]:
    return [c for c in changes if key == c.path or key.startswith(c.path + ".") or c.path.startswith(key + ".")]


@group.command("explain")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--shipped", is_flag=True, help="Explain the shipped default policy instead of this project's.")
@click.option("--unmanaged", is_flag=True, help="Under a managed install: the project's own policy, which only "
              "the hooks of another harness (not managed) enforce.")  # fmt: skip
def explain(fmt: str, shipped: bool, unmanaged: bool) -> int:
    """The policy the hooks enforce in this project, in plain words, each value with where it
    came from; a change in the files that is held back (it loosens what was accepted) is listed
    beside the value in force. Under a managed install, its policy, and the project's own files
    as not in force."""
    from governor.policy.text import explain_statements

    sources, eff = _current()
    managed = None if shipped or unmanaged else managed_install()
    layers = sources.layers()
    if shipped:
        layers = [("default", shipped_policy_path())]
        eff = build(layers)
    elif managed is not None:
        layers = managed.sources.layers()
        eff = build(layers)
    if not eff.ok:
        _print_problems(eff)
        if managed is not None:
            click.echo(f"{managed.says()} is invalid: the hooks enforce the shipped default until an administrator "
                       "fixes it", err=True)  # fmt: skip
        return EXIT_INVALID
    enforcing, held, note = (None, [], "") if shipped or managed else _in_force(sources)
    policy = enforcing or eff.dumped()
    rows: list[dict[str, Any]] = []
    for heading, sentence, path in explain_statements(policy):
        key = ".".join(path)
        waiting = _touches(key, held)
        origin = None if waiting else eff.origin_of(tuple(int(p) if p.isdigit() else p for p in path))
        rows.append(
            {
                "section": heading,
                "statement": sentence,
                "key": key,
                "layer": "accepted" if waiting else origin.kind if origin else "default",
                "source": ("the accepted policy (the files' change is held back)" if waiting
                           else f"{origin.file}:{origin.line}" if origin else shipped_policy_path()),
                "held_back": [str(c) for c in waiting],
            }
        )  # fmt: skip
    ignored = managed.ignored if managed else []
    if fmt == "json":
        in_force = "managed" if managed else "accepted" if enforcing else "files"
        click.echo(json.dumps({"digest": digest_of(policy), "project": sources.project, "in_force": in_force,
                               "managed": managed.policy if managed else None,
                               "layers": [{"layer": kind, "file": file} for kind, file in layers],
                               "not_in_force": [{"file": file, "why": IGNORED} for file in ignored],
                               "held_back": [c.as_dict() for c in held], "note": note, "rules": rows}, indent=2))  # fmt: skip
        return 0
    where = "the shipped default" if shipped else sources.project
    click.echo(f"Policy in force for {where} (digest {digest_of(policy)[:12]})")
    if managed is not None:
        click.echo(f"  {managed.says()}: this machine's managed hooks enforce it for every user and project, over "
                   "the shipped default and nothing else; there is nothing to accept")  # fmt: skip
    for kind, file in layers:
        click.echo(f"  {kind:8} {file}")
    if ignored:
        click.echo(f"\nNot in force ({IGNORED}):")
        for file in ignored:
            click.echo(f"  {file}")
    if held:
        click.echo(f"\nHeld back: {len(held)} change(s) in the files loosen the accepted policy; the hooks enforce "
                   "the accepted values below until a person runs `memory-governor policy accept` in a terminal:")  # fmt: skip
        for change in held:
            click.echo(f"  {change}")
    if note:
        click.echo(f"\n{note}")
    section: str | None = None
    for row in rows:
        if row["section"] != section:
            section = row["section"]
            click.echo(f"\n{section}")
        click.echo(f"  - {row['statement']}")
        click.echo(f"      from {row['layer']}: {row['source']}")
        for change in row["held_back"]:
            click.echo(f"      held back: {change}")
    return 0


@group.command("diff")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--shipped", is_flag=True, help="Compare the shipped default with NEW: `policy diff --shipped NEW`.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def diff(files: tuple[str, ...], shipped: bool, fmt: str) -> int:
    """What changes from policy OLD to NEW (each layered over the shipped default); with
    --shipped, from the shipped default to NEW.

    Exit 0 when nothing is loosened, 3 when anything is (so CI can require review), 1 when a
    file is invalid."""
    if len(files) != (1 if shipped else 2):
        raise click.UsageError("give OLD and NEW, or --shipped and NEW")
    old, new = (shipped_policy_path(), files[0]) if shipped else files
    effs = [check_files([old]), check_files([new])]
    for eff in effs:
        if not eff.ok:
            _print_problems(eff)
    if not all(eff.ok for eff in effs):
        return EXIT_INVALID
    changes = compare(effs[0].dumped(), effs[1].dumped())
    loosened = [c for c in changes if c.kind == LOOSENED]
    if fmt == "json":
        click.echo(
            json.dumps(
                {
                    "loosened": len(loosened),
                    "tightened": sum(c.kind == TIGHTENED for c in changes),
                    "changes": [c.as_dict() for c in changes],
                },
                indent=2,
                default=sorted,
            )
        )
    elif not changes:
        click.echo("no differences")
    else:
        for change in changes:
            click.echo(str(change))
        click.echo(f"\n{len(changes)} change(s), {len(loosened)} loosened")
    return EXIT_LOOSENED if loosened else 0


@group.command("render")
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here instead of stdout.")
def render(file: str | None, output: str | None) -> int:
    """Render a policy (default: the shipped one) as the Markdown rule file."""
    from governor.policy.text import render_markdown

    path = file or shipped_policy_path()
    eff = check_files([path]) if file else build([("default", path)])
    if not eff.ok:
        _print_problems(eff)
        return EXIT_INVALID
    text = render_markdown(eff.dumped(), os.path.basename(path))
    _write(text, output)
    return 0


@group.command("schema")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here instead of stdout.")
def schema(output: str | None) -> int:
    """The JSON Schema of a policy file, generated from the model (editors validate with it)."""
    _write(schema_text(), output)
    return 0


def _write(text: str, output: str | None) -> None:
    """`text` into the file `output` (-o), else to stdout."""
    if output:
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)


def schema_text() -> str:
    from governor.policy.model import Policy

    schema = Policy.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://memory-governor.dev/schemas/policy.schema.json"
    schema["title"] = "memory-governor policy"
    # A team file lists only what it changes: mappings merge key by key, so nothing in one is
    # required, except in an entry of a list (a list replaces the one below it whole).
    whole = _under_lists(schema)
    schema.pop("required", None)
    for name, definition in schema["$defs"].items():
        if name not in whole:
            definition.pop("required", None)
        if set(definition.get("properties", ())) == {"value", "enforce"}:  # a limit: its value alone too
            number = {k: v for k, v in definition["properties"]["value"].items() if k != "title"}
            schema["$defs"][name] = {"anyOf": [number, definition], "title": definition.get("title", name)}
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def _under_lists(schema: dict[str, Any]) -> set[str]:
    """The definitions an entry of a list is made of (each, and every one it refers to)."""

    def refs(node: Any) -> set[str]:
        if isinstance(node, dict):
            found = {node["$ref"].rsplit("/", 1)[1]} if isinstance(node.get("$ref"), str) else set()
            return found.union(*(refs(value) for value in node.values()))
        return set().union(*(refs(value) for value in node)) if isinstance(node, list) else set()

    def items(node: Any) -> list[Any]:
        if isinstance(node, dict):
            return ([node["items"]] if "items" in node else []) + [i for v in node.values() for i in items(v)]
        return [i for v in node for i in items(v)] if isinstance(node, list) else []

    found: set[str] = set()
    todo = refs(items(schema))
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo |= refs(schema["$defs"][name])
    return found


# An agent's process, by its program's name or the package its script is in: a command run by the
# agent's own shell tool has one among its ancestors.
AGENT_PROGRAMS = frozenset({"claude", "codex", "copilot", "gemini", "opencode", "cursor-agent"})
AGENT_PACKAGES = ("@anthropic-ai/claude-code", "@openai/codex", "@github/copilot", "@google/gemini-cli", "opencode-ai")


def _record(state: str, sources: Sources, blob: dict[str, Any]) -> None:
    """Write the acceptance (on the ledger's Redis, when there is one: for every host)."""
    import time

    from governor.engine.ledger import LedgerError
    from governor.policy import acceptance

    try:
        acceptance.write(state, sources, blob, time.time())
    except LedgerError as err:
        raise click.ClickException(f"{err}; nothing was accepted") from None


def _not_a_person_at_a_terminal() -> str | None:
    """Why this process is not a person at their own terminal, or None. The model's shell tool runs
    commands with no controlling terminal, under the agent's process; `policy accept` needs both
    a terminal and no agent among its ancestors (an agent can start a pseudo-terminal, not stop
    being its commands' ancestor without leaving the terminal behind too)."""
    try:
        os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
    except OSError:
        return "there is no terminal here (an agent's shell tool has none; --yes does not replace one)"
    agent = _agent_ancestor()
    if agent is not None:
        return f"this runs under {agent}, an agent's process (its shell tool cannot accept for you)"
    return None


def _agent_ancestor() -> str | None:
    pid = os.getppid()
    for _ in range(64):
        if pid <= 1:
            return None
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = handle.read(8192).split(b"\0")
            with open(f"/proc/{pid}/stat", "rb") as handle:
                pid = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None  # no /proc (not Linux): the terminal is what is checked
        words = [w.decode("utf-8", "replace") for w in argv[:2] if w]
        if any(os.path.basename(w) in AGENT_PROGRAMS for w in words):
            return " ".join(words)[:120]
        if any(package in w for w in words for package in AGENT_PACKAGES):
            return " ".join(words)[:120]
    return None


def _confirmed(question: str) -> bool:
    """Asked and answered on the terminal itself, not on stdin (which a pipe can fill)."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return False
    try:
        os.write(fd, question.encode())
        answer = os.read(fd, 64)
    except OSError:
        return False
    finally:
        os.close(fd)
    return answer.decode("utf-8", "replace").strip().lower() in ("y", "yes")


@group.command("accept")
@click.option("--project", type=click.Path(file_okay=False), help="The project (default: here).")
@click.option("--yes", is_flag=True, help="Accept without asking (still in your own terminal).")
@click.option("--unmanaged", is_flag=True, help="Under a managed install: accept for the hooks of another harness "
              "(not managed), the only ones that read the project's files.")  # fmt: skip
def accept(project: str | None, yes: bool, unmanaged: bool) -> int:
    """Accept the policy files and subagent definitions as they are now.

    A change that loosens the accepted policy, or a subagent definition changed since that
    declares a wider memory tier, is held back until a person accepts it: an agent can write
    files too. This shows what is held back and, once you confirm, puts it in force. Under a
    managed install there is nothing to accept: its hooks read no acceptance."""

    from governor import harnesses
    from governor.policy import acceptance, compiled, projects
    from governor.state import state_dir

    managed = None if unmanaged else managed_install(project)
    if managed is not None:
        click.echo(f"nothing to accept: {managed.says()} is in force. This machine's managed hooks enforce it over "
                   "the shipped default for every user and project, and read no acceptance; the project's files are "
                   f"{IGNORED}. An administrator changes it: sudo memory-governor install claude-code --scope "
                   "managed --policy FILE. (For another harness's hooks here, which are not managed: "
                   "memory-governor policy accept --unmanaged.)")  # fmt: skip
        return 0
    refusal = _not_a_person_at_a_terminal()
    if refusal is not None:
        raise click.ClickException(f"confirm in your own terminal: {refusal}; nothing was accepted")
    env = os.environ
    state = state_dir(env)
    here = os.path.abspath(project) if project else os.getcwd()
    root, was = projects.repin(here, state)
    if was is not None:
        click.echo(f"the project root of {here} moves from {was} to {root} (a .memory-governor/ folder appeared "
                   "or went); its policy files are what is accepted now")  # fmt: skip
    sources = Sources(env, here, root)
    current, notices = compiled.from_files(sources, state)
    for notice in notices:
        click.echo(notice, err=True)
    from governor.engine.ledger import LedgerError

    try:
        record = acceptance.read(state, sources.project, sources.ledger_url)
        accepted = acceptance.accepted_blob(state, sources.project, sources.ledger_url) if record else None
    except LedgerError as err:
        raise click.ClickException(f"{err}; nothing was accepted") from None
    held = acceptance.held_changes(accepted, current) if accepted else []
    since = float(record["accepted_at"]) if record else 0.0
    definitions = acceptance.held_definitions(current.data["subagents"], harnesses.agent_dirs(sources.project), since)
    if not held and not definitions:
        _record(state, sources, current.blob)
        click.echo(f"{sources.project}: nothing was held back; the policy files are accepted as they are")
        return 0
    for change in held:
        click.echo(f"held back: {change}")
    for path, tier in definitions:
        click.echo(f"held back: {path} declares tier {tier}")
    if not yes and not _confirmed("Put these in force? [y/N] "):
        raise click.ClickException("not confirmed: nothing was accepted")
    _record(state, sources, current.blob)
    click.echo(f"{sources.project}: accepted; {len(held) + len(definitions)} held-back change(s) are in force now")
    return 0
