"""The regular expressions a prompt's decision runs, built from their kept `_sre` code
(governor.engine.patterns): every one of them kept, each the very pattern `re` compiles, a
hook that decides without importing `re`, and a forms file that is used only when it is whole
and made by this interpreter for this policy (else the hook compiles with `re`, answers the
same, and writes the file again)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from governor.engine import patterns, recall
from governor.state import blake2b_hex
from tests.conftest import HOOK, Env, Session

# Their subject is what one hook process holds (its tables, its patterns, its warm server): each hook
# is a process of its own (tests/conftest.py hook_run).
pytestmark = pytest.mark.hook_processes

PROMPTS = (
    "where did we leave off with the importer?",  # a pattern decides
    "fix the failing test in tests/test_parser.py and run pytest",  # the model decides
    "load all project memory",  # a phrase of the policy's trigger: the guards run
    "go through everything our memory holds on this repo",  # an ask in other words
    "do NOT load the full memory, just fix the bug",  # a negated ask
    "how large is the full context of this model?",  # a question about the words
    "¿me cargas toda la memoria guardada del proyecto?",
)
IMPORTTIME = [HOOK[0], "-X", "importtime", *HOOK[1:]]


def _answers(env: Env, session: str, command: list[str] | None = None) -> tuple[list[str], list[str]]:
    """Each prompt's context line, and the stderr of each hook process."""
    run = Session(env, session_id=session, command=command)
    answers = [run.prompt(prompt) for prompt in PROMPTS]
    return [a.context for a in answers], [a.stderr for a in answers]


def _imported_re(stderr: str) -> bool:
    return any(re.search(r"\|\s+re$", line) for line in stderr.splitlines())


def _shared_forms(env: Env) -> list[Path]:
    """The copy of the policy's file kept for every project of the state directory (the folder
    also holds, linked in, those of the policies other tests compiled)."""
    return list((env.state / "cache" / "policies").glob(f"{_policy(env)['digest']}.*.forms"))


def _replace(path: Path, data: bytes) -> None:
    """A file given new bytes as a new file: one linked in from the tests' shared folder stays as it was."""
    path.unlink()
    path.write_bytes(data)


def _forms(env: Env) -> Path:
    (path,) = (env.state / "policy").glob("*.forms")
    return path


def _policy(env: Env) -> dict:  # type: ignore[type-arg]
    (path,) = (env.state / "policy").glob("*.json")
    return json.loads(path.read_text())


def _valid(env: Env) -> bool:
    data = _forms(env).read_bytes()
    digest, _, rest = data.partition(b"\n")
    head = json.loads(rest.partition(b"\n")[0])
    return blake2b_hex(rest) == digest.decode() and head["interpreter"][0] == sys.hexversion


def test_escape_is_res() -> None:
    texts = ["all project memory", "todo lo que sabes", "a.b*c?", "".join(map(chr, range(0x3000)))]
    for text in texts:
        assert patterns.escape(text) == re.escape(text)


def test_every_pattern_a_prompt_may_build_is_kept_as_re_compiles_it(env: Env) -> None:
    Session(env).prompt(PROMPTS[0])  # compiles the policy; writes its forms
    blob = _policy(env)
    needs, phrases = blob["policy"]["memory_needs"], blob["index"]["recall_phrases"]
    wanted = recall.sources(needs, phrases)
    assert len(wanted) > 100 and phrases
    (compiled,) = (env.state / "policy").glob("*.json")
    stem = str(compiled.with_suffix(""))
    saved = dict(patterns._built)
    try:
        patterns._built.clear()
        patterns.use(stem, blob["digest"], lambda: pytest.fail("a whole forms file is not written again"))
        for source, flags in wanted:
            kept = patterns.compiled(source, flags)
            assert (source, flags) in patterns._forms, source
            assert kept == re.compile(source, flags) and kept is not re.compile(source, flags), source
    finally:
        patterns.use(None, "", list)
        patterns._built.clear()
        patterns._built.update(saved)


