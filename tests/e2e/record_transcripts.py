"""Record real Claude Code session transcripts into tests/fixtures/transcripts/.

    .venv/bin/python tests/e2e/record_transcripts.py [--out DIR]

Drives the pinned Claude Code binary (conftest.CLAUDE_CODE_VERSION, installed into the e2e cache, tests/e2e/npm.py
as the e2e tests do) against fake_model.FakeModel and the Engram stand-in, WITHOUT
memory-governor's hooks (ungoverned: every memory call goes through), and copies the JSONL
transcripts Claude Code wrote under the throwaway HOME (~/.claude/projects/<project>/) into
the fixtures folder, normalised so that a re-recording gives the same bytes:

- ungoverned-session.jsonl: two turns (the second through --resume): two parallel
  mem_search calls, a mem_get_observation of an id the search surfaced, then mem_context,
  one more mem_search and a mem_save.
- subagent-session.jsonl + subagent-session.agent-validator.jsonl (+ .meta.json): a main
  agent that searches, dispatches the custom `validator` subagent (.claude/agents/validator.md),
  which searches and saves a bugfix; Claude Code keeps the subagent's own transcript in
  <session>/subagents/agent-<id>.jsonl.

Normalisation: UUIDs, tool_use/message ids and the subagent id become sequential
placeholders (in order of first appearance), timestamps one second per record from
2026-01-01T00:00:00Z, the temporary
directory /tmp/memory-governor-e2e, and durations/slugs fixed values. Nothing else changes.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent.parent))  # the checkout: the e2e base imports tests.conftest

from conftest import ROOT, Harness, install_tools  # noqa: E402
from fake_model import FakeModel, Reply, Request, dispatch, engram, text, tool_uses  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "transcripts"
FIXED_TMP = "/tmp/memory-governor-e2e"
HIT = re.compile(r"^\[\d+\] #(\d+) \(", re.M)


def _fetch_first_hit(request: Request) -> Reply:
    """The first hit of the "token refresh" search (not of whichever parallel search finished first,
    so the session makes the same calls whether hooks run or not)."""
    for result in request.tool_results():
        if not result.is_error and (result.input or {}).get("query") == "token refresh":
            return tool_uses(engram("mem_get_observation", id=int(HIT.findall(result.text)[0])))
    raise AssertionError("the token refresh search returned nothing")


def record_ungoverned(harness: Harness) -> list[Path]:
    harness.hooks = False  # no installer run: Claude Code as it is, ungoverned
    return [harness.transcript(play_memory_session(harness))]


def play_memory_session(harness: Harness) -> Any:
    """The two-turn session of ungoverned-session.jsonl; its first run (for the transcript path)."""
    first = harness.run(
        "What did we decide about JWT auth and the token refresh race?",
        main=[
            tool_uses(engram("mem_search", query="jwt auth", limit=3), engram("mem_search", query="token refresh", limit=3)),
            _fetch_first_hit,
            text("We switched from sessions to JWT, and refresh is idempotent within 30 s."),
        ],
    )  # fmt: skip
    harness.run(
        "Catch me up on everything, then record the decision about token expiry.",
        resume=first.session_id,
        main=[
            tool_uses(engram("mem_context", project="myapp")),
            tool_uses(engram("mem_search", query="expire", limit=3)),
            tool_uses(
                engram(
                    "mem_save",
                    title="Access tokens stay at 15 minutes",
                    type="decision",
                    project="myapp",
                    topic_key="decision/token-expiry",
                    content="**What**: keep access tokens at 15 min and refresh tokens at 7 days\n"
                    "**Why**: the refresh race is fixed, so short tokens cost nothing\n"
                    "**Where**: src/auth/config.ts",
                )
            ),
            text("Recorded."),
        ],
    )
    return first


def record_subagent(harness: Harness) -> list[Path]:
    harness.hooks = False
    marker = "LANE-VALIDATOR"
    harness.agent("validator", f"You are the validator. Check the change and record bugs in memory. {marker}",
                  tools=["mcp__engram__mem_search", "mcp__engram__mem_save"])  # fmt: skip
    run = harness.run(
        "Validate the refresh-token change before we merge it.",
        main=[
            tool_uses(engram("mem_search", query="token refresh", limit=3)),
            dispatch("validator", f"Validate the refresh-token change in src/auth/refresh.ts. Known: #43. {marker}",
                     description="Validate refresh change"),
            text("The validator found one bug and saved it."),
        ],
        lanes={marker: [
            tool_uses(engram("mem_search", query="refresh", limit=3)),
            tool_uses(engram("mem_save", title="Refresh ran twice on slow networks", type="bugfix", project="myapp",
                             content="**What**: a client retry re-sent the refresh request\n**Why**: no idempotency "
                                     "key on /refresh\n**Where**: src/auth/refresh.ts")),
            text("One bug: a retry re-sends the refresh. Saved as a bugfix."),
        ]},
    )  # fmt: skip
    main = harness.transcript(run)
    agents = sorted((main.parent / run.session_id / "subagents").glob("agent-*"))
    return [main, *agents]


class Normaliser:
    UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
    TOOLU = re.compile(r"\btoolu_[0-9a-f]{32}\b")
    MSG = re.compile(r"\bmsg_[0-9a-f]{24}\b")
    AGENT = re.compile(r"\ba[0-9a-f]{16}\b")
    STAMP = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\b")
    USAGE_MS = re.compile(r"duration_ms: \d+")
    TIMES = ("durationMs", "duration_ms", "totalDurationMs", "ttftMs", "durationApiMs", "timestamp_ms")

    def __init__(self, tmp: Path) -> None:
        self.tmp = str(tmp)
        self.maps: dict[str, dict[str, str]] = {}

    def _seq(self, kind: str, value: str, fmt: str) -> str:
        table = self.maps.setdefault(kind, {})
        if value not in table:
            table[value] = fmt.format(len(table) + 1)
        return table[value]

    def text(self, data: str) -> str:
        data = data.replace(self.tmp, FIXED_TMP)
        data = self.UUID.sub(lambda m: self._seq("uuid", m.group(0), "00000000-0000-4000-8000-{:012d}"), data)
        data = self.TOOLU.sub(lambda m: self._seq("toolu", m.group(0), "toolu_e2e_{:04d}"), data)
        data = self.MSG.sub(lambda m: self._seq("msg", m.group(0), "msg_e2e_{:04d}"), data)
        data = self.AGENT.sub(lambda m: self._seq("agent", m.group(0), "a{:016x}"), data)
        return self.USAGE_MS.sub("duration_ms: 0", data)

    def record(self, line: str, index: int) -> str:
        """One JSONL record; its timestamps become 2026-01-01T00:00:00Z plus `index` seconds."""
        stamp = f"2026-01-01T{index // 3600:02d}:{index // 60 % 60:02d}:{index % 60:02d}.000Z"
        value = json.loads(self.STAMP.sub(stamp, self.text(line)))
        return json.dumps(self._fix(value), ensure_ascii=False, separators=(",", ":"))

    def _fix(self, value: Any) -> Any:
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if k in self.TIMES and isinstance(v, (int, float)):
                    v = 0
                elif k == "slug" and isinstance(v, str):
                    v = "e2e-session-slug"
                out[k] = self._fix(v)
            return out
        if isinstance(value, list):
            return [self._fix(v) for v in value]
        return value


def normalise(files: list[Path], tmp: Path, out: Path, stem: str) -> list[Path]:
    """Write each transcript file as <stem>.jsonl, <stem>.agent-<type>.jsonl / .meta.json."""
    norm = Normaliser(tmp)
    written = []
    for path in files:
        if path.name.startswith("agent-"):
            meta = path.with_suffix(".meta.json") if path.suffix == ".jsonl" else path
            agent_type = json.loads(meta.read_text()).get("agentType", "agent") if meta.exists() else "agent"
            name = f"{stem}.agent-{agent_type}{''.join(path.suffixes)}"
        else:
            name = f"{stem}.jsonl"
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        body = "".join(norm.record(line, index) + "\n" for index, line in enumerate(lines))
        target = out / name
        target.write_text(body, encoding="utf-8")
        written.append(target)
    return written


def record_all(out: Path = OUT) -> list[Path]:
    tools = install_tools()
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with FakeModel() as model:
        for stem, recorder in (("ungoverned-session", record_ungoverned), ("subagent-session", record_subagent)):
            tmp = Path(tempfile.mkdtemp(prefix="mg-record-"))
            try:
                files = recorder(Harness(tmp, tools, model))
                written += normalise(files, tmp, out, stem)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    for path in record_all(args.out):
        print(f"{path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
