"""For team leads: report (table, JSON, HTML in a real browser), replay, and scenario tests."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from governor.review.replay import steps
from tests.conftest import ROOT, Env, Session, fixture_text

TRANSCRIPTS = ROOT / "tests" / "fixtures" / "transcripts"
SEARCH = fixture_text("engram/search_v1.txt")


def busy_session(session: Session) -> None:
    """Two turns with clamps, a denial, a trim and advice."""
    session.prompt("what did we decide about caching?")
    session.call("mem_search", SEARCH, query="cache", limit=10)
    big = "Found 3 memories:\n\n" + "".join(
        f"[{i}] #{100 + i} (decision) — D{i}\n    {'word ' * 400}\n    2025-03-01 10:00:00 | project: a | scope: project\n\n"
        for i in range(1, 4)
    )
    session.call("mem_search", big, query="more", limit=3)
    session.pre("mem_search", query="again", limit=3)
    session.prompt("now fix the typo in README")
    session.pre("mem_context")


def test_report_shows_per_turn_usage_denials_and_savings(env: Env, session: Session) -> None:
    busy_session(session)
    data = env.cli_json("report", "--format", "json")
    assert data["unit"] == "o200k_base" and data["budget"] == 1200
    first, second = data["turns"]
    assert first["usage"]["max_search_calls"] == 2 and first["denied"] == 1 and first["trimmed"] == 1
    assert 0 < first["usage"]["max_memory_tokens_injected"] <= 1200
    assert first["tokens_saved"] > 0
    assert "max_search_calls" in first["at_limit"]
    assert second["denied"] == 1
    assert data["denials_by_reason"] == {"max_search_calls": 1, "mem_context_locked": 1}
    assert data["agents_most_denied"] == [{"agent_type": "(main agent)", "denied": 2}]
    table = env.cli("report", check=True).stdout
    assert "2 turn(s)" in table and "denials by reason: max_search_calls 1, mem_context_locked 1" in table


def test_report_shows_each_turn_against_the_limits_in_force_at_that_turn(env: Env, session: Session) -> None:
    session.prompt("what did we decide about caching?")
    session.pre("mem_search", query="cache", limit=3)
    env.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: {value: 1, enforce: block}\n")
    session.prompt("and about the queue?")  # a tightening is in force at once
    session.pre("mem_search", query="queue", limit=3)
    first, second = env.cli_json("report", "--format", "json")["turns"]
    assert (first["limits"]["max_search_calls"], second["limits"]["max_search_calls"]) == (2, 1)
    assert first["policy"] != second["policy"]
    assert "max_search_calls" not in first["at_limit"] and "max_search_calls" in second["at_limit"]
    rows = env.cli("report", check=True).stdout.splitlines()[1:3]
    assert " 1/2 " in rows[0] and " 1/1 " in rows[1], rows


def test_report_filters_by_session_and_date(env: Env, session: Session) -> None:
    busy_session(session)
    other = Session(env, "other-session")
    other.prompt("where did we leave off?")
    assert len(env.cli_json("report", "--format", "json")["turns"]) == 3
    assert len(env.cli_json("report", "--format", "json", "--session", "other-session")["turns"]) == 1
    assert env.cli_json("report", "--format", "json", "--since", "2999-01-01")["turns"] == []
    assert env.cli("report", "--since", "yesterday").returncode == 2


def test_monitor_mode_would_be_decisions_appear_in_the_report(env: Env, session: Session) -> None:
    env.write(".memory-governor/policy.yaml", "mode: monitor\n")
    busy_session(session)
    data = env.cli_json("report", "--format", "json")
    assert data["totals"]["denied"] == 0 and data["totals"]["would_deny"] == 2
    assert data["monitor_would_deny_by_reason"] == {"max_search_calls": 1, "mem_context_locked": 1}


def test_the_audit_trail_holds_no_prompts_or_memory(env: Env, session: Session) -> None:
    secret_prompt = "what did we decide about the ZEBRA-PROMPT-7731 rollout?"
    session.prompt(secret_prompt)
    session.call("mem_search", SEARCH.replace("Replaced express-session", "Replaced ZEBRA-MEMORY-5521"), query="zebra")
    for path in env.state.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert b"ZEBRA" not in data, f"{path} holds prompt or memory text"


# -- the HTML report in a real browser ----------------------------------------------------------


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("chromium is required in CI (.ci/run installs Debian's chromium)")
    pytest.skip("chromium is not installed (apt-get install chromium)")


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and RGBA rows of an 8-bit non-interlaced PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, colour = 8, b"", 0, 0, 6
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    channels = {6: 4, 2: 3}[colour]
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b = prev[x]
            c = prev[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(
            bytes(line) if channels == 4 else b"".join(bytes(line[i : i + 3]) + b"\xff" for i in range(0, stride, 3))
        )
        prev = line
    return width, height, rows


def count_colour(rows: list[bytes], rgb: tuple[int, int, int], tolerance: int = 12) -> int:
    hits = 0
    for row in rows:
        for i in range(0, len(row), 4):
            if all(abs(row[i + k] - rgb[k]) <= tolerance for k in range(3)):
                hits += 1
    return hits


def test_the_html_report_renders_its_chart_in_a_real_browser(env: Env, session: Session, tmp_path: Path) -> None:
    """Each turn's bar (what was delivered, and above it what was held back) against the budget in
    force in that turn, with labelled axes; a session's start is no turn."""
    import re

    browser = chromium()
    session.start()
    busy_session(session)  # turns 1 and 2, at the shipped 1200
    env.write(".memory-governor/policy.yaml", "limits:\n  max_memory_tokens_injected: 800\n")  # tightened
    busy_session(session)  # turns 3 and 4, at 800
    page = tmp_path / "report.html"
    env.cli("report", "--format", "html", "-o", str(page), check=True)
    text = page.read_text()
    assert "<script" not in text and "http://" not in text.replace("http://www.w3.org/2000/svg", ""), "self-contained"
    dom = subprocess.run([browser, *CHROMIUM_FLAGS, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout  # fmt: skip
    assert 'id="tokens-chart"' in dom and dom.count('class="bar"') == 4, "four turns: the session's start is none"
    ticks = re.findall(r'text-anchor="middle">([^<]+)</text>', dom)
    assert ticks[:4] == ["1", "2", "3", "4"], ticks
    assert "memory tokens (o200k_base)" in dom and "turn (its number in its session" in dom, "both axes labelled"
    budgets = re.findall(r'<line class="budget"[^>]*y1="([\d.]+)"[^>]*><title>([^<]+)</title>', dom)
    assert [title.rsplit(" ", 1)[1] for _, title in budgets] == ["1200", "1200", "800", "800"], budgets
    assert budgets[0][0] == budgets[1][0] != budgets[2][0] == budgets[3][0], "the line steps where the policy changed"
    held = re.findall(r'<rect class="(held|deduped)"[^>]*><title>turn (\d) of [^<]*?: (\d+) held back', dom)
    # Turn 1 trimmed; turn 3 found again what turn 1 delivered, and both left out the hits' date lines
    # (snippets only: a few tokens each, drawn as held back).
    assert {(kind, turn) for kind, turn, _ in held} == {("held", "1"), ("held", "3"), ("deduped", "3")}, held
    amounts = {(kind, turn): int(n) for kind, turn, n in held}
    assert amounts[("held", "3")] < amounts[("deduped", "3")] / 5 < amounts[("held", "1")], held
    shot = tmp_path / "shot.png"
    subprocess.run([browser, *CHROMIUM_FLAGS, f"--screenshot={shot}", "--window-size=1000,700", page.as_uri()],
                   capture_output=True, timeout=120)  # fmt: skip
    width, height, rows = decode_png(shot.read_bytes())
    assert (width, height) == (1000, 700)
    assert count_colour(rows, (0x2E, 0x86, 0xDE)) > 500, "the bars are drawn"
    assert count_colour(rows, (0xF5, 0xB7, 0xB1)) > 300, "what was trimmed is drawn above them"
    assert count_colour(rows, (0xE6, 0x7E, 0x22)) > 300, "the budget line is drawn"
    table = env.cli_json("report", "--format", "json")
    assert table["totals"]["turns"] == 4 and all(t["turn_number"] for t in table["turns"])


# -- replay --------------------------------------------------------------------------------------


def test_replay_reports_turns_and_totals(env: Env) -> None:
    data = env.cli_json("replay", str(TRANSCRIPTS / "ungoverned-session.jsonl"), "--format", "json")
    assert [t["turn"] for t in data["turns"]] == [1, 2]
    for key in ("calls", "denied", "clamped", "trimmed", "tokens_before", "tokens_after", "tokens_saved"):
        assert key in data["totals"]
    assert data["totals"]["calls"] == 6
    assert data["totals"]["tokens_saved"] == data["totals"]["tokens_before"] - data["totals"]["tokens_after"]
    turn2 = [d["tool"].split("__")[-1] + ":" + d["decision"] for d in data["turns"][1]["decisions"]]
    assert turn2[0] == "mem_context:deny", "the recorded resume came seconds later: not a break"


def test_replay_uses_the_transcripts_own_clock(env: Env) -> None:
    """The same session with its second run two hours later: the resume now unlocks mem_context."""
    from datetime import datetime, timedelta

    lines = (TRANSCRIPTS / "ungoverned-session.jsonl").read_text().splitlines()
    shifted, later = [], False
    for line in lines:
        record = json.loads(line)
        if later and "timestamp" in record:
            moment = datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00")) + timedelta(hours=2)
            record["timestamp"] = moment.isoformat().replace("+00:00", "Z")
        later = later or record.get("type") == "last-prompt"
        shifted.append(json.dumps(record))
    path = env.write("later.jsonl", "\n".join(shifted) + "\n")
    data = env.cli_json("replay", str(path), "--format", "json")
    first = data["turns"][1]["decisions"][0]
    assert first["tool"].endswith("mem_context") and first["decision"] in (
        "allow",
        "clamp",
        "trim",
    )  # clamp: asked for what fits


def test_replay_follows_subagent_side_chains(env: Env) -> None:
    data = env.cli_json("replay", str(TRANSCRIPTS / "subagent-session.jsonl"), "--format", "json")
    decisions = [(d["agent_type"], d["tool"].split("__")[-1], d["decision"]) for d in data["turns"][0]["decisions"]]
    assert ("validator", "mem_search", "deny") in decisions
    assert ("validator", "mem_save", "allow") in decisions


def test_replay_compares_two_policies(env: Env) -> None:
    tight = env.write("tight.yaml", "limits:\n  max_memory_tokens_injected: {value: 300, enforce: block}\n")
    data = env.cli_json(
        "replay", str(TRANSCRIPTS / "ungoverned-session.jsonl"), "--compare", str(tight), "--format", "json"
    )
    default, strict = (p["totals"] for p in data["policies"])
    assert strict["tokens_after"] < default["tokens_after"] and strict["tokens_saved"] > default["tokens_saved"]


def test_replay_decides_as_the_live_hook_does(env: Env) -> None:
    """The same session, played through the hook process event by event, gets the same decisions."""
    path = TRANSCRIPTS / "ungoverned-session.jsonl"
    replayed = env.cli_json("replay", str(path), "--format", "json")
    expected = [(d["call_id"], d["decision"]) for t in replayed["turns"] for d in t["decisions"]]
    live = Session(env, "live-replay-check")
    outcomes: dict[str, str] = {}
    results: dict[str, str] = {}
    for step in steps(str(path)):
        if step.kind == "start":
            live.start(step.args[0])
        elif step.kind == "prompt":
            live.prompt(step.args[0])
        elif step.kind == "pre":
            call = step.args[0]
            answer = live.pre(call.tool_name, call.call_id, **call.tool_input)
            outcomes[call.call_id] = "deny" if answer.denied else "clamp" if answer.updated_input else "allow"
            results[call.call_id] = call.tool_name
        elif step.kind == "post" and outcomes.get(step.args[0]) not in (None, "deny"):
            answer = live.post(results[step.args[0]], step.args[0], step.args[1])
            if answer.output is not None and outcomes[step.args[0]] == "allow":
                outcomes[step.args[0]] = "trim"
    assert [(cid, outcomes[cid]) for cid, _ in expected] == expected


def test_a_transcript_that_is_not_jsonl_is_located(env: Env) -> None:
    bad = env.write("bad.jsonl", '{"type": "user"}\nnot json\n')
    out = env.cli("replay", str(bad))
    assert out.returncode == 1 and f"{bad}:2: not JSON" in out.stderr


# -- scenario tests ------------------------------------------------------------------------------


def test_the_shipped_policy_scenarios_pass(env: Env, tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    out = env.cli("test", str(ROOT / "tests" / "scenarios" / "shipped-policy.yaml"), "--junit", str(junit))
    assert out.returncode == 0, out.stdout
    assert "4 passed, 0 failed" in out.stdout
    assert 'tests="4" failures="0"' in junit.read_text()


def test_a_scenario_that_no_longer_holds_fails_with_the_step(env: Env, tmp_path: Path) -> None:
    scenario = env.write("s.yaml", "scenarios:\n  - name: three searches are fine\n    steps:\n"
                         "      - prompt: what did we decide?\n"
                         + "      - call: mem_search\n        input: {query: q, limit: 3}\n        expect: allow\n" * 3)  # fmt: skip
    junit = tmp_path / "junit.xml"
    out = env.cli("test", str(scenario), "--junit", str(junit))
    assert out.returncode == 1
    assert "step 4 (mem_search): deny: memory-governor: max_search_calls=2 reached this turn" in out.stdout
    assert 'failures="1"' in junit.read_text() and "<failure" in junit.read_text()


def test_an_invalid_scenario_file_is_located(env: Env) -> None:
    scenario = env.write(
        "s.yaml", "scenarios:\n  - name: x\n    steps:\n      - call: mem_search\n        expect: permit\n"
    )
    out = env.cli("test", str(scenario))
    assert out.returncode == 2 and f"{scenario}:5:17: unknown decision 'permit'" in out.stderr


def _decisions(result: dict[str, Any]) -> list[str]:
    return [d["decision"] for t in result["turns"] for d in t["decisions"]]


def test_replay_under_a_monitor_policy_denies_nothing(env: Env) -> None:
    monitor = env.write("monitor.yaml", "mode: monitor\n")
    data = env.cli_json(
        "replay", str(TRANSCRIPTS / "ungoverned-session.jsonl"), "--policy", str(monitor), "--format", "json"
    )
    assert "deny" not in _decisions(data) and data["totals"]["denied"] == 0
    assert data["totals"]["tokens_saved"] <= 0, "monitor mode delivers everything (plus its advice)"


def test_the_audit_trail_records_sizes_and_fingerprints_or_contents_when_asked(env: Env) -> None:
    from governor.engine.stores import open_ledger

    first = Session(env, "audit-default")
    first.prompt("what did we decide about ORCA-1?")
    rows = [r[0] for r in open_ledger(str(env.state)).q("SELECT detail FROM decisions WHERE event='prompt'")]
    assert rows and rows[0].startswith("32 bytes crc32:")
    env.write(".memory-governor/policy.yaml", "ledger:\n  record_contents: true\n  reservation_ttl_seconds: 300\n"
              "  busy_timeout_ms: 2000\n  retention_days: 14\n")  # fmt: skip
    env.accept()  # recording contents is no change an agent may make
    second = Session(env, "audit-opt-in")
    second.prompt("what did we decide about ORCA-2?")
    rows = [r[0] for r in open_ledger(str(env.state)).q("SELECT detail FROM decisions WHERE event='prompt'")]
    assert "what did we decide about ORCA-2?" in rows


def test_replay_without_a_policy_uses_the_projects_effective_policy(env: Env) -> None:
    transcript = str(TRANSCRIPTS / "ungoverned-session.jsonl")
    default = env.cli_json("replay", transcript, "--format", "json")
    env.write(".memory-governor/policy.yaml", "limits:\n  max_search_calls: {value: 1, enforce: block}\n")
    team = env.cli_json("replay", transcript, "--format", "json")
    first_turn = [(d["tool"].split("__")[-1], d["decision"]) for d in team["turns"][0]["decisions"]]
    assert ("mem_search", "deny") in first_turn, "the team's limit of one search applies"
    assert ("mem_search", "deny") not in [
        (d["tool"].split("__")[-1], d["decision"]) for d in default["turns"][0]["decisions"]
    ]
    explicit = env.cli_json("replay", transcript, "--policy", str(env.project / ".memory-governor" / "policy.yaml"),
                            "--format", "json")  # fmt: skip
    assert explicit["totals"] == team["totals"]


def test_a_replay_keeps_what_it_compiled_in_the_callers_state_and_the_next_loads_none_of_it(
    env: Env, tmp_path: Path
) -> None:
    """A replay decides in a scratch state directory, with the caller's compiled policies and tables:
    the second replay of a policy neither compiles it (pydantic) nor loads tiktoken, and says the same."""
    policy = tmp_path / "team.yaml"  # content no test compiled before: a key of its own
    policy.write_text(f"# {tmp_path.name}\nlimits:\n  max_search_calls: {{value: 1, enforce: block}}\n")
    transcript = str(TRANSCRIPTS / "ungoverned-session.jsonl")
    command = ["-X", "importtime", "-m", "governor", "replay", transcript, "--policy", str(policy), "--format", "json"]
    state = tmp_path / "own-state"  # a state directory of its own, without the caches the other tests share
    state.mkdir(mode=0o700)
    kept = state / "cache" / "policies"
    before = set(kept.glob("*.json"))
    own = {**env.vars, "MEMORY_GOVERNOR_STATE_DIR": str(state)}
    runs = [subprocess.run([sys.executable, *command], capture_output=True, text=True, env=own, cwd=env.project,
                           timeout=120, check=True) for _ in range(2)]  # fmt: skip
    imported = [{line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines()} for run in runs]
    assert "pydantic" in imported[0], "the first replay compiles the policy"
    assert not {"pydantic", "yaml", "tiktoken"} & imported[1], "the second reads what the first kept"
    assert len(set(kept.glob("*.json")) - before) == 1, "the replayed policy, kept by content"
    assert json.loads(runs[0].stdout)["totals"] == json.loads(runs[1].stdout)["totals"]
    assert json.loads(runs[0].stdout)["totals"]["denied"] > 0


def test_a_replay_makes_no_state_directory_for_its_caches(env: Env, tmp_path: Path) -> None:
    nowhere = tmp_path / "no-state-yet"
    data = env.cli_json("replay", str(TRANSCRIPTS / "ungoverned-session.jsonl"), "--format", "json",
                        env={"MEMORY_GOVERNOR_STATE_DIR": str(nowhere)})  # fmt: skip
    assert data["totals"]["calls"] > 0
    assert not nowhere.exists()
