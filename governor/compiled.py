"""Which policy files apply, and the compiled policy a hook reads instead of YAML.

Hot path: a hook stats the policy files, and when none changed since the last compile it
loads one small JSON file (no yaml, no pydantic). Any change sends it through the cold path
(`governor.policy_files`) once, which rewrites the compiled file.

Discovery (the first that exists is the team policy; each layers over the shipped default):
  1. $MEMORY_GOVERNOR_POLICY
  2. <project>/.memory-governor/policy.yaml     (project = nearest ancestor with .memory-governor/)
  3. $XDG_CONFIG_HOME/memory-governor/policy.yaml (else ~/.config/...)
  4. the shipped default, rules/memory-budget.yaml
A local override, <project>/.memory-governor/policy.local.yaml, layers over the team policy
and may only tighten it (except the keys the team lists under loosen_allowed).
"""

from __future__ import annotations

import json
import os

from governor import __version__, with_site_packages
from governor.state import ensure_dir, write_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

SHIPPED_NAME = "memory-budget.yaml"
PROJECT_DIR_NAME = ".memory-governor"
TEAM_NAME = "policy.yaml"
LOCAL_NAME = "policy.local.yaml"
CACHE_FORMAT = 1

_HERE = os.path.dirname(os.path.abspath(__file__))


def shipped_file(folder: str, name: str) -> str:
    """A shipped data file: packaged under governor/<folder>, or <folder>/ beside a source checkout."""
    for candidate in (
        os.path.join(_HERE, folder, name),
        os.path.join(os.path.dirname(_HERE), folder, name),
    ):
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(f"{folder}/{name} is missing from this installation")


def shipped_policy_path() -> str:
    return shipped_file("rules", SHIPPED_NAME)


def project_root(env: Mapping[str, str], cwd: str | None) -> str:
    start = env.get("CLAUDE_PROJECT_DIR") or cwd or os.getcwd()
    start = os.path.abspath(start)
    here = start
    while True:
        if os.path.isdir(os.path.join(here, PROJECT_DIR_NAME)):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return start
        here = parent


class Sources:
    """The files that make up the effective policy, in layering order."""

    __slots__ = ("local", "project", "shipped", "team", "team_origin", "watched")

    def __init__(self, env: Mapping[str, str], cwd: str | None) -> None:
        self.project = project_root(env, cwd)
        self.shipped = shipped_policy_path()
        config_home = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
        explicit = env.get("MEMORY_GOVERNOR_POLICY")
        project_team = os.path.join(self.project, PROJECT_DIR_NAME, TEAM_NAME)
        user_team = os.path.join(config_home, "memory-governor", TEAM_NAME)
        local = os.path.join(self.project, PROJECT_DIR_NAME, LOCAL_NAME)
        self.team: str | None = None
        self.team_origin = "shipped default"
        if explicit:
            self.team, self.team_origin = os.path.abspath(explicit), "MEMORY_GOVERNOR_POLICY"
        elif os.path.isfile(project_team):
            self.team, self.team_origin = project_team, "project"
        elif os.path.isfile(user_team):
            self.team, self.team_origin = user_team, "user"
        self.local: str | None = local if os.path.isfile(local) else None
        # Everything whose appearance, change or removal changes the effective policy.
        self.watched = [self.shipped, explicit or project_team, user_team, local, _MODEL_FILE]

    def layers(self) -> list[tuple[str, str]]:
        out = [("default", self.shipped)]
        if self.team:
            out.append(("team", self.team))
        if self.local:
            out.append(("local", self.local))
        return out

    def signature(self) -> list[list[Any]]:
        out: list[list[Any]] = [[__version__]]
        for path in self.watched:
            try:
                st = os.stat(path)
                out.append([path, st.st_mtime_ns, st.st_size])
            except OSError:
                out.append([path, None, None])
        return out

    def cache_key(self) -> str:
        from zlib import crc32

        text = "\0".join([self.project, *self.watched])
        return f"{crc32(text.encode('utf-8', 'surrogatepass')):08x}"


_MODEL_FILE = os.path.join(_HERE, "policy.py")


