"""The learned memory-need model: reproducible weights, the fallback it gives the patterns, its
abstention threshold as a policy key, and that only a prompt no pattern matches loads it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from governor.engine import classify as classify_module
from governor.engine import need_model
from tests.conftest import HOOK, ROOT, Env, Session

SHIPPED = ROOT / "governor" / "engine" / "need_model.json"
SHIPPED_NEEDS = {
    "precedence": ["none", "similar_issue", "explicit_user_recall", "recent_session", "architecture_decision"],
    "default": "none",
    "model_threshold": 0.5,
    "cue_threshold": 2,
    "classes": {
        name: {"patterns": [], "cues": ["yesterday", "resume"] if name == "recent_session" else []}
        for name in ("none", "similar_issue", "explicit_user_recall", "recent_session", "architecture_decision")
    },
}


def test_retraining_reproduces_the_shipped_weights_byte_for_byte() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train_memory_needs.py"), "--check"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "reproduced byte for byte" in out.stdout


def test_the_shipped_model_says_what_it_was_trained_from() -> None:
    document = json.loads(SHIPPED.read_text(encoding="utf-8"))
    for source in document["trained_from"]:
        data = (ROOT / source["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == source["sha256"], f"{source['file']} changed: retrain"
    assert document["calibration"]["held_out_log_loss"] < document["calibration"]["uncalibrated_log_loss"]


@pytest.mark.parametrize(
    ("prompt", "need"),
    [
        ("The export job hangs at 99% like it did in spring, what did we change back then?", "similar_issue"),
        ("El job de exportación se cuelga en 99%, igual que en primavera", "similar_issue"),
        ("Good morning! Bring me up to speed on the invoice importer before I start.", "recent_session"),
        ("What notes do you hold about how I like commit messages written?", "explicit_user_recall"),
        ("¿Qué notas tienes de cómo me gusta escribir los commits?", "explicit_user_recall"),
        ("cambia el color del botón a azul", "none"),
    ],
)
def test_the_model_decides_what_no_pattern_matches(env: Env, prompt: str, need: str) -> None:
    data = env.cli_json("classify", prompt, "--format", "json", "--explain")
    assert data["memory_need"] == need, data
    assert data["rule"]["via"] == "model" and data["rule"]["pattern"] is None
    assert data["rule"]["score"] >= data["rule"]["threshold"] == 0.5
    assert next(iter(data["model"]["probabilities"])) == need


def test_a_pattern_still_wins_and_explain_shows_the_models_opinion(env: Env) -> None:
    data = env.cli_json("classify", "where did we leave off with the importer?", "--format", "json", "--explain")
    assert data["rule"]["via"] == "pattern"
    assert set(data["model"]["probabilities"]) == set(data["precedence"])
    text = env.cli("classify", "where did we leave off with the importer?", "--explain", check=True).stdout
    assert "decided by: pattern" in text and "model: recent_session" in text


def _score(env: Env, prompt: str) -> tuple[str, float]:
    data = env.cli_json("classify", prompt, "--format", "json", "--explain")
    return next(iter(data["model"]["probabilities"].items()))


def test_below_its_threshold_the_model_abstains_to_the_default(env: Env) -> None:
    prompt = "Good morning! Bring me up to speed on the invoice importer before I start."
    need, score = _score(env, prompt)
    assert need == "recent_session" and score < 0.99
    env.write(".memory-governor/policy.yaml", f"memory_needs:\n  model_threshold: {min(1.0, round(score + 0.01, 2))}\n")
    data = env.cli_json("classify", prompt, "--format", "json", "--explain")
    assert data["memory_need"] == "none" and data["rule"]["via"] == "default"
    assert "abstained" in data["rule"]["default"] and not data["model"]["decides"]
    text = env.cli("classify", prompt, "--explain", check=True).stdout
    assert f"the model abstained (recent_session {score:.2f} <" in text


def test_when_the_model_abstains_cue_words_come_next(env: Env) -> None:
    env.write(".memory-governor/policy.yaml", "memory_needs:\n  model_threshold: 0.9999\n")
    prompt = "New day. Remind me where the PDF generator stands and what we were about to try."
    data = env.cli_json("classify", prompt, "--format", "json", "--explain")
    assert data["rule"]["via"] == "cues" and data["memory_need"] == "recent_session", data


def test_a_local_override_may_raise_the_threshold_but_not_lower_it(env: Env) -> None:
    local = env.write(".memory-governor/policy.local.yaml", "memory_needs:\n  model_threshold: 0.8\n")
    assert env.cli("policy", "check").returncode == 0
    env.write(".memory-governor/policy.local.yaml", "memory_needs:\n  model_threshold: 0.2\n")
    out = env.cli("policy", "check")
    assert out.returncode == 1
    assert f"{local}:2:3: a local override may only tighten the team policy: memory_needs.model_threshold" in out.stderr
    env.write(".memory-governor/policy.local.yaml", "memory_needs:\n  model_threshold: 1.5\n")
    assert env.cli("policy", "check").returncode == 1


def test_the_hook_advises_what_the_model_decided(session: Session) -> None:
    answer = session.prompt("The export job hangs at 99% like it did in spring, what did we change back then?")
    assert answer.context == "memory_need=similar_issue: one mem_search (limit<=3) on the bug's domain namespace."


def _imported(env: Env, payload: dict[str, Any]) -> set[str]:
    """The modules a real hook process imports for one event (deciding in its own process)."""
    command = [HOOK[0], "-X", "importtime", *HOOK[1:]]
    proc = subprocess.run(command, input=json.dumps(payload).encode(), capture_output=True, env=env.vars,
                          cwd=str(env.project), timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    lines = proc.stderr.decode().splitlines()
    return {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:") and "|" in line}


def test_only_a_prompt_no_pattern_matches_loads_the_model(env: Env) -> None:
    base = {"session_id": "s1", "cwd": str(env.project), "transcript_path": "/dev/null"}
    unmatched = _imported(env, {**base, "hook_event_name": "UserPromptSubmit", "prompt": "cambia el color del botón"})
    assert "governor.engine.need_model" in unmatched
    matched = _imported(env, {**base, "hook_event_name": "UserPromptSubmit", "prompt": "where did we leave off?"})
    assert "governor.engine.classify" in matched and "governor.engine.need_model" not in matched
    tool = _imported(env, {**base, "hook_event_name": "PreToolUse", "tool_name": "mcp__engram__mem_search",
                           "tool_use_id": "t1", "tool_input": {"query": "q", "limit": 3}})  # fmt: skip
    assert "governor.engine.need_model" not in tool and "governor.engine.classify" not in tool


@pytest.fixture
def weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "need_model.json"
    shutil.copyfile(SHIPPED, path)
    monkeypatch.setattr(need_model, "WEIGHTS", str(path))
    monkeypatch.setattr(need_model, "_loaded", None)
    return path


def test_an_unreadable_weights_file_leaves_cue_words_and_the_default(weights: Path) -> None:
    weights.write_text("{not json", encoding="utf-8")
    verdict = classify_module.classify("resume what we did yesterday on the PDF generator", SHIPPED_NEEDS)
    assert verdict.need == "recent_session" and verdict.via == "cues"
    assert verdict.model is not None and verdict.model.error and "unavailable" in verdict.model.error
    weights.unlink()
    verdict = classify_module.classify("cambia el color del botón", SHIPPED_NEEDS)
    assert verdict.via == "default" and verdict.model is not None and "FileNotFoundError" in str(verdict.model.error)


def test_the_model_is_read_again_when_its_file_changes(weights: Path) -> None:
    first = need_model.load()
    assert need_model.load() is first
    document = json.loads(weights.read_text(encoding="utf-8"))
    document["bias"] = [0.0, 0.0, 0.0, 0.0, 50.0]  # everything explicit_user_recall
    weights.write_text(json.dumps(document), encoding="utf-8")
    os.utime(weights, ns=(1, 1))  # a new version even on a coarse clock
    second = need_model.load()
    assert second is not first
    assert next(iter(second.probabilities("cambia el color del boton"))) == "explicit_user_recall"


def test_a_model_file_of_another_format_is_refused(weights: Path) -> None:
    weights.write_text(json.dumps({"format": "something else"}), encoding="utf-8")
    with pytest.raises(ValueError, match="not a 'memory-governor need model 1' file"):
        need_model.load()


def test_a_pasted_log_is_read_by_its_head_and_tail() -> None:
    log = "why does this fail again? " + "frame 0x00ff in worker.c line 42 " * 30_000 + " same as last week?"
    found = need_model.features(log)
    assert found == need_model.features(log[: need_model.HEAD] + " " + log[-need_model.TAIL :])
    assert "w again" in found and "b last week" in found and len(found) < 3000


def test_the_same_prompt_gets_the_same_probabilities_in_every_process(env: Env) -> None:
    prompt = "Good morning! Bring me up to speed on the invoice importer before I start."
    runs = [
        env.cli_json("classify", prompt, "--format", "json", "--explain", env={"PYTHONHASHSEED": seed})["model"]
        for seed in ("1", "2")
    ]
    assert runs[0] == runs[1]


def test_doctor_reports_the_model(env: Env) -> None:
    out = env.cli("doctor")
    assert "memory-need model" in out.stdout and "features, 5 classes" in out.stdout, out.stdout


def test_the_fresh_held_out_set_was_never_trained_on() -> None:
    """tests/fixtures/memory_needs_fresh.jsonl measures prompts the model has not seen: it is not
    among the training sets, and none of its prompts is in them."""
    from governor.engine.classify import fold

    document = json.loads(SHIPPED.read_text(encoding="utf-8"))
    trained = [source["file"] for source in document["trained_from"]]
    assert "tests/fixtures/memory_needs_fresh.jsonl" not in trained
    seen = {
        fold(json.loads(line)["prompt"]) for file in trained for line in (ROOT / file).read_text().splitlines() if line
    }
    fresh = [
        json.loads(line) for line in (ROOT / "tests/fixtures/memory_needs_fresh.jsonl").read_text().splitlines() if line
    ]
    assert len(fresh) >= 150 and {row["lang"] for row in fresh} == {"en", "es"}
    assert not [row["prompt"] for row in fresh if fold(row["prompt"]) in seen]
