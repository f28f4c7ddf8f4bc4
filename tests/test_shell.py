"""The shell normaliser: a command as the shell would run it (governor/engine/shell.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

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