class CompiledPolicy:
    """The effective policy as plain data, with the lookups a hook needs precomputed."""

    def __init__(self, blob: dict[str, Any]) -> None:
        self.blob = blob
        self.data: dict[str, Any] = blob["policy"]
        self.digest: str = blob["digest"]
        self.sources: list[str] = blob["sources"]
        self.tools: dict[str, dict[str, dict[str, Any]]] = blob["index"]["tools"]
        self.recall_phrases: list[str] = blob["index"]["recall_phrases"]
        self.mode: str = self.data["mode"]
        self.on_error: str = self.data["on_error"]
        self.unit: str = self.data["token_counter"]
        self.limits: dict[str, dict[str, Any]] = self.data["limits"]
        self.ladder: dict[str, dict[str, Any]] = self.data["ladder"]

    def tool(self, server: str, tool: str) -> dict[str, Any] | None:
        """The spec (role, parameter names, result format) of a governed tool, else None."""
        by_tool = self.tools.get(server)
        return by_tool.get(tool) if by_tool else None

    def limit(self, name: str) -> tuple[int, str]:
        entry = self.limits[name]
        return entry["value"], entry["enforce"]


def index(policy: dict[str, Any]) -> dict[str, Any]:
    """Lookups derived once at compile time, so a hook does no work to find them."""
    tools: dict[str, dict[str, dict[str, Any]]] = {}
    for mapping in policy["tools"]:
        for server in mapping["servers"]:
            for tool, spec in mapping["map"].items():
                tools.setdefault(server, {})[tool] = {"format": mapping["format"], **spec}
    recall = policy["mem_context"]["unlocked_by"].get("explicit_user_recall", {})
    return {
        "tools": tools,
        "recall_phrases": [p.casefold() for p in recall.get("phrases", [])],
    }


class PolicyUnavailable(Exception):
    """No valid policy at all, not even the shipped default."""


def cache_paths(state: str, sources: Sources) -> tuple[str, str]:
    folder = ensure_dir(os.path.join(state, "policy"))
    key = sources.cache_key()
    return os.path.join(folder, f"{key}.json"), os.path.join(folder, f"{key}.broken.json")


def _read_json(path: str) -> Any:
    try:
        with open(path, "rb") as handle:
            return json.loads(handle.read())
    except (OSError, ValueError):
        return None


_memo: dict[str, tuple[list[list[Any]], CompiledPolicy]] = {}  # a long-lived process skips re-reading


def load(env: Mapping[str, str], cwd: str | None, state: str) -> tuple[CompiledPolicy, list[str]]:
    """The effective policy for a project, and notices for the user (a broken policy file).

    Compiles on a cache miss. A broken policy never stops enforcement: the last valid
    compile for this project is used, else the shipped default, and the notice says so.
    """
    sources = Sources(env, cwd)
    signature = sources.signature()
    try:
        good_path, broken_path = cache_paths(state, sources)
    except OSError:
        good_path = broken_path = ""  # no usable state directory: compile in memory every time
    remembered = _memo.get(good_path) if good_path else None
    if remembered is not None and remembered[0] == signature:
        return remembered[1], []
    cached = _read_json(good_path) if good_path else None
    if isinstance(cached, dict) and cached.get("format") == CACHE_FORMAT and cached.get("signature") == signature:
        policy = CompiledPolicy(cached)
        _memo[good_path] = (signature, policy)
        return policy, []
    broken = _read_json(broken_path) if broken_path else None
    if isinstance(broken, dict) and broken.get("signature") == signature:
        return _fallback(cached, broken["problems"], sources)
    with_site_packages()
    from governor.policy_files import compile_sources

    blob, problems = compile_sources(sources)
    if blob is not None:
        blob["signature"] = signature
        _store(good_path, blob)
        if broken_path:
            try:
                os.unlink(broken_path)
            except OSError:
                pass
        return CompiledPolicy(blob), []
    _store(broken_path, {"signature": signature, "problems": problems})
    return _fallback(cached, problems, sources)


def _store(path: str, blob: dict[str, Any]) -> None:
    """Best effort: a cache that cannot be written costs the next hook a compile, nothing more."""
    if not path:
        return
    try:
        write_atomic(path, json.dumps(blob).encode())  # policy order kept: matchers and precedence follow it
    except OSError:
        pass


def _fallback(cached: Any, problems: list[str], sources: Sources) -> tuple[CompiledPolicy, list[str]]:
    first = problems[0] if problems else "unknown problem"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    if isinstance(cached, dict) and cached.get("format") == CACHE_FORMAT and "policy" in cached:
        used = f"the last valid policy (digest {cached['digest'][:12]})"
        policy = CompiledPolicy(cached)
    else:
        with_site_packages()
        from governor.policy_files import compile_sources

        blob, default_problems = compile_sources(sources, only_default=True)
        if blob is None:
            raise PolicyUnavailable("; ".join(default_problems))
        used = "the shipped default policy"
        policy = CompiledPolicy(blob)
    notice = (
        f"memory-governor: the policy is invalid: {first}{more}. Enforcing {used} until it is fixed; "
        "run `memory-governor policy check` for every problem."
    )
    return policy, [notice]
