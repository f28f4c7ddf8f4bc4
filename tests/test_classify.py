"""Memory-need classification: the CLI, the hook's use of it, topic keys, and the evaluation gate."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT, Env, Session


@pytest.mark.parametrize(
    ("prompt", "need"),
    [
        ("fix the typo in README.md", "none"),
        ("remember to run the tests before you commit", "none"),
        ("add a continue statement when the row is empty", "none"),
        ("where did we leave off with the importer?", "recent_session"),
        ("¿En qué quedamos con la migración de pagos?", "recent_session"),
        ("the checkout test is flaky again, we had this before", "similar_issue"),
        ("otra vez el mismo error de certificados en CI", "similar_issue"),
        ("design a rate limiter for the public API", "architecture_decision"),
        ("¿deberíamos migrar de Redis a Valkey?", "architecture_decision"),
        ("remember when we picked the queue library?", "explicit_user_recall"),
        ("¿qué sabes del pipeline de despliegue?", "explicit_user_recall"),
    ],
)
def test_classify_command(env: Env, prompt: str, need: str) -> None:
    data = env.cli_json("classify", prompt, "--format", "json")
    assert data["memory_need"] == need, data


def test_explain_names_the_rule_that_matched(env: Env) -> None:
    data = env.cli_json("classify", "where did we leave off?", "--format", "json", "--explain")
    assert data["rule"]["matched"] == "where did we leave"
    assert "where" in data["rule"]["pattern"]
    learned = env.cli_json("classify", "rename foo to bar", "--format", "json", "--explain")
    assert learned["rule"]["pattern"] is None and learned["rule"]["via"] == "model", learned
    env.write(".memory-governor/policy.yaml", "memory_needs:\n  model_threshold: 1\n")
    default = env.cli_json("classify", "rename foo to bar", "--format", "json", "--explain")
    assert default["rule"]["via"] == "default" and "default" in default["rule"]["default"]


def test_text_output_gives_class_action_and_namespaces(env: Env) -> None:
    out = env.cli("classify", "what did we decide about the cache?", check=True).stdout
    assert "memory_need: recent_session" in out and "namespaces: session/, state/wave/" in out


def test_recall_phrases_are_reported_as_unlocking_mem_context(env: Env) -> None:
    assert env.cli_json("classify", "recordar todo del proyecto", "--format", "json")["unlocks_mem_context"]
    assert not env.cli_json("classify", "remember when we chose JWT?", "--format", "json")["unlocks_mem_context"]


def test_the_hook_advises_the_recommended_namespaces(session: Session) -> None:
    answer = session.prompt("¿en qué quedamos ayer con el importador?")
    assert answer.context == "memory_need=recent_session: one mem_search (limit<=3) on session/ or state/wave/."


def test_policy_can_deny_retrieval_for_a_turn_that_needs_no_memory(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", "memory_needs:\n  on_none: deny\n")
    session.prompt("fix the typo in the README")
    answer = session.pre("mem_search", query="readme", limit=3)
    assert answer.denied and "memory_need=none" in answer.reason
    assert not session.pre("mem_save", title="t", content="Use X because Y.", type="decision").denied
    session.prompt("what did we decide about the cache?")
    assert not session.pre("mem_search", query="cache", limit=3).denied


def test_topic_keys_outside_the_namespace_contract_warn(session: Session) -> None:
    session.prompt("save it")
    good = session.pre(
        "mem_save", title="a", content="Use X because Y.", type="decision", topic_key="billing/invoices/decision"
    )
    assert not good.denied and good.silent
    bad = session.pre("mem_save", title="b", content="Use X because Y.", type="decision", topic_key="Misc Stuff!!")
    assert not bad.denied and "outside the namespace contract" in bad.message


def test_topic_keys_can_be_enforced(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", "save:\n  topic_keys: block\n")
    session.prompt("save it")
    bad = session.pre("mem_save", title="b", content="Use X because Y.", type="decision", topic_key="stuff")
    assert bad.denied and "state/wave/add-jwt-auth/2" in bad.reason


def _evaluate(env: Env, *args: str, policy: str | None = None) -> subprocess.CompletedProcess[str]:
    extra = {"MEMORY_GOVERNOR_POLICY": policy} if policy else {}
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "eval_memory_needs.py"), *args],
        capture_output=True, text=True, env={**env.vars, **extra}, cwd=str(env.project), timeout=120,
    )  # fmt: skip


def test_the_classifier_meets_its_target_on_the_labelled_sets(env: Env) -> None:
    out = _evaluate(env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "memory_needs.jsonl" in out.stdout


def test_the_classifier_meets_its_target_on_the_fresh_held_out_set(env: Env) -> None:
    """The figures docs/classification.md gives for prompts the model and the rules never saw."""
    fresh = str(ROOT / "tests" / "fixtures" / "memory_needs_fresh.jsonl")
    out = _evaluate(env, fresh, "--min-macro-f1", "0.9", "--min-class-f1", "0.8")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "over 160 prompts from memory_needs_fresh.jsonl" in out.stdout


def test_the_evaluation_fails_below_a_class_target(env: Env) -> None:
    fresh = str(ROOT / "tests" / "fixtures" / "memory_needs_fresh.jsonl")
    out = _evaluate(env, fresh, "--min-macro-f1", "0", "--min-class-f1", "0.99")
    assert out.returncode == 1 and "F1" in out.stderr and "is below 0.99" in out.stderr


def test_the_evaluation_fails_below_the_target(env: Env) -> None:
    classes = "".join(
        f"    {name}:\n      patterns: []\n"
        for name in ("recent_session", "similar_issue", "architecture_decision", "explicit_user_recall")
    )
    policy = env.write("weak.yaml", "memory_needs:\n  model_threshold: 1\n  classes:\n" + classes)
    out = _evaluate(env, policy=str(policy))
    assert out.returncode == 1 and "below 0.9" in out.stderr


def test_cue_words_classify_what_no_pattern_matches(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "memory_needs:\n  model_threshold: 1\n")  # cues come after the model
    prompt = "New day. Remind me where the PDF generator stands and what we were about to try."
    data = env.cli_json("classify", prompt, "--format", "json", "--explain")
    assert data["memory_need"] == "recent_session"
    assert data["rule"]["via"] == "cues" and "remind me" in data["rule"]["cues"]
    one_cue = env.cli_json("classify", "remind me how list comprehensions work", "--format", "json", "--explain")
    assert one_cue["memory_need"] == "none" and one_cue["rule"]["via"] == "default", "one cue is below the threshold"


def _shipped_needs() -> tuple[dict, dict]:
    import yaml

    from governor.engine.rules import index

    with open(ROOT / "rules" / "memory-budget.yaml", encoding="utf-8") as handle:
        policy = yaml.safe_load(handle)
    return policy["memory_needs"], index(policy)["pattern_words"]


def _labelled_prompts() -> list[str]:
    import json

    prompts = []
    for path in sorted((ROOT / "tests" / "fixtures").glob("memory_needs*.jsonl")):
        prompts += [json.loads(line)["prompt"] for line in path.read_text(encoding="utf-8").splitlines() if line]
    return prompts


def test_a_pattern_is_passed_over_only_when_it_cannot_match() -> None:
    """Every match of every shipped pattern, on every labelled prompt, holds one of the words the
    compiled policy requires of it; and classifying with the words gives the same verdicts."""
    import re

    from governor.engine.classify import classify, fold, strip_accents

    needs, words = _shipped_needs()
    patterns = [p for need in needs["classes"].values() for p in need.get("patterns", [])]
    assert all(words[p] for p in patterns), "a shipped pattern with nothing required is compiled on every prompt"
    prompts = _labelled_prompts()
    matched = 0
    for pattern in patterns:
        regex = re.compile(strip_accents(pattern), re.I)
        for prompt in prompts:
            text = fold(prompt)
            if regex.search(text):
                matched += 1
                assert any(word in text for word in words[pattern]), (pattern, prompt, words[pattern])
    assert matched > len(prompts) // 2
    for prompt in [*prompts, "ın the mıddle of the import", "ſame error again", "DESIGN a rate limiter"]:
        fast, full = classify(prompt, needs, words), classify(prompt, needs)
        assert (fast.need, fast.pattern, fast.via) == (full.need, full.pattern, full.via), prompt


@pytest.mark.parametrize(
    ("pattern", "text", "absent"),
    [
        (r"\bwhere were we\b", "where were we with it", False),
        (r"\bwhere were we\b", "what were we doing", True),
        (r"\b(?:typo|spelling)s?\b", "fix the spellings", False),
        (r"^(?=.*\?)(?=.*\bshould\b).*\b\w+ (?:or|o) \w+", "redis or valkey?", False),
        (r"\bx{2,}\b|\b[a-z]+ing\b", "running", False),  # a class in one branch: nothing required
        (r"\bin the middle of\b", "ın the mıddle of", True),  # re.I: a dotless i matches "i", so no skipping
    ],
)
def test_required_words_of_a_pattern(pattern: str, text: str, absent: bool) -> None:
    """The verdict is the regex's own, whether the required words are there or not."""
    import re

    from governor.engine.classify import classify, fold, required

    words = required(pattern)
    needs = {"precedence": ["x"], "default": "none", "model_threshold": 1,
             "classes": {"x": {"patterns": [pattern]}, "none": {"patterns": []}}}  # fmt: skip
    verdict = classify(text, needs, {pattern: words})
    assert (verdict.need == "none") == (re.search(pattern, fold(text), re.I) is None)
    assert absent == (words is not None and not any(w in fold(text) for w in words)), words
