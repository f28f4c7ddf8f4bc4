"""The shell normaliser: a command as the shell would run it (governor/engine/shell.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governor.engine.shell import MAX_FORMS, forms


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / ".engram").mkdir()
    (tmp_path / ".engram" / "engram.db").write_bytes(b"")
    return tmp_path


def run(command: str, home: Path, cwd: str = "/work/project", **env: str) -> list[str]:
    return forms(command, cwd=cwd, env={"HOME": str(home), **env})


@pytest.mark.parametrize(
    "command",
    [
        '"engram" search jwt',
        "e''ngram search jwt",
        "\\engram search jwt",
        "P=engram; $P search jwt",
        "export P=engram && ${P} search jwt",
        "env FOO=1 /usr/local/bin/engram search jwt",
        "timeout 5 sudo -u me nohup engram search jwt",
        "bash -c 'engram search jwt'",
        'sh -lc "engram search jwt"',
        'eval "eng""ram search jwt"',
        "echo $(engram search jwt)",
        "echo `engram search jwt`",
        "cat <(engram search jwt)",
        "ls; engram search jwt | head",
        "true &&\nengram search jwt",
        "xargs -n 1 engram search jwt",
    ],
)
def test_a_spelling_of_the_same_command_reads_as_that_command(command: str, home: Path) -> None:
    assert "engram search jwt" in run(command, home)


def test_a_path_is_judged_where_the_shell_would_open_it(home: Path) -> None:
    db = str(home / ".engram" / "engram.db")
    assert db in run("cd ~/.engram && sqlite3 eng*.db .dump", home)
    assert db in run("cd ~ ; cd .engram; strings engram.db", home)
    assert db in run("cat < ~/.engram/engram.db", home)
    assert db in run("python3 -c \"import glob,os; print(glob.glob(os.path.expanduser('~/.engr*/*.db')))\"", home)
    assert db in run("sqlite3 $HOME/.engram/engram.db", home)
    assert "/srv/state/ledger.db" in run('rm -f "$STATE"/ledger.db', home, STATE="/srv/state")


def test_single_quotes_keep_a_substitution_unrun(home: Path) -> None:
    assert "engram search jwt" not in run("echo '$(engram search jwt)'", home)


def test_ordinary_commands_keep_their_meaning(home: Path) -> None:
    assert run("git log --oneline -5", home) == ["git log --oneline -5"]
    assert run("grep -rn engram_access_tier .claude/agents", home) == [
        "grep -rn engram_access_tier .claude/agents", "/work/project/.claude/agents"]  # fmt: skip


@pytest.mark.parametrize("command", ["echo 'unclosed", 'echo "unclosed $(', "((((", "$(" * 2000, "`" * 999, ""])
def test_a_broken_command_is_read_without_error(command: str, home: Path) -> None:
    assert isinstance(run(command, home), list)


def test_a_pathological_command_costs_little(home: Path) -> None:
    """Bounded work: a megabyte of nested substitutions and globs gives a bounded answer."""
    huge = "echo $(" * 5000 + "x" + ")" * 5000 + " /*/*/*/*/*/* " * 5000
    started = time.process_time()
    out = run(huge, home)
    assert len(out) <= MAX_FORMS
    assert time.process_time() - started < 5  # generous: the bound is on the work, not the machine


# What bash itself makes of a word, against what the normaliser makes of it: each spelling is
# either resolved to bash's words exactly, or left with an undecided part (then a route judges
# it as a pattern that can be anything there, and refuses a protected target it could be).
WORDS = ["${x:-ernor}", "${x-ernor}", "${x:=a}b", "${HOME:+set}", "${E:-empty}", "${E-unset}", "${#HOME}",
         "${HOME:1:3}", "${HOME#/}", "${HOME%/*}", "${P##*/}", "$'\\x2e'claude", "$'\\101\\u00e9'", "a{b,c}d",
         "{1..3}", "x{a,b{c,d}}", "'{a,b}'", "\"${x:-q}\"", "$((7400+37))", "$((N*2))", "$((y+1))", "a\\\nb",
         "'$HOME'", "\"$HOME\"/x", "~/x", "\\$HOME", "$P/$N", "$(echo hi)", "`echo hi`", "$1x"]  # fmt: skip


@pytest.mark.parametrize("word", WORDS)
def test_a_word_is_what_bash_makes_of_it_or_undecided(word: str, home: Path) -> None:
    import shutil
    import subprocess

    from governor.engine.shell import UNDECIDED, read

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash here")
    env = {"HOME": str(home), "E": "", "P": "/a/b/c", "N": "21", "PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}
    done = subprocess.run([bash, "--norc", "--noprofile", "-c", f"printf '%s\\n' {word}"], env=env,
                          capture_output=True, text=True, timeout=10, check=True)  # fmt: skip
    words = done.stdout.split("\n")[:-1]
    run = read(f"printf {word}", cwd=str(home), env=env).runs[0].split(" ", 1)[1]
    if UNDECIDED in run:
        return  # undecided: judged as a pattern (below, and in tests/test_trust.py)
    assert run == " ".join(words), (word, run, words)


def test_an_undecided_part_can_be_anything_a_protected_target_is() -> None:
    from governor.engine.words import GLOB, UNDECIDED, could_be

    assert could_be(f"/p/.cla{UNDECIDED}/settings.json", "*/.claude/settings*.json")
    assert could_be(f"{UNDECIDED} policy accept --yes", "memory-governor*policy*accept*")
    assert could_be(f"/home/me/.local/bin/memory-gov{UNDECIDED}", "*/memory-governor")
    assert not could_be(f"/p/notes/{GLOB}.txt", "*/.claude/settings*.json")
    assert not could_be(f"/p/.cla{GLOB}/agents/x.md", "*/.claude/settings*.json")
    assert not could_be(f"/tmp/{GLOB}.log", "/home/me/.copilot/*")
    assert could_be(f"/tmp/{UNDECIDED}.log", "*/.copilot/*")  # it may hold a `/`
    # A decided text: the target's pieces in order, both ends anchored.
    assert could_be("/home/me/p/.claude/settings.local.json", "*/.claude/settings*.json")
    assert not could_be("/home/me/p/.claude/settings", "*/.claude/settings*.json")
    assert could_be("memory-governor  policy   accept", "memory-governor*policy*accept*")
    assert not could_be("memory-governor accept policy", "memory-governor*policy*accept*")
    assert not could_be("/p/.claude/settings.json.bak", "*/.claude/settings*.json")


@given(text=st.text("ab/.*?[]\\\n", max_size=9), target=st.text("ab/.*[]\\\n", max_size=7))
@settings(max_examples=3000, deadline=None)
def test_a_decided_command_or_path_matches_a_target_as_fnmatch_would(text: str, target: str) -> None:
    # A decided text is matched without compiling the target (a cold hook meets every target once).
    from fnmatch import fnmatchcase

    from governor.engine.words import could_be

    assert could_be(text, target) == fnmatchcase(text, target.replace("[", "[[]")), (text, target)


def test_cd_and_a_folder_destination_say_which_file_is_written(home: Path) -> None:
    from governor.engine.shell import UNDECIDED, read

    (home / "bin").mkdir()
    assert str(home / "bin" / "memory-governor") in read("cd bin && cp /tmp/fake memory-governor", cwd=str(home)).writes
    assert str(home / "bin" / "memory-governor") in read("cp /tmp/x/memory-governor bin", cwd=str(home)).writes
    undecided = read("cd $(mktemp -d) && cp /tmp/fake memory-governor", cwd=str(home)).writes
    assert any(w.startswith(UNDECIDED) and w.endswith("/memory-governor") for w in undecided), undecided
