"""governor.jsonio, the hook's JSON without the json package: the same text and values as json."""

from __future__ import annotations

import json
import math

import pytest

from governor import jsonio
from tests.conftest import fresh_process

VALUES = [
    None, True, False, 0, -1, 10**30, 1.5, -0.0, 1e-7, 3.141592653589793, float("inf"), float("-inf"), "",
    "plain", "naïve 日本語 👍🏽", "quote \" backslash \\ tab \t newline \n nul \x00 del \x7f", "lone \ud800 surrogate",
    [], {}, [1, [2, [3, {"a": None}]]], {"b": 1, "a": [True, "x"], "ü": {"z": 1, "é": 2}}, {"1": 1, "10": 2, "2": 3},
]  # fmt: skip


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_dumps_gives_jsons_text(value: object) -> None:
    for ensure_ascii in (True, False):
        for sort_keys in (True, False):
            assert jsonio.dumps(value, ensure_ascii=ensure_ascii, sort_keys=sort_keys) == json.dumps(
                value, ensure_ascii=ensure_ascii, sort_keys=sort_keys
            )
    assert jsonio.dumps([value, object()], default=str)[:-1].startswith(json.dumps([value])[:-1])
    with pytest.raises(TypeError):
        jsonio.dumps({"x": object()})


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_loads_reads_what_json_reads(value: object) -> None:
    text = json.dumps(value)
    for data in (text, f" \n\t{text}\r\n ", text.encode(), text.encode("utf-16"), text.encode("utf-32-le"),
                 b"\xef\xbb\xbf" + text.encode()):  # fmt: skip
        got, want = jsonio.loads(data), json.loads(data)
        assert got == want or (isinstance(want, float) and math.isnan(want) and math.isnan(got))
        assert type(got) is type(want)


@pytest.mark.parametrize(
    "bad", ["", " ", "{", "[1,]", "{'a': 1}", "1 2", '"\\x"', "nul\x00", "\ufeff{}", "[" * 100_000]
)
def test_loads_refuses_what_json_refuses(bad: str) -> None:
    with pytest.raises((ValueError, RecursionError)) as ours:
        jsonio.loads(bad)
    with pytest.raises((ValueError, RecursionError)) as theirs:
        json.loads(bad)
    assert type(ours.value) is type(theirs.value) or issubclass(type(theirs.value), ValueError)


def test_the_pretooluse_path_imports_neither_json_nor_re() -> None:
    """What a PreToolUse hook deciding alone loads, beside what it must: no json, re or enum."""
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); from governor.runtime import runner; "
        "from governor.engine import decide, sqlite_ledger; from governor.policy import compiled; "
        "print(sorted(m for m in ('json', 're', 'enum', 'signal') if m in sys.modules))"
    )
    out = fresh_process(probe)
    assert out.strip() == "[]", out


def test_bad_input_raises_jsons_error_in_a_process_that_never_imported_json() -> None:
    """The C scanner looks json's error class up to raise it; the hook has not imported json."""
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); from governor import jsonio\n"
        "for bad in (b'{\"a\": 1', b'[1,]', b'1 2', b''):\n"
        "    try: jsonio.loads(bad)\n"
        "    except ValueError as err: print(type(err).__name__)\n"
    )
    out = fresh_process(probe)
    assert out.split() == ["JSONDecodeError"] * 4, out
