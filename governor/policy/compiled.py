"""The compiled policy a hook reads instead of YAML, cached in the state directory.

Hot path: a hook stats the policy files (governor.policy.sources), and when none changed
since the last compile it loads one small JSON file (no yaml, no pydantic). Any change sends
it through the cold path (`governor.policy.files`) once, which rewrites the compiled file.
A broken policy never stops enforcement: the last valid compile is kept.
"""

from __future__ import annotations

import _thread
import os

from governor import with_site_packages
from governor.engine.rules import CompiledPolicy
from governor.policy import history
from governor.policy.content import compile_layers, folder, read_json, store
from governor.policy.sources import Sources
from governor.state import ensure_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

CACHE_FORMAT = 1


class PolicyUnavailable(Exception):
    """No valid policy at all, not even the shipped default."""


def cache_paths(state: str, sources: Sources) -> tuple[str, str]:
    folder = ensure_dir(os.path.join(state, "policy"))
    key = sources.cache_key()
    return os.path.join(folder, f"{key}.json"), os.path.join(folder, f"{key}.broken.json")


_memo: dict[str, tuple[list[list[Any]], CompiledPolicy]] = {}  # a long-lived process skips re-reading
_first_sight = _thread.allocate_lock()  # pinning a folder and writing its first record are one step
_recent: dict[tuple[Any, ...], tuple[float, CompiledPolicy]] = {}  # with recheck_every: the last clean load
_recheck_seconds = 0.0


def recheck_every(seconds: float) -> None:
    """For a long-lived process that decides many events of one project (the MCP proxy): look at the
    policy files at most every `seconds` (finding and stating them is most of a load's cost)."""
    global _recheck_seconds
    _recheck_seconds = seconds


def load(env: Mapping[str, str], cwd: str | None, state: str, session: object = None
         ) -> tuple[CompiledPolicy, list[str]]:  # fmt: skip
    """The effective policy for a project, and notices for the user (a broken policy file).
    The project is the one pinned for `session` (or for `cwd`: governor.policy.projects), and
    the policy's `project` says which it is.

    Compiles on a cache miss. A broken policy never stops enforcement: the last valid
    compile for this project is used, else the shipped default, and the notice says so. A
    change that loosens the policy a person accepted is held back (governor.policy.acceptance).
    In a managed hook (governor.policy.managed) it is the administrator's policy, whatever else.
    """
    from governor.policy import managed

    if managed.active():  # a managed hook: the administrator's policy, nothing from the user's files
        found, notices = managed.load(env, cwd, state=state)
        if found is None:
            raise PolicyUnavailable("; ".join(notices))
        return found, notices
    recent_key: tuple[Any, ...] = ()
    if _recheck_seconds:
        import time

        now = time.monotonic()
        recent_key = (cwd, state, env.get("MEMORY_GOVERNOR_POLICY"), env.get("XDG_CONFIG_HOME"), env.get("HOME"),
                      session)  # fmt: skip
        recent = _recent.get(recent_key)
        if recent is not None and now - recent[0] < _recheck_seconds:
            return recent[1], []
    from governor.policy.acceptance import enforced
    from governor.policy.projects import pinned

    with _first_sight:  # threads of one process (the proxy's, the warm server's) see a folder first once
        project, first = pinned(cwd, state, session)
        sources = Sources(env, cwd, project)
        policy, notices = enforced(*from_files(sources, state), sources, state, first)
    policy.project = project
    if recent_key and not notices:
        _recent[recent_key] = (now, policy)
    return policy, notices


def from_files(sources: Sources, state: str) -> tuple[CompiledPolicy, list[str]]:
    """What the policy files say now, accepted or not (a broken file: the last valid compile,
    and a notice). Hooks enforce `load`, which holds back a change nobody accepted."""
    signature = sources.signature()
    try:
        good_path, broken_path = cache_paths(state, sources)
    except OSError:
        good_path = broken_path = ""  # no usable state directory: compile in memory every time
    remembered = _memo.get(good_path) if good_path else None
    if remembered is not None and remembered[0] == signature:
        return remembered[1], []
    cached = read_json(good_path) if good_path else None
    if isinstance(cached, dict) and cached.get("format") == CACHE_FORMAT and cached.get("signature") == signature:
        policy = CompiledPolicy(cached)
        policy.forms = good_path.removesuffix(".json")
        policy.shared_forms = shared_forms(state, policy.digest)
        _memo[good_path] = (signature, policy)
        return policy, []
    broken = read_json(broken_path) if broken_path else None
    if isinstance(broken, dict) and broken.get("signature") == signature:
        return _fallback(cached, broken["problems"], sources)
    blob, problems = compile_layers(state, sources.layers())
    if blob is not None:
        blob["format"], blob["signature"] = CACHE_FORMAT, signature
        store(good_path, blob)
        history.remember(state, blob)
        if broken_path:
            try:
                os.unlink(broken_path)
            except OSError:
                pass
        policy = CompiledPolicy(blob)
        policy.forms = good_path.removesuffix(".json") or None
        policy.shared_forms = shared_forms(state, policy.digest) if policy.forms else None
        return policy, []
    store(broken_path, {"signature": signature, "problems": problems})
    return _fallback(cached, problems, sources)


def shared_forms(state: str, digest: str) -> Callable[[], str | None]:
    """Where the patterns' code of the policy with this digest is kept for every project of the
    state directory (one that says what another says reads it instead of building it again):
    beside the policies kept by content, when that folder may be used (content.folder)."""

    def where() -> str | None:
        found = folder(state) if len(digest) == 64 and not digest.strip("0123456789abcdef") else None
        return os.path.join(found, digest) if found else None

    return where


def _fallback(cached: Any, problems: list[str], sources: Sources) -> tuple[CompiledPolicy, list[str]]:
    first = problems[0] if problems else "unknown problem"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    if isinstance(cached, dict) and cached.get("format") == CACHE_FORMAT and "policy" in cached:
        used = f"the last valid policy (digest {cached['digest'][:12]})"
        policy = CompiledPolicy(cached)
    else:
        with_site_packages()
        from governor.policy.files import compile_sources

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
