"""Reading a policy file: YAML to plain data, keeping where each value was written.

PyYAML alone hides the mistakes a team lead makes most: a duplicate key silently keeps
the last value, `no` silently becomes false, a tab is a cryptic scanner error. This module
reads the node tree itself so each of those becomes a located `Problem`.

Reading is bounded before any work, because a hook reads the policy before it decides and a
hook that runs past its harness's timeout lets the call through unsaid: a file over MAX_BYTES
is not read, and a document with more than MAX_ALIASES aliases, more than MAX_NODES nodes once
its aliases are expanded, nested deeper than MAX_DEPTH, or that takes more than MAX_SECONDS of CPU to read, is a broken
policy (a located problem: the last valid policy stays in force, governor.policy.compiled).
"""

from __future__ import annotations

import os
import time
from typing import Any

import yaml

from governor.policy.sources import MAX_BYTES

Path = tuple[str | int, ...]

# YAML 1.1 booleans that are not spelled true/false; YAML 1.2 tools read them as strings.
_AMBIGUOUS_BOOLS = {"y", "yes", "n", "no", "on", "off"}
_BOOL_TAG = "tag:yaml.org,2002:bool"

MAX_ALIASES = 200
MAX_NODES = 20_000  # counted with aliases expanded (the shipped policy: about 850)
MAX_DEPTH = 50  # mappings and lists inside each other (the shipped policy: 6)
MAX_SECONDS = 1.0  # CPU seconds to read one file


class Unbounded(Exception):
    """The document is past a bound; `at` is where reading stopped (line, col)."""

    def __init__(self, message: str, at: tuple[int, int]) -> None:
        super().__init__(message)
        self.at = at


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that counts aliases and nodes as it composes, and stops past a bound."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.aliases = 0
        self.nodes = 0
        self.depth = 0
        self.deadline = time.thread_time() + MAX_SECONDS

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                self._stop(f"YAML with more than {MAX_ALIASES} aliases (*name)")
        self.nodes += 1
        if self.nodes > MAX_NODES:
            self._stop(f"YAML with more than {MAX_NODES} values")
        if not self.nodes % 256 and time.thread_time() > self.deadline:
            self._stop(f"YAML that takes more than {MAX_SECONDS:g} s to read")
        if self.depth >= MAX_DEPTH:
            self._stop(f"YAML nested more than {MAX_DEPTH} deep")
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def _stop(self, what: str) -> None:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        raise Unbounded(f"{what} is not read as a policy", _mark(event.start_mark))


def _mark(mark: Any) -> tuple[int, int]:
    return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)


class Problem:
    """One thing wrong with a policy, where it is, and what to do about it."""

    __slots__ = ("col", "file", "line", "message")

    def __init__(self, file: str, line: int, col: int, message: str) -> None:
        self.file, self.line, self.col, self.message = file, line, col, message

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "col": self.col, "message": self.message}

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.file, self.line, self.col, self.message)


class Document:
    """A parsed policy file: its data, the position of every value and key, its problems."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.data: Any = None
        self.values: dict[Path, tuple[int, int]] = {}
        self.keys: dict[Path, tuple[int, int]] = {}
        self.problems: list[Problem] = []
        self.ambiguous: set[Path] = set()
        self.built = 0  # values built so far, aliases expanded (MAX_NODES)

    def problem(self, pos: tuple[int, int], message: str) -> None:
        self.problems.append(Problem(self.file, pos[0], pos[1], message))

    def position(self, path: Path, *, key: bool = False) -> tuple[int, int]:
        """Where `path` was written; for a path that is absent, its nearest written parent."""
        table = self.keys if key else self.values
        if path in table:
            return table[path]
        for cut in range(len(path), -1, -1):
            if path[:cut] in self.values:
                return self.values[path[:cut]]
        return (1, 1)


def _pos(node: yaml.Node) -> tuple[int, int]:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


def _shipped_loader(text: str) -> Any:
    """libyaml's parser, for the shipped default exactly as built (its digest checked by the
    caller): ten times faster than the bounded pure-Python loader, and only for a file whose
    depth and size are known, since it cannot stop partway as _BoundedLoader does."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None:
        return None
    chosen = loader(text)
    chosen.deadline = time.thread_time() + MAX_SECONDS
    return chosen


