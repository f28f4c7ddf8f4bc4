"""Layering policy files into one effective policy, with located problems and provenance.

Cold path (yaml + pydantic). Layers: the shipped default, then a team policy (any change),
then a local override (tighten only, except keys the team lists in loosen_allowed).
Mappings merge key by key (`key: null` removes an inherited mapping); a list replaces the
list below it; a number over a limit (`max_search_calls: 3`) is its value, the action kept.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from governor import __version__
from governor.engine.rules import index
from governor.policy.diff import LOOSENED, Change, compare, is_allowed
from governor.policy.document import Document, Path, Problem, read_policy_file, read_policy_text
from governor.policy.model import Policy
from governor.policy.sources import Sources, built_digest, shipped_file, shipped_policy_path

LAYER_ORDER = {"default": 0, "team": 1, "managed": 1, "local": 2}


class Origin:
    """Where an effective value was written."""

    __slots__ = ("col", "file", "kind", "line")

    def __init__(self, kind: str, file: str, line: int, col: int) -> None:
        self.kind, self.file, self.line, self.col = kind, file, line, col

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


class Effective:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.origins: dict[Path, Origin] = {}
        self.policy: Policy | None = None
        self.problems: list[Problem] = []
        self.layers: list[tuple[str, Document]] = []
        self.changes_by_local: list[Change] = []

    def origin_of(self, path: Path) -> Origin | None:
        """Who set `path`: for a subtree, the highest layer that wrote any part of it."""
        found = [o for p, o in self.origins.items() if p[: len(path)] == path]
        if not found:
            return None
        exact = self.origins.get(path)
        top = max(found, key=lambda o: LAYER_ORDER.get(o.kind, 0))
        if exact is not None and LAYER_ORDER.get(exact.kind, 0) >= LAYER_ORDER.get(top.kind, 0):
            return exact
        return top

    @property
    def ok(self) -> bool:
        return self.policy is not None and not self.problems

    def dumped(self) -> dict[str, Any]:
        assert self.policy is not None
        return self.policy.model_dump(mode="json")


def _merge(base: Any, over: Any, path: Path, kind: str, doc: Document, origins: dict[Path, Origin]) -> Any:
    if _is_limit(base) and isinstance(over, int) and not isinstance(over, bool):
        over = {"value": over}  # `max_search_calls: 3`: the value; the action stays the one below
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            if value is None and isinstance(base.get(key), dict):
                del out[key]  # `name: null` removes an inherited entry (a trigger, a tier, an agent)
                for stale in [p for p in origins if p[: len(path) + 1] == (*path, key)]:
                    del origins[stale]
                continue
            out[key] = _merge(base.get(key), value, (*path, key), kind, doc, origins)
        return out
    line, col = doc.position(path)
    for stale in [p for p in origins if p[: len(path)] == path]:
        del origins[stale]
    _record(over, path, kind, doc, origins)
    origins[path] = Origin(kind, doc.file, line, col)
    return over


def _is_limit(value: Any) -> bool:
    """A limit's mapping ({value, enforce}), which a layer may also write as its value alone."""
    return isinstance(value, dict) and set(value) == {"value", "enforce"}


