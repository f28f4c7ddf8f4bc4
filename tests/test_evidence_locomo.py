"""The evidence harness (scripts/evidence_locomo.py): LoCoMo's conversations as an Engram-shaped memory,
agents played through the installed Claude Code hook, ungoverned and governed; a small sample of it
here (the full run, and its figures, are in docs/evidence.md)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import evidence_locomo as harness

DATA = harness.find_data(None)


def _published(tmp_path: Path) -> Path:
    """A conversation in the shape LoCoMo publishes (locomo10.json: a list of samples)."""
    sample = {
        "sample_id": "conv-1",
        "conversation": {"speaker_a": "Ana", "speaker_b": "Ben", "session_1_date_time": "1:56 pm on 8 May, 2023",
                         "session_2_date_time": "10:00 am on 9 May, 2023"},
        "observation": {
            "session_1_observation": {"Ana": [["Ana adopted a beagle named Pixel.", "D1:3"]],
                                      "Ben": [["Ben works at a bakery in Porto.", ["D1:4", "D1:5"]]]},
            "session_2_observation": {"Ana": [["Ana took Pixel to a dog show.", "D2:1"]]},
        },
        "session_summary": {"session_1_summary": "Ana and Ben met.", "session_2_summary": "A dog show."},
        "qa": [{"question": "What is the name of Ana's dog?", "answer": "Pixel", "evidence": ["D1:3"], "category": 4},
               {"question": "Where does Ben work?", "answer": "Porto", "evidence": ["D1:5", "D9:9"], "category": 1},
               {"question": "What did Ana say on the phone?", "evidence": ["D7:1"], "category": 5}],
    }  # fmt: skip
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([sample]))
    return path


def test_the_published_shape_loads_and_a_question_keeps_only_evidence_a_fact_holds(tmp_path: Path) -> None:
    [conversation] = harness.load(_published(tmp_path))
    assert conversation.name == "conv-1" and conversation.dates[1] == "2023-05-08 13:56:00"
    assert [(f.dia, f.speaker) for f in conversation.facts] == [("D1:3", "Ana"), ("D1:4", "Ben"), ("D1:5", "Ben"),
                                                                ("D2:1", "Ana")]  # fmt: skip
    assert [(q.number, q.evidence) for q in conversation.questions] == [(0, ["D1:3"]), (1, ["D1:5"])]
    store = harness.LocomoStore(conversation)
    [best, *_] = store.search("Ana beagle", "", "", "", 10)
    assert best["content"] == "Ana adopted a beagle named Pixel." and best["title"] == "Ana (2023-05-08)"
    notes = harness.LocomoStore(conversation, notes="session")
    assert [o["content"] for o in notes.observations][:1] == ["Ana adopted a beagle named Pixel."]
    assert notes.dias[2] == {"D1:4", "D1:5"}, "one note per speaker and session holds each of its facts"


def test_without_the_data_it_says_so_and_measures_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert harness.main(["--data", str(tmp_path / "absent.zip"), "--styles", "frugal", "--policies", ""]) == 2
    assert "LoCoMo data not found" in capsys.readouterr().err


def test_an_agent_of_your_own_is_played_like_the_shipped_ones(tmp_path: Path) -> None:
    agent = tmp_path / "mine.py"
    agent.write_text("def ask(question, memory):\n    memory.search(question, limit=2)\n")
    name, play = harness.agent_from(f"{agent}:ask")
    [conversation] = harness.load(_published(tmp_path))
    corpus = harness.Corpus([conversation], "v1", "fact")
    run = harness.play(corpus, conversation.questions[:1], play, name, None, 1)
    assert name == "mine.ask" and run.found == [True] and run.tokens[0] > 0


@pytest.mark.skipif(DATA is None and not os.environ.get("CI"), reason="LoCoMo's data is not on this machine")
def test_a_sample_through_the_installed_hook_keeps_the_evidence_for_a_third_of_the_tokens(tmp_path: Path) -> None:
    assert DATA is not None, "LoCoMo's data (shared/data/locomo/locomo10.zip above the checkout, or LOCOMO_DATA)"
    out = tmp_path / "figures.json"
    code = harness.main(["--questions", "1", "--seed", "5", "--styles", "greedy", "--policies", "shipped",
                         "--json", str(out)])  # fmt: skip
    assert code == 0
    [results] = json.loads(out.read_text())
    row: dict[str, Any] = results["styles"]["greedy"]["shipped"]
    assert results["questions"] == 10
    assert row["token_share"] <= 33 and row["kept"] >= 85, row
    assert sum(row["memory_needs"].values()) == 10, "every question went through the hook's UserPromptSubmit"
    assert row["refused_as_memory_need_none"] == 0, "memory_need=none advises; it refuses nothing"
    assert results["brief"]["recall"] >= 70 and results["brief"]["tokens"] <= 1200