def read_policy_text(text: str, file: str, shipped: bool = False) -> Document:
    """`shipped`: `text` is the shipped default as this version was built (read with libyaml)."""
    doc = Document(file)
    if not text.strip() or all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines()):
        doc.problem((1, 1), "the file is empty: write at least `version: 1`")
        return doc
    for number, line in enumerate(text.splitlines(), start=1):
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in indent:
            doc.problem((number, indent.index("\t") + 1), "tab used for indentation: indent with spaces")
    if doc.problems:
        return doc
    loader = (_shipped_loader(text) if shipped else None) or _BoundedLoader(text)
    try:
        root = loader.get_single_node()
    except Unbounded as err:
        doc.problem(err.at, str(err))
        return doc
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        at = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = " ".join(p for p in (err.context, err.problem) if p) or "invalid YAML"
        doc.problem(at, f"YAML syntax error: {what}")
        return doc
    except yaml.YAMLError as err:
        doc.problems.append(Problem(file, 1, 1, f"YAML error: {err}"))
        return doc
    finally:
        loader.dispose()
    if root is None:
        doc.problem((1, 1), "the file is empty: write at least `version: 1`")
        return doc
    try:
        doc.data = _build(root, (), doc, loader)
    except Unbounded as err:  # aliases that expand past MAX_NODES
        doc.problem(err.at, str(err))
        doc.data = None
        return doc
    if not isinstance(doc.data, dict):
        doc.problem(_pos(root), "a policy is a mapping of keys (version, limits, ...), not a single value")
        doc.data = None
    return doc


def read_policy_file(file: str, built_digest: str | None = None) -> Document:
    """`built_digest`: the sha256 the shipped default was built with, when `file` is it: read with
    libyaml when its bytes still have that digest (else as any other file)."""
    try:
        from governor.state import open_regular

        with open(open_regular(file, follow=True), "rb") as handle:  # a FIFO put there is not waited on
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(MAX_BYTES + 1) if size <= MAX_BYTES else b""
        if size > MAX_BYTES or len(data) > MAX_BYTES:  # checked before reading; a file growing as it is read too
            doc = Document(file)
            doc.problem((1, 1), f"the file is larger than a policy can be ({max(size, len(data))} bytes; "
                                f"at most {MAX_BYTES}): not read")  # fmt: skip
            return doc
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        doc = Document(file)
        doc.problem((1, 1), f"not UTF-8 text ({err.reason} at byte {err.start})")
        return doc
    except OSError as err:
        doc = Document(file)
        doc.problem((1, 1), f"cannot read the file: {err.strerror}")
        return doc
    shipped = built_digest is not None and _sha256(data) == built_digest
    return read_policy_text(text, file, shipped)


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _build(node: yaml.Node, path: Path, doc: Document, loader: Any) -> Any:
    doc.built += 1
    if doc.built > MAX_NODES or (not doc.built % 256 and time.thread_time() > loader.deadline):
        raise Unbounded(f"YAML that expands past {MAX_NODES} values (its aliases expanded) or takes more than "
                        f"{MAX_SECONDS:g} s to read is not read as a policy", _pos(node))  # fmt: skip
    doc.values[path] = _pos(node)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                doc.problem(_pos(key_node), "a key must be a plain word, not a list or mapping")
                continue
            key = key_node.value  # keys stay text: `on:` is the word, not true
            child = (*path, key)
            if key in out:
                first = doc.keys[child]
                doc.problem(
                    _pos(key_node),
                    f"duplicate key {key!r} (first written at line {first[0]}); YAML would keep only "
                    "this one: remove one of them",
                )
                continue
            doc.keys[child] = _pos(key_node)
            out[key] = _build(value_node, child, doc, loader)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, (*path, index), doc, loader) for index, item in enumerate(node.value)]
    assert isinstance(node, yaml.ScalarNode)
    if node.tag == _BOOL_TAG and node.style is None and node.value.lower() in _AMBIGUOUS_BOOLS:
        doc.ambiguous.add(path)
        doc.problem(
            _pos(node),
            f"`{node.value}` is read as a boolean by YAML 1.1 and as text by YAML 1.2: quote it "
            f"('{node.value}') if you mean the word, or write true/false",
        )
        return node.value
    try:
        return loader.construct_object(node, deep=True)
    except yaml.YAMLError as err:
        doc.problem(_pos(node), f"cannot read this value: {err}")
        return None
