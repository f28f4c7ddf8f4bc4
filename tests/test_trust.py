"""The policy in force is the one a person accepted, whatever the model writes, moves or holds.

Played through the hook process as a model with a shell and file tools would: a policy file that
is slow to read, a new project folder above the project, the acceptance record deleted, the
ledger's write lock held from a background process. Each test fails on the code before its fix
(docs/reliability.md, "An agent that pushes").
"""

from __future__ import annotations

import time

import pytest

from tests.conftest import Env, Session

TEAM_CLOSED = "on_error: closed\nlimits:\n  max_search_calls: {value: 1, enforce: block}\n"


def _searches(session: Session, count: int) -> list[bool]:
    """Denied or not, for `count` searches in a new turn."""
    session.prompt("what did we decide about the cache")
    return [session.pre("mem_search", query=f"cache {i}", limit=1).denied for i in range(count)]


def _alias_bomb(levels: int = 9) -> str:
    """A few hundred bytes that expand to 9**levels values: the classic YAML alias bomb."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\nlimits: {max_search_calls: {value: 9, enforce: block}}\n"


# -- 1. a policy file slow to read is a broken policy, in bounded time ----------------------------

SLOW_POLICIES = {
    "aliases": lambda: _alias_bomb(),
    "comments": lambda: "# nothing here\n" * 2_000_000,  # 30 MB, every line a comment
    "nesting": lambda: "limits: " + "[" * 100_000 + "\n",
}


@pytest.mark.parametrize("kind", sorted(SLOW_POLICIES))
def test_a_policy_too_slow_to_read_keeps_the_accepted_one_in_bounded_time(env: Env, session: Session,
                                                                          kind: str) -> None:  # fmt: skip
    env.write(".memory-governor/policy.yaml", TEAM_CLOSED)
    session.start()
    assert _searches(session, 2) == [False, True]
    env.write(".memory-governor/policy.local.yaml", SLOW_POLICIES[kind]())
    started = time.monotonic()
    session.prompt("and the queue?")
    first = session.pre("mem_search", query="queue", limit=1)
    second = session.pre("mem_search", query="queue 2", limit=1)
    took = time.monotonic() - started
    assert [first.denied, second.denied] == [False, True], (first.raw, second.raw)  # max 1 still holds
    assert "could not decide" not in first.stderr + second.stderr, first.stderr  # a decision, not on_error
    told = first.message + session.pre("mem_search", query="q", limit=1).stderr
    assert "policy.local.yaml" in told and "not read" in told, told
    assert took < 10, f"three hook runs took {took:.1f} s: past a harness's hook timeout"
    check = env.cli("policy", "check")
    assert check.returncode == 1 and "policy.local.yaml:" in check.stderr, check.stderr
