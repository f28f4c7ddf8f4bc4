"""The policy file: validation with located errors, layering, diff, render and schema, via the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, SHIPPED, Env


def test_shipped_policy_is_valid(env: Env) -> None:
    out = env.cli("policy", "check", str(SHIPPED))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith(": ok")


def test_the_shipped_policy_reads_the_same_with_libyaml_and_a_tampered_copy_with_the_bounded_reader(
    tmp_path: Path,
) -> None:
    """The shipped default, as built, is read with libyaml (a compile's largest file): the same
    values, positions and problems as the bounded reader every other file gets; a copy whose bytes
    differ from the built digest is read as any other file."""
    from governor.policy import document
    from governor.policy.sources import built_digest

    fast = document.read_policy_file(str(SHIPPED), built_digest())
    slow = document.read_policy_text(SHIPPED.read_text(encoding="utf-8"), str(SHIPPED))
    assert fast.data == slow.data and fast.values == slow.values and fast.keys == slow.keys
    assert [str(p) for p in fast.problems] == [str(p) for p in slow.problems] == []
    tampered = tmp_path / "memory-budget.yaml"
    tampered.write_text("limits:\n" + "  " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    doc = document.read_policy_file(str(tampered), built_digest())
    assert doc.data is None and any("nested more than" in p.message for p in doc.problems), doc.problems


def test_shipped_policy_has_the_seed_numbers(env: Env) -> None:
    rules = {r["key"]: r["statement"] for r in env.cli_json("policy", "explain", "--format", "json")["rules"]}
    assert "at most 2 L1 searches per turn (blocked past the limit)" in rules["limits.max_search_calls"]
    assert "at most 1 L3 full fetches per turn (blocked" in rules["limits.max_full_fetches"]
    assert "at most 1200 o200k_base memory tokens" in rules["limits.max_memory_tokens_injected"]
    assert "at most 2 saves per turn (warned past the limit)" in rules["limits.max_save_calls_per_turn"]
    assert rules["mem_context.allow"] == "mem_context is forbidden unless a trigger is armed"
    for agent in ("validator", "tester-front", "tester-back", "github-ops", "agent-sync"):
        assert rules[f"subagents.agents.{agent}"] == f"{agent} is save-only"


BROKEN = {
    "syntax": ("version: 1\nlimits: [\n", "3:1: YAML syntax error"),
    "unknown key": (
        "limits:\n  max_serch_calls: {value: 2, enforce: block}\n",
        "2:3: unknown key 'max_serch_calls' (did you mean 'max_search_calls'?)",
    ),
    "wrong type": ("limits:\n  max_full_fetches: {value: lots, enforce: block}\n", "2:29: wrong type"),
    "negative": ("limits:\n  max_full_fetches: {value: -1, enforce: block}\n", "2:29: -1 is out of range"),
    "absurd": ("limits:\n  max_search_calls: {value: 5000, enforce: block}\n", "2:29: 5000 is out of range"),
    "duplicate key": (
        "mode: enforce\nmode: monitor\n",
        "2:1: duplicate key 'mode' (first written at line 1)",
    ),
    "tab": ("limits:\n\tmax_search_calls: {value: 1, enforce: block}\n", "2:1: tab used for indentation"),
    "empty": ("# nothing but a comment\n", "1:1: the file is empty"),
    "boolean trap": (
        "limits:\n  max_save_calls_per_turn: {value: 2, enforce: off}\n",
        "2:48: `off` is read as a boolean by YAML 1.1",
    ),
    "bad enum": (
        "mode: enforse\n",
        "1:7: 'enforse' is not allowed here: expected 'enforce' or 'monitor' (did you mean 'enforce'?)",
    ),
    "bad trigger": (
        "mem_context:\n  unlocked_by:\n    post_compat: {scope: next_turn}\n",
        "3:5: unknown name 'post_compat'",
    ),
    "undefined tier": (
        "subagents:\n  agents:\n    validator: read-only\n",
        "tier(s) read-only are used but not defined",
    ),
    "not a mapping": ("- just\n- a list\n", "1:1: a policy is a mapping"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_kind_of_broken_file_is_rejected_with_its_location(env: Env, case: str) -> None:
    text, expected = BROKEN[case]
    path = env.write("team.yaml", text)
    out = env.cli("policy", "check", str(path))
    assert out.returncode == 1
    assert f"{path}:{expected}" in out.stderr or (expected in out.stderr and str(path) in out.stderr), out.stderr


def test_every_problem_is_reported_at_once(env: Env) -> None:
    path = env.write(
        "team.yaml",
        "mode: enforse\nlimits:\n  max_serch_calls: {value: 2, enforce: block}\n"
        "  max_full_fetches: {value: -3, enforce: block}\nmode: monitor\n",
    )
    out = env.cli("policy", "check", "--format", "json", str(path))
    assert out.returncode == 1
    problems = json.loads(out.stdout)["checked"][0]["problems"]
    assert [(p["line"], p["col"]) for p in problems] == [(1, 7), (3, 3), (4, 29), (5, 1)]


def test_rendered_markdown_is_current() -> None:
    rendered = subprocess.run(
        [sys.executable, "-m", "governor", "policy", "render"], capture_output=True, text=True, check=True
    ).stdout
    committed = (ROOT / "rules" / "memory-budget.md").read_text(encoding="utf-8")
    assert rendered == committed, (
        "rules/memory-budget.md is stale: run `memory-governor policy render -o rules/memory-budget.md`"
    )


def test_schema_is_current() -> None:
    generated = subprocess.run(
        [sys.executable, "-m", "governor", "policy", "schema"], capture_output=True, text=True, check=True
    ).stdout
    committed = (ROOT / "schemas" / "policy.schema.json").read_text(encoding="utf-8")
    assert generated == committed, "schemas/policy.schema.json is stale: run `memory-governor policy schema -o ...`"


def test_shipped_yaml_points_editors_at_the_schema() -> None:
    first = SHIPPED.read_text(encoding="utf-8").splitlines()[0]
    assert first == "# yaml-language-server: $schema=../schemas/policy.schema.json"
    schema = json.loads((ROOT / "schemas" / "policy.schema.json").read_text())
    assert {"limits", "ladder", "mem_context", "tools", "subagents", "save"} <= set(schema["properties"])


def _explain(sandbox: Env, **kw: object) -> dict[str, dict[str, str]]:
    data = sandbox.cli_json("policy", "explain", "--format", "json", **kw)  # type: ignore[arg-type]
    return {r["key"]: r for r in data["rules"]}


def test_team_policy_in_the_project_layers_over_the_default(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: {value: 1, enforce: block}\n")
    rules = _explain(env)
    assert "at most 1 L1 searches" in rules["limits.max_search_calls"]["statement"]
    assert rules["limits.max_search_calls"]["layer"] == "team"
    assert rules["limits.max_search_calls"]["source"].endswith(".memory-governor/policy.yaml:2")
    assert rules["limits.max_full_fetches"]["layer"] == "default"


def test_a_limit_written_as_a_number_is_its_value_and_keeps_the_action(env: Env) -> None:
    from tests.conftest import run_hook

    env.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: 3\n  max_memory_tokens_injected: 800\n")
    assert env.cli("policy", "check", ".memory-governor/policy.yaml").returncode == 0
    rules = _explain(env)
    assert "at most 3 L1 searches" in rules["limits.max_search_calls"]["statement"]
    assert rules["limits.max_search_calls"]["source"].endswith(".memory-governor/policy.yaml:2")
    diff = env.cli("policy", "diff", "--shipped", ".memory-governor/policy.yaml")
    assert "limits.max_search_calls.value: 2 -> 3" in diff.stdout and "enforce" not in diff.stdout
    search = {"hook_event_name": "PreToolUse", "session_id": "s", "prompt_id": "p", "cwd": str(env.project),
              "tool_name": "mcp__engram__mem_search", "tool_input": {"query": "q"}}  # fmt: skip
    denied = [run_hook(env, {**search, "tool_use_id": f"t{n}"}).denied for n in range(4)]
    assert denied == [False, False, False, True], "three searches, then refused: the action is still block"


@pytest.mark.parametrize("written", ["true", "'3'", "[3]"])
def test_a_limit_of_the_wrong_type_says_both_forms_to_write(env: Env, written: str) -> None:
    env.write(".memory-governor/policy.yaml", f"limits:\n  max_search_calls: {written}\n")
    out = env.cli("policy", "check", ".memory-governor/policy.yaml")
    assert out.returncode == 1
    assert (
        ":2:21: wrong type: expected a number (max_search_calls: 3) or the value and its action "
        "(max_search_calls: {value: 3, enforce: block})" in out.stderr
    ), out.stderr


def test_the_schema_takes_a_team_file_that_lists_only_what_it_changes() -> None:
    import jsonschema
    import yaml

    schema = json.loads((ROOT / "schemas" / "policy.schema.json").read_text())
    for text in ("limits:\n  max_search_calls: 3\n", "limits:\n  max_search_calls: {value: 3}\n",
                 "limits:\n  max_full_fetches: {enforce: warn}\n", "briefing:\n  max_tokens: 600\n"):  # fmt: skip
        jsonschema.validate(yaml.safe_load(text), schema)
    for wrong in ("limits:\n  max_search_calls: 'x'\n", "tools:\n  - servers: [engram]\n"):
        with pytest.raises(jsonschema.ValidationError):  # a list entry is whole: its own keys are required
            jsonschema.validate(yaml.safe_load(wrong), schema)


def test_discovery_order_env_then_project_then_user(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: {value: 1, enforce: block}\n")
    user = env.home / ".config" / "memory-governor" / "policy.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("limits:\n  max_full_fetches: {value: 0, enforce: block}\n")
    explicit = env.write("elsewhere.yaml", "mode: monitor\n")
    rules = _explain(env, env={"MEMORY_GOVERNOR_POLICY": str(explicit)})
    assert rules["mode"]["layer"] == "team" and "monitor" in rules["mode"]["statement"]
    assert rules["limits.max_search_calls"]["layer"] == "default"
    rules = _explain(env)
    assert rules["limits.max_search_calls"]["layer"] == "team"
    assert rules["limits.max_full_fetches"]["layer"] == "default"
    (env.project / ".memory-governor" / "policy.yaml").unlink()
    rules = _explain(env)
    assert rules["limits.max_full_fetches"]["layer"] == "team"
    assert str(user) in rules["limits.max_full_fetches"]["source"]


def test_project_is_found_from_a_subdirectory(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: {value: 1, enforce: block}\n")
    sub = env.project / "src" / "deep"
    sub.mkdir(parents=True)
    rules = _explain(env, cwd=sub)
    assert rules["limits.max_search_calls"]["layer"] == "team"


def test_local_override_may_tighten(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: {value: 3, enforce: block}\n")
    env.write(".memory-governor/policy.local.yaml", "limits:\n  max_search_calls: {value: 1, enforce: block}\n")
    out = env.cli("policy", "check")
    assert out.returncode == 0, out.stderr
    rules = _explain(env)
    assert rules["limits.max_search_calls"]["layer"] == "local"


def test_local_override_may_not_loosen(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: {value: 1, enforce: block}\n")
    local = env.write(
        ".memory-governor/policy.local.yaml",
        "mode: monitor\nlimits:\n  max_search_calls: {value: 5, enforce: block}\n",
    )
    out = env.cli("policy", "check")
    assert out.returncode == 1
    assert f"{local}:1:1: a local override may only tighten the team policy: mode is loosened" in out.stderr
    assert (
        f"{local}:3:22: a local override may only tighten the team policy: limits.max_search_calls.value" in out.stderr
    )


def test_local_override_may_loosen_what_the_team_allows(env: Env) -> None:
    env.write(
        ".memory-governor/policy.yaml",
        "loosen_allowed: [limits.max_search_calls]\nlimits:\n  max_search_calls: {value: 1, enforce: block}\n",
    )
    env.write(".memory-governor/policy.local.yaml", "limits:\n  max_search_calls: {value: 3, enforce: warn}\n")
    assert env.cli("policy", "check").returncode == 0
    env.write(".memory-governor/policy.local.yaml", "limits:\n  max_full_fetches: {value: 3, enforce: block}\n")
    assert env.cli("policy", "check").returncode == 1


def _diff(env: Env, old: str, new: str) -> tuple[int, dict[str, object]]:
    a, b = env.write("old.yaml", old), env.write("new.yaml", new)
    out = env.cli("policy", "diff", "--format", "json", str(a), str(b))
    return out.returncode, json.loads(out.stdout) if out.stdout else {}


def test_diff_of_a_tightening_exits_zero(env: Env) -> None:
    code, data = _diff(env, "version: 1\n", "limits:\n  max_memory_tokens_injected: {value: 800, enforce: block}\n")
    assert code == 0
    assert data["changes"] == [
        {
            "path": "limits.max_memory_tokens_injected.value",
            "kind": "tightened",
            "old": 1200,
            "new": 800,
            "note": "",
        }
    ]


def test_diff_of_a_loosening_exits_three(env: Env) -> None:
    code, data = _diff(env, "version: 1\n", "limits:\n  max_save_calls_per_turn: {value: 2, enforce: 'off'}\n")
    assert code == 3
    assert data["loosened"] == 1


def test_diff_reports_triggers_tiers_and_tool_mappings(env: Env) -> None:
    new = textwrap.dedent(
        """
        mem_context:
          unlocked_by:
            session_resume: null
            explicit_user_recall: null
        subagents:
          agents:
            validator: search-capable
        tools:
          - servers: [engram]
            map:
              mem_search: {role: search, limit_param: limit}
              search_nodes: {role: search}
        """
    )
    code, data = _diff(env, "version: 1\n", new)
    assert code == 3
    kinds = {(c["path"], c["kind"]) for c in data["changes"]}  # type: ignore[union-attr,index]
    assert ("mem_context.unlocked_by.session_resume", "tightened") in kinds
    assert ("mem_context.unlocked_by.explicit_user_recall", "tightened") in kinds
    assert ("subagents.agents.validator", "loosened") in kinds
    assert ("tools.plugin_engram_engram/mem_search", "loosened") in kinds
    assert ("tools.engram/mem_get_observation", "loosened") in kinds
    assert ("tools.engram/search_nodes", "tightened") in kinds


def test_diff_of_an_invalid_file_exits_one(env: Env) -> None:
    a, b = env.write("old.yaml", "version: 1\n"), env.write("new.yaml", "mode: nope\n")
    out = env.cli("policy", "diff", str(a), str(b))
    assert out.returncode == 1 and f"{b}:1:7:" in out.stderr


def test_installed_copy_finds_the_shipped_policy(tmp_path: Path) -> None:
    """A non-editable install (a wheel) carries the default policy and the schema."""
    from tests.conftest import build_wheel

    wheel = build_wheel(tmp_path / "wheels")
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    env = {
        "PYTHONPATH": str(target),
        "HOME": str(tmp_path),
        "MEMORY_GOVERNOR_STATE_DIR": str(tmp_path / "state"),
    }
    code = "import governor, governor.policy.sources as c; print(governor.__file__); print(c.shipped_policy_path())"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path, check=True
    )
    module, policy = out.stdout.split()
    assert module.startswith(str(target)) and policy.startswith(str(target))
    check = subprocess.run(
        [sys.executable, "-m", "governor", "policy", "check"],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert check.returncode == 0, check.stderr
    # the memory-need model is package data too: a prompt no pattern matches is decided by it
    explain = subprocess.run(
        [sys.executable, "-m", "governor", "classify", "the export job hangs at 99% like it did in spring",
         "--explain", "--format", "json"],
        env=env, capture_output=True, text=True, cwd=tmp_path, check=True,
    )  # fmt: skip
    assert json.loads(explain.stdout)["rule"]["via"] == "model", explain.stdout


def test_policy_check_compares_a_local_override_with_the_team_file_it_overrides(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: {value: 6, enforce: block}\n")
    local = env.write(
        ".memory-governor/policy.local.yaml", "limits:\n  max_search_calls: {value: 10, enforce: block}\n"
    )
    named = env.cli("policy", "check", str(local))
    whole = env.cli("policy", "check")
    for out in (named, whole):
        assert out.returncode == 1 and "max_search_calls.value is loosened (6 -> 10)" in out.stderr, out.stderr


@pytest.mark.hook_processes  # "compiled the policy": what one hook process imported
def test_a_policy_is_compiled_once_for_the_files_it_is_made_of_whichever_project_has_them(env: Env) -> None:
    """A new project whose files say what another project's said, and a file rewritten back to what
    it said before, take the compiled policy kept by content; a file that says something new is
    compiled, and its limits are in force at once."""
    from tests.conftest import Session

    kept = env.state / "cache" / "policies"
    for entry in [*kept.glob("*.json"), *kept.glob("*.forms")]:
        entry.unlink()  # linked from the ones the tests share: this test counts its own
    tight = "limits:\n  max_search_calls: {value: 1, enforce: block}\n"
    env.write(".memory-governor/policy.yaml", tight)
    other = Env(env.tmp / "other")  # another project on this machine: the same state directory
    other.vars["MEMORY_GOVERNOR_STATE_DIR"] = str(env.state)
    (other.project / ".memory-governor").mkdir()
    (other.project / ".memory-governor" / "policy.yaml").write_text(tight)
    trace = {"MEMORY_GOVERNOR_TRACE": "1"}

    def searches(sandbox: Env, session_id: str) -> tuple[list[bool], bool]:
        """(each of two searches in a new turn denied?, did a hook compile a policy?)"""
        session = Session(sandbox, session_id, extra_env=trace)
        answers = [session.prompt("what did we decide?")]
        answers += [session.pre("mem_search", query=q, limit=3) for q in ("a", "b")]
        return [a.denied for a in answers[1:]], any("compiled the policy" in a.stderr for a in answers)

    assert searches(env, "s-first") == ([False, True], True)
    assert len(list(kept.glob("*.json"))) == 1
    assert searches(other, "s-other") == ([False, True], False)  # the same files: not compiled again
    # Nor its prompt's patterns built again (~0.2 s of `re`): the other project's file of their
    # code is a copy of the one the first project's prompt wrote, kept beside the policies by content.
    forms = [*kept.glob("*.forms"), *(env.state / "policy").glob("*.forms")]
    assert len(forms) == 3 and len({f.read_bytes() for f in forms}) == 1, forms
    assert len({f.stat().st_ino for f in forms}) == 3, "each its own file"
    looser = "limits:\n  max_search_calls: {value: 2, enforce: block}\n"
    (other.project / ".memory-governor" / "policy.yaml").write_text(looser)  # loosened: held back until accepted
    other.accept()  # which compiles it
    assert searches(other, "s-looser")[0] == [False, False]
    assert len(list(kept.glob("*.json"))) == 2
    (other.project / ".memory-governor" / "policy.yaml").write_text(tight)  # back as it was: a new mtime only
    assert searches(other, "s-back") == ([False, True], False)
    env.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: {value: [, enforce: block}\n")
    assert searches(env, "s-broken")[0] == [False, True]  # the last valid policy; a broken one is never kept
    assert len(list(kept.glob("*.json"))) == 2


def test_what_is_kept_by_content_is_the_compile_of_the_bytes_its_key_was_made_from(tmp_path: Path, monkeypatch: Any
                                                                                   ) -> None:  # fmt: skip
    """A layer rewritten between reading it for the key and compiling it (the compile imports
    pydantic first: half a second) is compiled as it was read, the shipped default too; so what is
    kept under a key never says what the bytes hashed for it do not."""
    from governor.policy import content
    from governor.policy.sources import shipped_policy_path

    default = tmp_path / "memory-budget.yaml"
    shipped = Path(shipped_policy_path()).read_text(encoding="utf-8")
    default.write_text(shipped, encoding="utf-8")
    looser = shipped.replace("max_search_calls: {value: 2,", "max_search_calls: {value: 99,")
    assert looser != shipped
    state = tmp_path / "state"
    monkeypatch.setattr(content, "with_site_packages", lambda: default.write_text(looser, encoding="utf-8"))
    blob, problems = content.compile_layers(str(state), [("default", str(default))])
    assert blob is not None and not problems
    assert blob["policy"]["limits"]["max_search_calls"]["value"] == 2
    default.write_text(shipped, encoding="utf-8")  # as it was: the key of what was kept
    monkeypatch.setattr(content, "with_site_packages", lambda: None)
    again, _ = content.compile_layers(str(state), [("default", str(default))])
    assert again is not None and again["policy"]["limits"]["max_search_calls"]["value"] == 2


def test_the_policies_kept_by_content_are_only_in_a_folder_of_the_users_own(tmp_path: Path) -> None:
    """A link planted at state/cache/policies is not followed: nothing is read, kept or removed
    where it points (the oldest entries go when the folder is full), and the policy is compiled."""
    import os

    from governor.policy import content
    from governor.policy.sources import shipped_policy_path

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victims = {f"{n:064x}.json": f"victim {n}" for n in range(content.KEEP + 6)}
    for name, text in victims.items():
        (elsewhere / name).write_text(text)
    state = tmp_path / "state"
    (state / "cache").mkdir(parents=True, mode=0o700)
    (state / "cache" / "policies").symlink_to(elsewhere, target_is_directory=True)
    blob, _ = content.compile_layers(str(state), [("default", shipped_policy_path())])
    assert blob is not None and blob["policy"]["limits"]["max_search_calls"]["value"] == 2
    assert {p.name: p.read_text() for p in elsewhere.iterdir()} == victims
    os.chmod(state / "cache", 0o777)  # a folder others can write to: not used either
    (state / "cache" / "policies").unlink()
    assert content.compile_layers(str(state), [("default", shipped_policy_path())])[0] is not None
    assert not (state / "cache" / "policies").exists()


def test_caches_are_shared_only_as_this_users_own_files_and_none_is_replaced(tmp_path: Path) -> None:
    """content.share (a replay's scratch state and the caller's, both ways): this installation's
    tables and the files named as the policies folder names its own, never a link, never from a
    folder others can write to, and never over a file the target has."""
    import os

    from governor.engine import bpe
    from governor.policy.content import share

    source, target = tmp_path / "source", tmp_path / "target"
    kept = source / "cache" / "policies"
    kept.mkdir(parents=True)
    for level in (source, source / "cache", kept):
        level.chmod(0o700)
    table = bpe.file_name("o200k_base")
    (source / "cache" / table).write_bytes(b"table")
    (source / "cache" / "o200k_base-00000000.bpe").write_bytes(b"another installation's")
    ours, theirs, held = "a" * 64 + ".json", "b" * 64 + ".json", "c" * 64 + ".json"
    forms = "d" * 64 + ".30b07f0-20220615.forms"
    (kept / ours).write_text("{}")
    (kept / forms).write_bytes(b"forms")
    (tmp_path / "planted.json").write_text('{"planted": 1}')
    (kept / theirs).symlink_to(tmp_path / "planted.json")
    (kept / "notes.json").write_text("{}")
    (kept / held).write_text('{"new": 1}')
    (target / "cache" / "policies").mkdir(parents=True)
    (target / "cache" / "policies" / held).write_text('{"old": 1}')

    share(str(source), str(target))
    got = target / "cache" / "policies"
    assert sorted(os.listdir(got)) == sorted([ours, held, forms])
    assert (got / held).read_text() == '{"old": 1}', "a file the target has is never replaced"
    assert (target / "cache" / table).read_bytes() == b"table"
    assert sorted(p.name for p in (target / "cache").glob("*.bpe")) == [table]

    late = "e" * 64 + ".json"
    (kept / late).write_text("{}")
    kept.chmod(0o777)  # a folder anyone can write to: nothing of it is taken
    share(str(source), str(target))
    kept.chmod(0o700)
    assert not (got / late).exists()
    nothing = tmp_path / "no-state"
    share(str(nothing), str(target))  # no caches there: nothing to do, nothing made
    assert not nothing.exists()


def test_the_folder_kept_by_content_keeps_its_newest_of_each_kind_and_removes_nothing_else(tmp_path: Path) -> None:
    """Compiled policies and their patterns' code (one file per policy and interpreter) are each
    kept to the newest KEEP; a name that is not one of theirs is never removed."""
    import os

    from governor.policy import content
    from governor.policy.sources import shipped_policy_path

    state = tmp_path / "state"
    kept = state / "cache" / "policies"
    kept.mkdir(parents=True)
    for level in (state, state / "cache", kept):
        os.chmod(level, 0o700)
    policies = [f"{n:064x}.json" for n in range(content.KEEP + 3)]
    forms = [f"{n:064x}.30b07f0-20220615.forms" for n in range(content.KEEP + 5)]
    others = ["notes.txt", f"{0:063x}.json", f"{0:064x}-x.forms", f"{'g' * 64}.json"]
    for age, name in enumerate([*policies, *forms, *others]):
        (kept / name).write_text("x")
        os.utime(kept / name, (1000 + age, 1000 + age))
    assert content.compile_layers(str(state), [("default", shipped_policy_path())])[0] is not None
    left = {p.name for p in kept.iterdir()}
    assert set(others) <= left
    assert sorted(n for n in left if n in forms) == forms[-(content.KEEP - 1) :]
    assert len([n for n in left if n.endswith(".json") and n not in others]) == content.KEEP  # the newest, and its own


def test_an_entry_kept_by_content_that_is_not_whole_is_compiled_again(tmp_path: Path) -> None:
    from governor.policy import content
    from governor.policy.sources import shipped_policy_path

    state = tmp_path / "state"
    layers = [("default", shipped_policy_path())]
    first, _ = content.compile_layers(str(state), layers)
    (entry,) = (state / "cache" / "policies").glob("*.json")
    kept = json.loads(entry.read_text())
    del kept["index"]
    entry.write_text(json.dumps(kept))
    again, _ = content.compile_layers(str(state), layers)
    assert again == first and "index" in json.loads(entry.read_text())
