"""Reading a policy file: YAML to plain data, keeping where each value was written.

PyYAML alone hides the mistakes a team lead makes most: a duplicate key silently keeps
the last value, `no` silently becomes false, a tab is a cryptic scanner error. This module
reads the node tree itself so each of those becomes a located `Problem`.
"""

from __future__ import annotations

from typing import Any

import yaml

Path = tuple[str | int, ...]

# YAML 1.1 booleans that are not spelled true/false; YAML 1.2 tools read them as strings.
_AMBIGUOUS_BOOLS = {"y", "yes", "n", "no", "on", "off"}
_BOOL_TAG = "tag:yaml.org,2002:bool"


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


def read_policy_text(text: str, file: str) -> Document:
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
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
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
    doc.data = _build(root, (), doc, loader)
    if not isinstance(doc.data, dict):
        doc.problem(_pos(root), "a policy is a mapping of keys (version, limits, ...), not a single value")
        doc.data = None
    return doc


def read_policy_file(file: str) -> Document:
    try:
        with open(file, encoding="utf-8") as handle:
            text = handle.read()
    except UnicodeDecodeError as err:
        doc = Document(file)
        doc.problem((1, 1), f"not UTF-8 text ({err.reason} at byte {err.start})")
        return doc
    except OSError as err:
        doc = Document(file)
        doc.problem((1, 1), f"cannot read the file: {err.strerror}")
        return doc
    return read_policy_text(text, file)


def _build(node: yaml.Node, path: Path, doc: Document, loader: yaml.SafeLoader) -> Any:
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