def _record(value: Any, path: Path, kind: str, doc: Document, origins: dict[Path, Origin]) -> None:
    line, col = doc.position(path)
    origins[path] = Origin(kind, doc.file, line, col)
    if isinstance(value, dict):
        for key, child in value.items():
            _record(child, (*path, key), kind, doc, origins)
    elif isinstance(value, list):
        for number, child in enumerate(value):
            _record(child, (*path, number), kind, doc, origins)


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model that validates the mapping at `loc` (for did-you-mean)."""
    model: Any = Policy
    for part in loc:
        if isinstance(model, type) and issubclass(model, BaseModel):
            field = model.model_fields.get(str(part))
            if field is None:
                return None
            model = field.annotation
        else:
            model = _unwrap(model, part)
        model = _strip_optional(model)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _strip_optional(tp: Any) -> Any:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    if typing.get_origin(tp) is typing.Annotated:
        return typing.get_args(tp)[0]
    return tp


def _unwrap(tp: Any, part: Any) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def _choices(annotation: Any) -> list[str]:
    annotation = _strip_optional(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return [str(a) for a in typing.get_args(annotation)]
    return []


def _key_choices(loc: tuple[Any, ...]) -> list[str]:
    """Allowed keys of a dict whose key type is a Literal (e.g. trigger names)."""
    parent = _model_at(loc[:-1])
    if parent is None:
        return []
    field = parent.model_fields.get(str(loc[-1]))
    if field is None:
        return []
    args = typing.get_args(_strip_optional(field.annotation))
    return _choices(args[0]) if typing.get_origin(_strip_optional(field.annotation)) is dict and args else []


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _describe(error: Any) -> tuple[tuple[Any, ...], bool, str]:
    """(location in the data, whether it points at a key, message) for one pydantic error."""
    loc = tuple(error["loc"])
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1])
        choices = list(model.model_fields) if model else []
        return loc, True, f"unknown key {loc[-1]!r}{_suggest(str(loc[-1]), choices)}"
    if kind == "missing":
        return loc[:-1], False, f"missing required key {loc[-1]!r}"
    if "[key]" in loc:
        at = loc[: loc.index("[key]")]
        choices = _key_choices(at[:-1]) if len(at) > 1 else []
        if not choices:
            choices = _key_choices(at)
        return (
            at,
            True,
            f"unknown name {at[-1]!r}: expected one of {', '.join(choices)}{_suggest(str(at[-1]), choices)}",
        )
    if kind == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        words = [w.strip(" '") for w in expected.replace(" or ", ",").split(",") if w.strip(" '")]
        return loc, False, f"{value!r} is not allowed here: expected {expected}{_suggest(str(value), words)}"
    if kind in ("string_too_long", "string_too_short"):
        limit = error.get("ctx", {}).get("max_length" if kind == "string_too_long" else "min_length")
        bound = "at most" if kind == "string_too_long" else "at least"
        return (
            loc,
            False,
            f"{str(value)[:40]!r}… is too {'long' if bound == 'at most' else 'short'}: {bound} {limit} characters",
        )
    if kind in (
        "greater_than_equal",
        "less_than_equal",
        "too_short",
        "too_long",
        "greater_than",
        "less_than",
    ):
        return loc, False, f"{value!r} is out of range: {error['msg'].lower()}"
    if kind == "value_error":
        return loc, False, str(error.get("ctx", {}).get("error", error["msg"]))
    if kind == "model_type" and {"value", "enforce"} <= set(getattr(_model_at(loc), "model_fields", ())):
        return loc, False, (f"wrong type: expected a number ({loc[-1]}: 3) or the value and its action "
                            f"({loc[-1]}: {{value: 3, enforce: block}}), got {type(value).__name__} {value!r}")  # fmt: skip
    expected = error["msg"].replace("Input should be ", "expected ")
    return loc, False, f"wrong type: {expected}, got {type(value).__name__} {value!r}"


def _validate(eff: Effective) -> None:
    try:
        eff.policy = Policy.model_validate(eff.data)
    except ValidationError as err:
        for error in err.errors():
            loc, at_key, message = _describe(error)
            origin = _origin_for(eff, loc)
            doc = _doc(eff, origin.file) if origin else None
            if origin and doc and tuple(loc) in doc.ambiguous:
                continue  # already reported as the boolean trap
            if origin is None:
                file, line, col = eff.layers[-1][1].file, 1, 1
            elif doc is not None:
                line, col = doc.position(tuple(loc), key=at_key)
                file = origin.file
            else:
                file, line, col = origin.file, origin.line, origin.col
            eff.problems.append(Problem(file, line, col, message))


def _origin_for(eff: Effective, loc: tuple[Any, ...]) -> Origin | None:
    """The file that wrote `loc`, or for an absent key the file that wrote its parent."""
    for cut in range(len(loc), -1, -1):
        origin = eff.origins.get(tuple(loc[:cut]))
        if origin is not None:
            return origin
    return None


def _doc(eff: Effective, file: str) -> Document | None:
    for _, doc in eff.layers:
        if doc.file == file:
            return doc
    return None


def build(layers: list[tuple[str, str]], texts: dict[str, str] | None = None) -> Effective:
    """Read and layer the files [(kind, path)], kinds: default, team, local (`texts`: a file's
    text to read instead of the file, as committed: governor.policy.committed)."""
    eff = Effective()
    team_data: dict[str, Any] | None = None
    for kind, path in layers:
        if texts and path in texts:  # the shipped default read once already: libyaml when it is as built
            digest = hashlib.sha256(texts[path].encode("utf-8")).hexdigest() if path == shipped_policy_path() else ""
            shipped = bool(digest) and digest == built_digest()
            doc = read_policy_text(texts[path], path, shipped)
        else:
            doc = read_policy_file(path, built_digest() if path == shipped_policy_path() else None)
        eff.layers.append((kind, doc))
        eff.problems.extend(doc.problems)
        if doc.data is None:
            continue
        if kind == "local":
            team_data = dict(eff.data)
        eff.data = _merge(eff.data, doc.data, (), kind, doc, eff.origins) if eff.data else doc.data
        if len(eff.layers) == 1:
            _record(doc.data, (), kind, doc, eff.origins)
    if eff.problems and any(p.message.startswith(("YAML", "the file is", "tab")) for p in eff.problems):
        eff.problems.sort(key=Problem.sort_key)
        return eff
    _validate(eff)
    if eff.policy is not None and team_data is not None:
        _check_local(eff, team_data)
    eff.problems.sort(key=Problem.sort_key)
    return eff


def _check_local(eff: Effective, team_data: dict[str, Any]) -> None:
    """A local override may tighten anything, and loosen only what the team allows."""
    try:
        team = Policy.model_validate(team_data)
    except ValidationError:
        return  # the team file's own problems are already reported
    allowed = team.loosen_allowed
    eff.changes_by_local = compare(team.model_dump(mode="json"), eff.dumped())
    local_doc = next(doc for kind, doc in eff.layers if kind == "local")
    for change in eff.changes_by_local:
        if change.kind != LOOSENED or is_allowed(change, allowed):
            continue
        path = tuple(change.path.split("."))
        line, col = _position_in(local_doc, path)
        eff.problems.append(
            Problem(
                local_doc.file,
                line,
                col,
                f"a local override may only tighten the team policy: {change.path} is loosened "
                f"({change.old} -> {change.new}); ask the team to list {change.path.split('.')[0]}"
                f"{'.' + change.path.split('.')[1] if '.' in change.path else ''} under loosen_allowed",
            )
        )
    if any(p.file == local_doc.file for p in eff.problems):
        eff.policy = None


def _position_in(doc: Document, path: tuple[str, ...]) -> tuple[int, int]:
    for cut in range(len(path), 0, -1):
        if path[:cut] in doc.keys:
            return doc.keys[path[:cut]]
    return (1, 1)


def digest_of(policy: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(policy, sort_keys=True).encode()).hexdigest()


def text_tokens(policy: dict[str, Any]) -> dict[str, int]:
    """Token counts of the fixed lines a hook may add to the model's context.

    Counted once here, so a prompt hook never loads a tokenizer. If the unit cannot load,
    each line counts its UTF-8 bytes: never fewer than its tokens in any unit.
    """
    from governor.engine.budgets import advice_line
    from governor.engine.rules import FIXED_LINES
    from governor.engine.tokens import UnitUnavailable, counter

    lines = {n: advice_line(policy, n) for n in policy["memory_needs"]["classes"]}
    texts = {f"advice:{n}": line for n, line in lines.items() if line}
    texts.update({f"static:{n}": text for n, text in FIXED_LINES.items()})
    try:
        count = counter(policy["token_counter"]).count
    except UnitUnavailable:
        return {name: len(text.encode("utf-8")) for name, text in texts.items()}
    return {name: count(text) for name, text in texts.items()}


def topic_namespaces() -> list[dict[str, str]]:
    """The namespace contract (schemas/memory-topics.yaml) that topic keys are checked against."""
    import yaml

    with open(shipped_file("schemas", "memory-topics.yaml"), encoding="utf-8") as handle:
        contract = yaml.safe_load(handle)
    return [{"name": n["name"], "pattern": n["pattern"], "example": n["example"]} for n in contract["namespaces"]]


_lookups: dict[str, str] = {}  # digest -> the lookups derived from that policy, as JSON


def compiled_blob(eff: Effective) -> dict[str, Any]:
    policy = eff.dumped()
    digest = digest_of(policy)
    derived = _lookups.get(digest)  # a project's first compile compiles what git holds too: often the same
    if derived is None:
        lookups = index(policy)
        lookups["text_tokens"] = text_tokens(policy)
        lookups["topic_namespaces"] = topic_namespaces()
        if len(_lookups) >= 8:  # a long-lived process (the warm server) sees policy after policy
            _lookups.clear()
        derived = _lookups[digest] = json.dumps(lookups)
    return {
        "version": __version__,
        "digest": digest,
        "sources": [doc.file for _, doc in eff.layers],
        "policy": policy,
        "index": json.loads(derived),  # a copy of its own: a caller may change it
    }


def compile_data(policy: dict[str, Any]) -> dict[str, Any] | None:
    """The compiled form of a whole policy already held as data (an accepted one), if valid."""
    eff = Effective()
    eff.data = policy
    try:
        eff.policy = Policy.model_validate(policy)
    except ValidationError:
        return None
    return compiled_blob(eff)


def compile_layers(layers: list[tuple[str, str]], texts: dict[str, str] | None = None
                   ) -> tuple[dict[str, Any] | None, list[str]]:  # fmt: skip
    """The compiled form of `layers` (`texts`: as `build`), or None and every problem as text."""
    eff = build(layers, texts)
    if not eff.ok:
        return None, [str(p) for p in eff.problems] or ["the policy could not be validated"]
    return compiled_blob(eff), []


def compile_sources(sources: Sources, only_default: bool = False) -> tuple[dict[str, Any] | None, list[str]]:
    """The compiled form of the effective policy, or None and every problem as text."""
    return compile_layers([("default", shipped_policy_path())] if only_default else sources.layers())


def compile_committed(sources: Sources) -> dict[str, Any] | None:
    """The compiled policy as the project's files are committed at git HEAD; None when the project
    is not in git or what is committed is no valid policy."""
    from governor.policy.committed import committed_layers

    committed = committed_layers(sources)
    return compile_layers(*committed)[0] if committed is not None else None


def check_files(files: list[str]) -> Effective:
    """`policy check FILE`: a team policy file is checked as a layer over the shipped default; a
    local override (`*.local.yaml`) over the team file beside it, the layer it overrides, as the
    hooks and doctor compare it."""
    layers = [("default", shipped_policy_path())]
    for file in files:
        if file.endswith(".local.yaml"):
            team = file[: -len(".local.yaml")] + ".yaml"
            if os.path.isfile(team) and ("team", team) not in layers:
                layers.append(("team", team))
            layers.append(("local", file))
        else:
            layers.append(("team", file))
    return build(layers)
