"""Asking for everything remembered: one decision for the mem_context trigger and the class,
through the installed hook, the CLI, and the labelled requests and near-misses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, Env, Session, installed_hook

DEV = ROOT / "tests" / "fixtures" / "recall_requests.jsonl"
SETS = sorted((ROOT / "tests" / "fixtures").glob("recall_*.jsonl"))


def _evaluate(env: Env, *args: str, policy: str | None = None) -> subprocess.CompletedProcess[str]:
    extra = {"MEMORY_GOVERNOR_POLICY": policy} if policy else {}
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "eval_recall.py"), *args],
        capture_output=True, text=True, env={**env.vars, **extra}, cwd=str(env.project), timeout=120,
    )  # fmt: skip


def test_no_near_miss_unlocks_and_requests_do_on_the_labelled_sets(env: Env) -> None:
    """The figures docs/classification.md gives for every labelled set together."""
    out = _evaluate(env, "--errors")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"over {sum(len(_rows(path)) for path in SETS)} prompts" in out.stdout
    assert "en: requests unlocked" in out.stdout and "es: requests unlocked" in out.stdout
    assert "near-misses unlocked 0/" in out.stdout


def test_a_near_miss_that_unlocks_fails_the_evaluation(env: Env) -> None:
    """A team phrase that is too broad: the near-miss "search all files for TODO comments" unlocks."""
    policy = env.write(
        "broad.yaml", "mem_context:\n  unlocked_by:\n    explicit_user_recall:\n      scope: this_turn\n"
        "      phrases: [all files]\n",
    )  # fmt: skip
    out = _evaluate(env, str(DEV), "--errors", policy=str(policy))
    assert out.returncode == 1, out.stdout
    assert "near-miss(es) unlock mem_context" in out.stderr
    assert "false unlock (search): 'search all files for TODO comments'" in out.stdout


def test_too_few_requests_unlocking_fails_the_evaluation(env: Env) -> None:
    out = _evaluate(env, str(DEV), "--min-recall", "1.01")
    assert out.returncode == 1 and "below 101%" in out.stderr


def _rows(path: object) -> list[dict[str, object]]:
    return [json.loads(line) for line in open(str(path), encoding="utf-8") if line.strip()]


@pytest.mark.parametrize("path", SETS, ids=[path.stem for path in SETS])
def test_an_unlock_is_always_the_explicit_recall_class(path: object, tmp_path: Path) -> None:
    """The class and the trigger are one decision: no "memory_need: none ... unlocks mem_context"."""
    from governor.engine.recall import judge
    from governor.policy import compiled

    policy, _ = compiled.load({}, str(tmp_path), str(tmp_path / "state"))
    for row in _rows(path):
        verdict, recall = judge(str(row["prompt"]), policy.data["memory_needs"], policy.recall_phrases)
        assert not recall.unlocks or verdict.need == "explicit_user_recall", (row, verdict.need, recall.why)


def test_explain_says_why_a_prompt_unlocks_or_not_consistent_with_its_class(env: Env) -> None:
    asks = env.cli_json("classify", "bring me up to speed with all the stored context", "--format", "json", "--explain")
    assert asks["unlocks_mem_context"] and asks["memory_need"] == "explicit_user_recall", asks
    assert "all the stored" in asks["recall"]["why"]
    about = env.cli_json("classify", "how large is the full context of this model?", "--format", "json", "--explain")
    assert not about["unlocks_mem_context"] and about["memory_need"] == "none", about
    assert "question about the words themselves" in about["recall"]["why"]
    text = env.cli("classify", "¿qué es la memoria completa?", "--explain", check=True).stdout
    assert "memory_need: none" in text and "unlocks mem_context: no (" in text, text
    said = env.cli("classify", "cárgame todo lo que tengas guardado del proyecto", check=True).stdout
    assert "memory_need: explicit_user_recall" in said and "unlocks mem_context: yes (" in said, said


def test_a_team_phrase_still_unlocks_and_guards_still_apply(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "mem_context:\n  unlocked_by:\n    explicit_user_recall:\n"
              "      scope: this_turn\n      phrases: [brain dump]\n")  # fmt: skip
    team = env.cli_json("classify", "brain dump please", "--format", "json", "--explain")
    assert team["unlocks_mem_context"] and team["memory_need"] == "explicit_user_recall", team
    assert not env.cli_json("classify", "no brain dump today, just the JWT note", "--format", "json")[
        "unlocks_mem_context"
    ]
    # The shipped words are no longer the only way in: the ask is recognised without its phrases.
    assert env.cli_json("classify", "recall everything stored for this repo", "--format", "json")["unlocks_mem_context"]


@pytest.mark.parametrize(
    ("prompt", "unlocked"),
    [
        ("go through everything our memory holds on this repo", True),
        ("cárgame todo lo que tengas guardado del proyecto", True),
        ("how large is the full context of this model?", False),
        ("do NOT load the full memory, just search for the JWT decision", False),
        ("add a test for the `--full-context` flag of the CLI", False),
    ],
)
def test_the_installed_hook_unlocks_mem_context_only_on_an_ask_for_everything(
    env: Env, prompt: str, unlocked: bool
) -> None:
    session = Session(env, "sess-recall", command=installed_hook(env))
    answer = session.prompt(prompt)
    assert ("explicit recall requested" in answer.context) == unlocked, answer.context
    context = session.pre("mem_context", project="myapp")
    assert context.denied != unlocked, context.reason
    if unlocked:
        assert session.pre("mem_context", project="myapp").denied, "allowed once"
    else:
        # The model is told in one line; the user is told, once, what would unlock it.
        assert "the user's own prompt asks for everything remembered" in context.message, context.message
