"""JSON in and out through the interpreter's C codec (`_json`) alone, for the hook's hot path.

The `json` package imports `re`, and `re` imports `enum`: ~5 ms of a PreToolUse hook that
decides in its own process, where nothing else needs either. These are the C functions `json`
itself calls, with its defaults, so the text is the same as json.dumps / json.loads give;
where the C codec is missing (another interpreter) they are json's own functions.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

try:
    import _json
except ImportError:  # pragma: no cover - CPython has it
    _json = None  # type: ignore[assignment]

_WHITESPACE = " \t\n\r"
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Decoder:
    """The attributes the C scanner reads from a json.JSONDecoder (its defaults)."""

    def __init__(self) -> None:
        self.strict = True
        self.object_hook = self.object_pairs_hook = None
        self.parse_float, self.parse_int, self.parse_constant = float, int, _CONSTANTS.__getitem__
        self.memo: dict[str, str] = {}


_decoder = _Decoder()
_scan: "Any" = _json.make_scanner(_decoder) if _json is not None else None  # type: ignore[arg-type]


def loads(data: "str | bytes | bytearray") -> "Any":
    """json.loads(data): ValueError (json.JSONDecodeError) for text that is not one JSON value."""
    if _scan is None:  # pragma: no cover
        import json

        return json.loads(data)
    if not isinstance(data, str):
        data = bytes(data).decode(_encoding(bytes(data)), "surrogatepass")
    elif data.startswith("\ufeff"):
        raise ValueError("Unexpected UTF-8 BOM (decode using utf-8-sig): line 1 column 1 (char 0)")
    start = len(data) - len(data.lstrip(_WHITESPACE))
    try:
        value, end = _scan(data, start)
    except (StopIteration, SystemError):  # not JSON: json's own error (the C scanner needs json to raise it)
        import json

        return json.loads(data)
    finally:
        _decoder.memo.clear()
    if data[end:].strip(_WHITESPACE):
        import json

        return json.loads(data)  # raises json's "Extra data" error
    return value


def _encoding(data: bytes) -> str:
    """json.detect_encoding: UTF-8, -16 or -32, by the BOM or the pattern of zero bytes."""
    if data.startswith((b"\x00\x00\xfe\xff", b"\xff\xfe\x00\x00")):
        return "utf-32"
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    if data.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    if len(data) >= 4:
        if not data[0]:
            return "utf-16-be" if data[1] else "utf-32-be"
        if not data[1]:
            return "utf-16-le" if data[2] or data[3] else "utf-32-le"
    elif len(data) == 2:
        if not data[0]:
            return "utf-16-be"
        if not data[1]:
            return "utf-16-le"
    return "utf-8"


def dumps(value: "Any", ensure_ascii: bool = True, sort_keys: bool = False,
          default: "Callable[[Any], Any] | None" = None) -> str:  # fmt: skip
    """json.dumps(value, ensure_ascii=..., sort_keys=..., default=...), separators and all."""
    if _json is None:  # pragma: no cover
        import json

        return json.dumps(value, ensure_ascii=ensure_ascii, sort_keys=sort_keys, default=default)
    quote = _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring
    if isinstance(value, str):
        return str(quote(value))
    encode = _json.make_encoder({}, default or _unserializable, quote, None, ": ", ", ", sort_keys, False, True)
    return "".join(encode(value, 0))


def _unserializable(value: "Any") -> "Any":
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
