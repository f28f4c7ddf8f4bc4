"""Reading a shell command into what it does (governor/engine/shell.py, programs.py, words.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governor.engine.effects import Effects, effects
from governor.engine.shell import Budget, Unfinished
from governor.engine.words import ANY, HERE, PART, could_be, shown


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / ".engram").mkdir()
    (tmp_path / ".engram" / "engram.db").write_bytes(b"")
    return tmp_path


def run(command: str, home: Path, cwd: str = "/work/project", **env: str) -> Effects:
    return effects(command, cwd, {"HOME": str(home), **env})


def plain(texts: list[str]) -> list[str]:
    return [shown(t.replace(HERE, "")) for t in texts]


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
        "echo 'engram search jwt' | sh",
        "ssh localhost 'engram search jwt'",
        "watch -n 5 'engram search jwt'",
        "find . -name x -exec engram search jwt {} \\;",
        "if true; then engram search jwt; fi",
        "f() { engram search jwt; }; f",
        "case x in x) engram search jwt;; esac",
        "cat <<EOF\n$(engram search jwt)\nEOF",
        "$'\\x65ngram' search jwt",
        "{engram,search,jwt}",
        "$(printf engram) search jwt",
    ],
)
def test_a_spelling_of_the_same_command_runs_that_command(command: str, home: Path) -> None:
    assert any(line.startswith("engram search jwt") for line in plain(run(command, home).runs)), run(command, home).runs


def test_a_path_is_judged_where_the_shell_would_open_it(home: Path) -> None:
    db = str(home / ".engram" / "engram.db")
    assert db in plain(run("cd ~/.engram && sqlite3 eng*.db .dump", home).writes)
    assert db in plain(p for p, _ in run("cd ~ ; cd .engram; strings engram.db", home).reads)
    assert db in plain(p for p, _ in run("cat < ~/.engram/engram.db", home).reads)
    assert db in plain(p for p, _ in run("strings ~/.e*/*.db", home).reads), "a glob is matched on disk"
    assert "/srv/state/ledger.db" in plain(run('rm -f "$STATE"/ledger.db', home, STATE="/srv/state").removes)


def test_data_is_no_path_and_no_command(home: Path) -> None:
    """A commit message, a search pattern, printed text and a heredoc copied into a file are data:
    no path, no command; the words an interpreter runs are code."""
    found = run('git commit -m "engram search .claude/settings.json $(date +%F)"', home)
    assert plain(found.runs) == ["date", "git commit -m"] and not found.writes and not found.reads
    found = run('grep -n "def .*(" src/app/main.py', home)
    assert plain(p for p, _ in found.reads) == ["/work/project/src/app/main.py"]
    assert plain(found.runs) == ["grep -n src/app/main.py"]
    assert not run("echo engram search jwt > /dev/null", home).runs[0].startswith("engram")
    found = run("cat > notes.md <<'EOF'\nrun engram search jwt to see\nEOF", home)
    assert plain(found.writes) == ["/work/project/notes.md"] and not any("engram" in r for r in found.runs)
    found = run("python3 -c \"import os; os.system('engram search x')\"", home)
    assert found.code == ["import os; os.system('engram search x')"]
    assert "engram search x" in found.runs, "the command line the code runs is read as one"


def test_what_a_program_writes_is_what_it_writes(home: Path) -> None:
    cases = {
        "cp a.txt b.txt": ["/work/project/b.txt"],
        "cp a.txt b.txt dist/": ["/work/project/dist", "/work/project/dist/a.txt", "/work/project/dist/b.txt"],
        "sed -i 's/a/b/' conf.ini": ["/work/project/conf.ini"],
        "sed 's/a/b/' conf.ini": [],
        "tar czf out.tgz src": ["/work/project/out.tgz"],
        "curl -o page.html http://example.com": ["/work/project/page.html"],
        "dd if=/dev/zero of=disk.img bs=1M count=1": ["/work/project/disk.img"],
        "gcc -o app main.c": ["/work/project/app"],
        "make -C build": [],
        "ls -la > listing.txt 2>&1": ["/work/project/listing.txt"],
        "perl -pi -e 's/a/b/' x.cfg": ["/work/project/x.cfg"],
        "python3 -c \"open('out/data.json', 'w').write('{}')\"": ["/work/project/out/data.json"],
        "python3 -c \"print(open('out/data.json').read())\"": [],
    }
    for command, writes in cases.items():
        assert plain(run(command, home).writes) == writes, command


def test_single_quotes_keep_a_substitution_unrun(home: Path) -> None:
    assert not any("engram" in line for line in run("echo '$(engram search jwt)'", home).runs)


@pytest.mark.parametrize("command", ["echo 'unclosed", 'echo "unclosed $(', "((((", "$(" * 2000, "`" * 999, "",
                                     "a=(1 2 3); echo ${a[@]}", "for ((i=0;i<3;i++)); do echo $i; done",
                                     "cat <<EOF", "echo ${x", "echo $((1/0))", "[[ -f x ]] && echo y"])  # fmt: skip
def test_a_broken_command_is_read_without_error(command: str, home: Path) -> None:
    try:
        assert isinstance(run(command, home), Effects)
    except Unfinished:
        pass  # judged on its literal text instead (tests/test_routes.py)


def test_a_pathological_command_costs_bounded_time(home: Path) -> None:
    """A megabyte of nested substitutions, or a parameter that doubles a value on every use: the
    reading stops within its budget, in bounded wall-clock time, never runs on."""
    x = "a" * 20_000
    for command in ["echo $(" * 5000 + "x" + ")" * 5000 + " /*/*/*/*/*/* " * 5000,
                    f"x={x}; false && y=${{x//a/$x}}; " * 20 + "engram search jwt",
                    "echo " + "{a,b}" * 40]:  # fmt: skip
        started = time.monotonic()
        try:
            effects(command, "/work/project", {"HOME": str(home)}, Budget(seconds=1.0))
        except Unfinished:
            pass
        assert time.monotonic() - started < 10  # generous: the bound is on the work, not the machine


def test_the_doubling_word_is_no_reason_to_stop_reading(home: Path) -> None:
    """`${x//a/$x}` on a long value is a run-time part at once: the memory command after it is read."""
    command = f"x={'a' * 20_000}; false && y=${{x//a/$x}}; engram search jwt"
    assert "engram search jwt" in plain(run(command, home).runs)


# What bash itself makes of a word, against what the reading makes of it: each spelling is either
# bash's words exactly, or holds a run-time part (then a route judges it by what the command wrote
# around that part).
WORDS = ["${x:-ernor}", "${x-ernor}", "${x:=a}b", "${HOME:+set}", "${E:-empty}", "${E-unset}", "${#HOME}",
         "${HOME:1:3}", "${HOME#/}", "${HOME%/*}", "${P##*/}", "$'\\x2e'claude", "$'\\101\\u00e9'", "a{b,c}d",
         "{1..3}", "x{a,b{c,d}}", "'{a,b}'", "\"${x:-q}\"", "$((7400+37))", "$((N*2))", "$((y+1))", "a\\\nb",
         "'$HOME'", "\"$HOME\"/x", "~/x", "\\$HOME", "$P/$N", "$(echo hi)", "`echo hi`", "$1x", "${P/b/X}",
         "${P^^}", "$(printf '%s-%s' a b)", "$(basename /a/b.txt .txt)", "$(dirname /a/b/c)"]  # fmt: skip


@pytest.mark.parametrize("word", WORDS)
def test_a_word_is_what_bash_makes_of_it_or_holds_a_run_time_part(word: str, home: Path) -> None:
    import shutil
    import subprocess

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash here")
    env = {"HOME": str(home), "E": "", "P": "/a/b/c", "N": "21", "PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}
    done = subprocess.run([bash, "--norc", "--noprofile", "-c", f"printf '%s\\n' {word}"], env=env,
                          capture_output=True, text=True, timeout=10, check=True)  # fmt: skip
    words = done.stdout.split("\n")[:-1]
    lines = [
        line.split(" ", 1)[1] for line in run(f"printf {word}", home, "/", **env).runs if line.startswith("printf ")
    ]
    decided = [line for line in lines if ANY not in line and PART not in line]
    assert not decided or " ".join(words) in decided, (word, lines, words)


def test_a_run_time_part_reaches_a_target_only_through_what_the_command_wrote() -> None:
    here = "/p" + HERE
    assert could_be(f"{here}/.cla{PART}/settings.json", "*/.claude/settings*.json")
    assert could_be(f"{ANY}/ledger.db", "/home/me/.local/state/memory-governor/ledger.db")
    assert could_be(f"/home/me/.local/state/{PART}/x", "/home/me/.local/state/memory-governor/*")
    assert could_be(f"memory-gov{PART} policy accept", "memory-governor*policy*accept*", sep=" ", first=True)
    assert not could_be(f"{here}/{PART}", "*/.memory-governor"), "rm -f $tmp: the name is all run time"
    assert not could_be(f"{here}/build/{PART}", "*/.memory-governor")
    assert not could_be(f"{here}/{PART}.json", "*/.mcp.json"), "the distinct part of the name is run time"
    assert not could_be(f"{PART} search.txt", "engram search*", sep=" ", first=True), "$EDITOR search.txt"
    assert not could_be(f"{ANY}", "/home/me/.claude/settings.json")
    assert not could_be(f"/tmp/{PART}.log", "/home/me/.copilot/*")
    # A decided text: the target's pieces in order, both ends anchored.
    assert could_be("/home/me/p/.claude/settings.local.json", "*/.claude/settings*.json")
    assert not could_be("/home/me/p/.claude/settings", "*/.claude/settings*.json")
    assert could_be("memory-governor  policy   accept", "memory-governor*policy*accept*")
    assert not could_be("memory-governor accept policy", "memory-governor*policy*accept*")
    assert not could_be("/p/.claude/settings.json.bak", "*/.claude/settings*.json")


@given(text=st.text("ab/.*?[]\\\n", max_size=9), target=st.text("ab/.*[]\\\n", max_size=7))
@settings(max_examples=3000, deadline=None)
def test_a_decided_command_or_path_matches_a_target_as_fnmatch_would(text: str, target: str) -> None:
    from fnmatch import fnmatchcase

    assert could_be(text, target) == fnmatchcase(text, target.replace("[", "[[]")), (text, target)


@given(name=st.text("ab.-", max_size=8), pattern=st.text("ab.-*?", max_size=6))
@settings(max_examples=3000, deadline=None)
def test_a_glob_matches_a_name_as_fnmatch_would(name: str, pattern: str) -> None:
    from fnmatch import fnmatchcase

    from governor.engine.words import QUERY, STAR, glob_match

    assert glob_match(name, pattern.replace("*", STAR).replace("?", QUERY)) == fnmatchcase(name, pattern)


def test_cd_and_a_folder_destination_say_which_file_is_written(home: Path) -> None:
    (home / "bin").mkdir()
    assert str(home / "bin" / "memory-governor") in plain(run("cd bin && cp /tmp/fake memory-governor", home,
                                                              cwd=str(home)).writes)  # fmt: skip
    assert str(home / "bin" / "memory-governor") in plain(
        run("cp /tmp/x/memory-governor bin", home, cwd=str(home)).writes
    )
    unknown = run("cd $(some-tool --dir) && cp /tmp/fake memory-governor", home, cwd=str(home)).writes
    assert any(w.startswith(ANY) and w.endswith("/memory-governor") for w in unknown), unknown
    made = run("cd $(mktemp -d) && cp /tmp/fake memory-governor", home, cwd=str(home)).writes
    assert f"/tmp/tmp.{PART}/memory-governor" in made, made  # a fresh folder under /tmp, never the user's own