def test_a_hook_deciding_alone_builds_its_patterns_without_re(env: Env) -> None:
    expected, _ = _answers(env, "first")  # the first prompt writes the forms file
    assert _valid(env)
    answers, stderrs = _answers(env, "second", IMPORTTIME)
    assert answers == expected
    assert not any(_imported_re(err) for err in stderrs), "a hook imported re"
    # the same verdicts as re's patterns, in this process
    blob = _policy(env)
    for prompt, answer in zip(PROMPTS, answers, strict=True):
        verdict, _ = recall.judge(prompt, blob["policy"]["memory_needs"], blob["index"]["recall_phrases"])
        assert f"memory_need={verdict.need}:" in answer, (prompt, answer)


def _flip_code(data: bytes) -> bytes:
    out = bytearray(data)
    out[-3] ^= 0x01  # one instruction of the last pattern: the digest no longer matches
    return bytes(out)


def _resigned(data: bytes, change: str) -> bytes:
    """The file with its header changed and its digest made to match again."""
    _, _, rest = data.partition(b"\n")
    line, _, body = rest.partition(b"\n")
    head = json.loads(line)
    if change == "interpreter":
        head["interpreter"][1] += 1  # another _sre.MAGIC
    elif change == "policy":
        head["policy"] = "0" * 64
    elif change == "governor":
        head["governor"] = "0.0.1"
    rest = json.dumps(head).encode() + b"\n" + body
    return blake2b_hex(rest).encode() + b"\n" + rest


DAMAGE = {
    "a changed instruction": _flip_code,
    "cut short": lambda data: data[: len(data) // 2],
    "empty": lambda data: b"",
    "not text": lambda data: b"\xff\xfe" * 40,
    "another interpreter": lambda data: _resigned(data, "interpreter"),
    "another policy": lambda data: _resigned(data, "policy"),
    "another version of the package": lambda data: _resigned(data, "governor"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_or_foreign_forms_file_is_as_if_absent(env: Env, damage: str) -> None:
    expected, _ = _answers(env, "first")
    path = _forms(env)
    _replace(path, DAMAGE[damage](path.read_bytes()))
    for shared in _shared_forms(env):
        _replace(shared, DAMAGE[damage](shared.read_bytes()))  # the copy for every project too
    answers, stderrs = _answers(env, "second", IMPORTTIME)
    assert answers == expected  # compiled by re, the same verdicts
    assert _imported_re(stderrs[0]), "the damaged file was used"
    assert _valid(env), "the hook did not write the file again"
    answers, stderrs = _answers(env, "third", IMPORTTIME)
    assert answers == expected and not any(_imported_re(err) for err in stderrs)


def test_a_forms_file_that_cannot_be_written_leaves_the_decision_to_re(env: Env) -> None:
    expected, _ = _answers(env, "first")
    path = _forms(env)
    path.unlink()
    path.mkdir()  # neither readable as a file nor replaceable by one
    for shared in _shared_forms(env):
        shared.unlink()  # nor the copy kept for every project of the state directory
    answers, stderrs = _answers(env, "second", IMPORTTIME)
    assert answers == expected and all(_imported_re(err) for err in stderrs)
    assert path.is_dir() and not list(path.parent.glob("*.tmp"))


def test_a_project_without_its_file_takes_a_copy_of_the_shared_one_never_a_link_planted_there(env: Env) -> None:
    """A project whose file is missing (a new one with the same policy) copies the shared file's
    checked bytes, and builds nothing; a symlink or another's file at the shared name is not read."""
    expected, _ = _answers(env, "first")
    path = _forms(env)
    (shared,) = _shared_forms(env)
    path.unlink()
    answers, stderrs = _answers(env, "second", IMPORTTIME)
    assert answers == expected and not any(_imported_re(err) for err in stderrs)
    assert path.read_bytes() == shared.read_bytes() and not path.is_symlink()
    assert path.stat().st_ino != shared.stat().st_ino, "a file of the project's own"
    planted = env.tmp / "planted.forms"  # valid, but where the model could rewrite it
    planted.write_bytes(shared.read_bytes())
    shared.unlink()
    shared.symlink_to(planted)
    path.unlink()
    answers, stderrs = _answers(env, "third", IMPORTTIME)
    assert answers == expected and _imported_re(stderrs[0]), "the link was followed"
    assert not path.is_symlink() and not shared.is_symlink() and _valid(env)
