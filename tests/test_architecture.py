"""The picture in docs/architecture.md stays true: imports run one way, and nothing goes round.

Every `governor` import of every module counts, including those inside functions (the hot
path imports lazily, and a lazy import is still a dependency) and type-only ones.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "governor"
# Each room, lowest first, and the rooms it may import besides itself.
ROOMS = {
    "foundation": set(),
    "engine": {"foundation"},
    "policy": {"foundation", "engine"},
    "harnesses": {"foundation", "engine", "policy"},
    "runtime": {"foundation", "engine", "policy", "harnesses"},
    "review": {"foundation", "engine", "policy", "harnesses", "runtime"},
    "sdk": {"foundation", "engine", "policy", "harnesses", "runtime"},
    "commands": {"foundation", "engine", "policy", "harnesses", "runtime", "review", "sdk"},
}
FOUNDATION = {"governor", "governor.state", "governor.jsonio"}
TOP = {"governor.cli": "commands", "governor.__main__": "commands"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def room_of(module: str) -> str:
    if module in FOUNDATION:
        return "foundation"
    if module in TOP:
        return TOP[module]
    parts = module.split(".")
    assert parts[0] == "governor" and len(parts) > 1 and parts[1] in ROOMS, f"{module} is in no room"
    return parts[1]


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def imports(path: Path, known: set[str]) -> set[str]:
    """The governor modules `path` imports (a `from X import name` of a submodule counts as it)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "governor")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "governor":
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)
    return found


def graph() -> dict[str, set[str]]:
    known = set(modules())
    return {name: {m for m in imports(path, known) if m != name} for name, path in modules().items()}


def test_every_module_is_in_a_room_that_says_what_it_owns() -> None:
    for name in modules():
        room_of(name)
    for room in ROOMS:
        if room == "foundation":
            continue
        doc = ast.get_docstring(ast.parse((PACKAGE / room / "__init__.py").read_text(encoding="utf-8")))
        assert doc and ("May import" in doc or "may import" in doc.lower()), f"governor/{room}/__init__.py"


def test_imports_only_run_downward() -> None:
    wrong = []
    for name, targets in graph().items():
        mine = room_of(name)
        for target in targets:
            theirs = room_of(target)
            if theirs != mine and theirs not in ROOMS[mine]:
                wrong.append(f"{name} ({mine}) imports {target} ({theirs})")
    assert not wrong, "\n".join(wrong)


def test_there_is_no_import_circle() -> None:
    edges = graph()
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    circles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(edges.get(node, ())):
            if target not in edges:
                continue
            if state.get(target) == 1:
                circles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert not circles, "\n".join(" -> ".join(c) for c in circles)


HARNESS_KNOWLEDGE = re.compile(
    r"\.claude/|\.codex|\.gemini|\.opencode|\.github/|CLAUDE_|CODEX_|COPILOT|GEMINI_|OPENCODE|mcp__"
    r"|claude code|\bcodex\b|\bcopilot\b|\bopencode\b|\bgemini\b|\bcursor\b",
    re.I,
)


def test_the_engine_and_the_policy_know_no_harness() -> None:
    """No harness's files, variables, tool-name syntax or name in the two bottom rooms' code."""
    for room in ("engine", "policy"):
        for path in sorted((PACKAGE / room).glob("*.py")):
            said = sorted({m.group(0) for m in HARNESS_KNOWLEDGE.finditer(path.read_text(encoding="utf-8"))})
            assert not said, f"governor/{room}/{path.name} says {said}: that belongs in governor/harnesses/"


EVENT_MODULES = {"governor.engine.prompt", "governor.engine.pre_tool", "governor.engine.post_tool"}


def test_decide_is_the_one_entry_to_the_rules() -> None:
    """The rules are split by the event they serve; everything outside the engine reaches them
    through governor.engine.decide, so the split stays an inside matter of the engine."""
    wrong = sorted(
        f"{name} imports {target}"
        for name, targets in graph().items()
        for target in targets & EVENT_MODULES
        if not name.startswith("governor.engine.")
    )
    assert not wrong, "\n".join(wrong)


MAX_LINES = 600
LONG_ON_PURPOSE = re.compile(r"long on purpose", re.I)


def test_no_module_grows_past_its_size_without_saying_why() -> None:
    """A module past ~600 lines holds more than one concern, unless its docstring says why not."""
    long = []
    for name, path in modules().items():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_LINES and not LONG_ON_PURPOSE.search(ast.get_docstring(ast.parse(text)) or ""):
            long.append(f"{name}: {text.count(chr(10))} lines")
    assert not long, "\n".join(long)
