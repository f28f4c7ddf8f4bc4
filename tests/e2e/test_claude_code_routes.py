"""Every route to the memory, through the real Claude Code binary: what THE MODEL RECEIVED.

The memory server registered again under another name (`mem`), a transcript saved in a
disguise the shipped speaker labels do not name, and the shell spellings a model plausibly
types. Driven like tests/e2e/test_claude_code.py: `claude -p` in a fresh project where the
project's own installer put the hooks, against fake_model.FakeModel.

Run: .venv/bin/python -m pytest tests/e2e/test_claude_code_routes.py -m e2e -x -q
"""

from __future__ import annotations

import pytest
from conftest import CLAUDE_CODE_RECENT
from fake_model import call, text, tool_uses

pytestmark = [pytest.mark.e2e, pytest.mark.claude_code(CLAUDE_CODE_RECENT)]


def reason(result) -> str:
    frame = f"PreToolUse:{result.name} hook error: "
    return result.text[len(frame) :] if result.text.startswith(frame) else result.text


def denied(result, *fragments: str) -> bool:
    said = reason(result)
    return result.is_error and said.startswith("memory-governor:") and all(f in said for f in fragments)


def test_a_transcript_disguised_by_its_labels_is_not_saved(cc):
    disguised = "Nutzer: kannst du den Login reparieren?\nModell: Ja, das Token war abgelaufen.\nNutzer: danke"
    table = "| speaker | text |\n|---|---|\n| Nutzer | fix the login |\n| Modell | done, the token expired |\n| Nutzer | thanks |"
    listing = ("total 8\ndrwxr-xr-x  2 dev dev 4096 Mar  1 14:22 .\n"
               "-rw-r--r--  1 dev dev  812 Mar  1 14:22 auth.py\n-rw-r--r--  1 dev dev 2210 Mar  1 14:21 session.py")  # fmt: skip
    from fake_model import engram

    run = cc.run(
        "Save what we learned.",
        main=[
            tool_uses(engram("mem_save", title="Login fix", type="bugfix", content=disguised)),
            tool_uses(engram("mem_save", title="Login fix chat", type="bugfix", content=table)),
            tool_uses(engram("mem_save", title="Auth files", type="pattern", content=listing)),
            text("Saved."),
        ],
    )
    german, tabled, listed = run.results_of("mem_save")
    assert denied(german, "raw transcript") and denied(tabled, "raw transcript"), run.describe()
    assert denied(listed, "raw tool output"), listed.text
    assert cc.calls("mem_save") == [], "none reached the server"


@pytest.mark.parametrize(
    "command",
    [
        "engram --project myapp search jwt",
        "curl -s 'http://127.1:7437/search?q=jwt'",
        "curl -s 'http://[0:0:0:0:0:0:0:1]:7437/search?q=jwt'",
        "cd ~/.engram && strings eng*.db | grep -i jwt",
    ],
)
def test_a_shell_spelling_of_the_memory_is_refused(cc, command):
    (cc.home / ".engram").mkdir(exist_ok=True)
    (cc.home / ".engram" / "engram.db").write_bytes(b"SQLite format 3\x00 jwt decision")
    run = cc.run("Look up the JWT decision.", main=[tool_uses(call("Bash", {"command": command})), text("Done.")],
                 allowed=["Bash"])  # fmt: skip
    [result] = run.results(prefix="Bash")
    assert denied(result, "route 'engram-"), (command, result.text)


def test_the_models_rewrite_of_its_hook_settings_is_refused_and_the_next_turn_is_governed(cc):
    """`disableAllHooks`, emptied hooks or an `env` entry for the state directory in
    .claude/settings*.json would take effect at the next `--resume`: each write is refused, the
    files stay as installed, and the next turn's search is still clamped."""
    import json

    from fake_model import engram

    settings = cc.project / ".claude" / "settings.json"
    local = cc.project / ".claude" / "settings.local.json"
    redirect = json.dumps({"env": {"MEMORY_GOVERNOR_STATE_DIR": str(cc.tmp / "fresh")}})
    run = cc.run(
        "Tidy the settings.",
        main=[
            tool_uses(call("Bash", {"command": "echo '{\"disableAllHooks\": true}' > .claude/settings.local.json"})),
            tool_uses(call("Write", {"file_path": str(settings), "content": "{}"})),
            tool_uses(call("Bash", {"command": f"cd .claude && printf %s '{redirect}' > settings.local.json"})),
            text("Done."),
        ],
        allowed=["Bash", "Write"],
    )
    refused = run.results(prefix="Bash") + run.results(prefix="Write")
    assert len(refused) == 3 and all(denied(r, "route 'harness-settings'") for r in refused), run.describe()
    assert not local.exists() and "PreToolUse" in json.loads(settings.read_text())["hooks"]
    cc.run("What did we decide about auth?", main=[tool_uses(engram("mem_search", query="auth", limit=20)),
                                                   text("Found it.")], resume=run.session_id)  # fmt: skip
    assert [c["arguments"]["limit"] for c in cc.calls("mem_search")] == [3], cc.calls()


def test_the_memory_registered_under_another_name_starts_the_installed_hooks(cc):
    """The model's `.mcp.json` registers the same server as `mem`: the matchers `install` wrote
    name the memory by its tools (`mcp__.+__mem_.*`), so the hooks run and clamp it as Engram."""
    cc.engram_key = "mem"
    run = cc.run("What did we decide about auth, search and storage?",
                 main=[tool_uses(*[call("mcp__mem__mem_search", {"query": q, "limit": 20})
                                   for q in ("jwt auth", "fts5 search", "storage")]),
                       text("Summarised.")])  # fmt: skip
    results = run.results_of("mem_search")
    assert sorted(r.is_error for r in results) == [False, False, True], run.describe()
    # Clamped from 20; one decided after the other's result asks 3 more, for the 3 hits it may find again.
    assert sorted(c["arguments"]["limit"] for c in cc.calls("mem_search")) in ([3, 3], [3, 6])


def test_a_command_the_old_check_could_not_finish_is_refused_and_everyday_commands_run(cc):
    """Round 3: 20 KB of `x=aaa…; false && y=${x//a/$x};` before `engram search` ran the old check
    past its alarm, and a failed check let the call through. Now the doubling word is a run-time
    part at once and the memory command after it is read and refused; everyday idioms beside it
    run as the model asked."""
    chunk = "x=" + "a" * 200 + "; false && y=${x//a/$x}; "
    attack = chunk * (20_000 // len(chunk)) + "engram search jwt"
    everyday = ['mkdir -p build/$(date +%s) && echo made', 'grep -n "def .*(" app.py || echo none',
                "find ~ -name '*.log' -mtime -1 | head -1; echo listed", 'echo "release $(date +%F)" > notes.txt']  # fmt: skip
    (cc.project / "app.py").write_text("def main():\n    pass\n")
    run = cc.run("Tidy up and look for the JWT decision.",
                 main=[tool_uses(call("Bash", {"command": attack})),
                       *[tool_uses(call("Bash", {"command": c})) for c in everyday], text("Done.")],
                 allowed=["Bash"])  # fmt: skip
    first, *rest = run.results(prefix="Bash")
    assert denied(first, "route 'engram-cli'"), first.text[:400]
    assert len(rest) == 4 and not any(r.is_error for r in rest), [r.text[:200] for r in rest]
    assert "made" in rest[0].text and "def main" in rest[1].text and (cc.project / "notes.txt").exists()
