"""The scenarios every harness's end-to-end tests prove, written once for the harnesses whose
tests call them (Pi, Cline): a harness module supplies its sandbox and how it names the memory's
tools to the model (`name(tool)`), and how a refused call reads (`denied(result, *fragments)`).

Each scenario runs the real binary through `harness.run(prompt, main=[...], session=...)` and
asserts what the model received, what the Engram stand-in got, and the ledger.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fake_chat import call, text, tool_uses
from sandbox import NOTE, hit_ids, o200k

Name = Callable[[str], str]
Denied = Callable[..., bool]


def searches(name: Name) -> dict[str, Any]:
    """Four searches in one reply: two over the turn's cap, two with no limit or one past the ladder's."""
    return tool_uses(call(name("mem_search"), {"query": "jwt auth", "limit": 10}),
                     call(name("mem_search"), {"query": "fts5"}),
                     call(name("mem_search"), {"query": "repository errors", "limit": 3}),
                     call(name("mem_search"), {"query": "sqlite", "limit": 3}))  # fmt: skip


def parallel_searches_then_a_fresh_turn(harness: Any, name: Name, denied: Denied) -> None:
    run = harness.run("What did we decide about auth, search, the repository layer and storage?",
                      main=[searches(name), text("Summarised.")])  # fmt: skip
    results = run.results_of("mem_search")
    assert len(results) == 4, run.describe()
    real = [r for r in results if not denied(r)]
    assert len(real) == 2, run.describe()
    for r in real:
        assert "Found " in r.text and 0 < len(hit_ids(r.text.replace("\\n", "\n"))) <= 3, r.text
    assert all(denied(r, "max_search_calls=2") for r in results if r not in real), run.describe()
    # The clamp reached the server (limit 10, and Engram's default 10, -> 3); the refused calls never did.
    # One decided after the other's result asks 3 more, for the 3 hits it may find again (delivered once).
    logged = sorted((c["arguments"] for c in harness.calls("mem_search")), key=lambda a: a["query"])
    assert [a["query"] for a in logged] == sorted(r.input["query"] for r in real), logged
    assert sorted(a["limit"] for a in logged) in ([3, 3], [3, 6]) and all(set(a) == {"query", "limit"} for a in logged)
    assert sorted(harness.ledger_calls()) == [("search", "committed")] * 2 + [("search", "denied")] * 2
    assert "memory_need=" in run.lane()[0].all_text(), "the prompt's memory-need line reached the model"
    # The next prompt of the same session is a new turn: its searches have their own budget.
    again = harness.run("And what about sessions?", session=run.session_id,
                        main=[tool_uses(call(name("mem_search"), {"query": "sessions", "limit": 3}),
                                        call(name("mem_search"), {"query": "tokens", "limit": 3})),
                              text("Done.")])  # fmt: skip
    assert [denied(r) for r in again.results_of("mem_search")] == [False, False], again.describe()
    assert len(harness.calls("mem_search")) == 4


def fetches_ceiling_and_routes(harness: Any, name: Name, denied: Denied, shell: dict[str, Any],
                               read: dict[str, Any], ceiling: int = 1200) -> None:  # fmt: skip
    """A guessed fetch refused, the turn's token ceiling held on a real one (`ceiling`: what the
    model got of it, with whatever wrapping the harness adds), and the harness's own shell
    (`shell`) and file-reading (`read`) calls on Engram refused by the routes."""
    run = harness.run(
        "What did we decide about storage? Show the full SQLite memory.",
        main=[tool_uses(call(name("mem_get_observation"), {"id": 62})),  # not surfaced yet
              tool_uses(call(name("mem_search"), {"query": "sqlite storage wal", "limit": 3})),
              tool_uses(call(name("mem_get_observation"), {"id": 62})),  # 4,800 characters: ~1,080 tokens
              tool_uses(shell, read), text("Done.")],
    )  # fmt: skip
    guessed, fetched = run.results_of("mem_get_observation")
    assert denied(guessed, "id=62 was not surfaced"), guessed.text
    [search] = run.results_of("mem_search")
    assert 62 in hit_ids(search.text.replace("\\n", "\n")), search.text
    received = o200k(search.text) + o200k(fetched.text)
    assert received <= ceiling, f"{received} tokens of memory reached the model\n{run.describe()}"
    assert NOTE in fetched.text and "Note 20 on sqlite storage" not in fetched.text, fetched.text
    assert [c["arguments"] for c in harness.calls("mem_get_observation")] == [{"id": 62}]
    refused_shell, refused_read = run.results(prefix="")[-2:]
    assert (refused_shell.name, refused_read.name) == (shell["name"], read["name"]), run.describe()
    assert denied(refused_shell, "route 'engram-cli'"), refused_shell.text
    assert denied(refused_read, "route 'engram-database'"), refused_read.text


def mem_context_locked_then_recalled_once(harness: Any, name: Name, denied: Denied, ceiling: int = 1200) -> None:
    context = tool_uses(call(name("mem_context"), {"project": "myapp"}))
    first = harness.run("Continue with the auth work where we left off.", main=[context, text("Continuing.")])
    [locked] = first.results_of("mem_context")
    assert denied(locked, "is off outside post-compaction recovery"), locked.text
    again = harness.run("give me all context", session=first.session_id, main=[context, context, text("Recovered.")])
    allowed, second = again.results_of("mem_context")
    assert not denied(allowed) and "## Memory from Previous Sessions" in allowed.text, allowed.text
    assert o200k(allowed.text) <= ceiling and NOTE in allowed.text, "the dump is cut to whole entries"
    assert denied(second, "is off outside post-compaction recovery"), second.text
    assert len(harness.calls("mem_context")) == 1
    assert "explicit recall requested" in again.lane()[0].all_text()


def ungoverned(harness: Any, name: Name, denied: Denied) -> None:
    """The control run: nothing installed, and the scripts the scenarios refuse go through."""
    harness.hooks = False
    run = harness.run("What did we decide about auth, search, the repository layer and storage?",
                      main=[searches(name), tool_uses(call(name("mem_get_observation"), {"id": 62})),
                            tool_uses(call(name("mem_context"), {"project": "myapp"})), text("Everything.")])  # fmt: skip
    assert not any(denied(r) for r in run.results()), run.describe()
    assert [c["arguments"].get("limit") for c in harness.calls("mem_search")] == [10, None, 3, 3]
    assert len(harness.calls("mem_get_observation")) == 1 and len(harness.calls("mem_context")) == 1
    [fetched] = run.results_of("mem_get_observation")
    assert NOTE not in fetched.text and o200k(fetched.text) > 800, "the whole observation reached the model"
    assert "memory_need=" not in run.lane()[0].all_text()


def project_install(harness: Any, name: Name, denied: Denied, script: Any) -> None:
    """The project scope: the committed script (at `script`, a Path) names the launcher, no machine
    path; a search through it is clamped; doctor finds it and its self-test clamps."""
    harness.scope = "project"
    harness.install()
    text_ = script.read_text()
    assert '"launcher": ".memory-governor/hook"' in text_ and str(harness.tmp) not in text_
    run = harness.run("What did we decide about auth?",
                      main=[tool_uses(call(name("mem_search"), {"query": "auth", "limit": 10})), text("Done.")])  # fmt: skip
    [result] = run.results_of("mem_search")
    assert not denied(result) and [c["arguments"]["limit"] for c in harness.calls("mem_search")] == [3], result.text
    doctor = harness.governor("doctor", check=False)
    assert f"{harness.harness} (project)" in doctor.stdout and "clamped limit 10 -> 3" in doctor.stdout, doctor.stdout
