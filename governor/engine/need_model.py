"""The learned memory-need model: the fallback for prompts no pattern of the policy matches.

A multinomial logistic regression over character 3- to 5-grams, words and word pairs of the
folded prompt (see `classify.fold`), trained offline by scripts/train_memory_needs.py from
the labelled sets in tests/fixtures/ and shipped beside this module as data (need_model.json):
no download, no network, standard library only, the same answer for the same prompt.

The weights are already divided by the temperature the trainer fitted to held-out
predictions, so `probabilities` are calibrated: of the prompts the model gives 0.8, about 8
in 10 are right. `classify` takes the model's class only at or above the policy's
`memory_needs.model_threshold`.

The vocabulary is shipped as the sorted CRC-32s of its features, looked up by binary search:
loading is decoding two base64 strings (no dictionary of ~19k strings to build), and an
unseen feature matches by accident with odds of about 1 in 200,000 (the trainer refuses two
features with one CRC). Weights are int8 with one scale.

Loaded on first use (UserPromptSubmit only: `classify` imports this module when no pattern
matched), kept for the life of the process, and loaded again if the file changes (the warm
server outlives a retrain in a checkout).
"""

from __future__ import annotations

import math
import os
import sys
from array import array
from binascii import a2b_base64, crc32
from bisect import bisect_left
from itertools import pairwise

from governor.engine.patterns import Lazy

FORMAT = "memory-governor need model 1"
WEIGHTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "need_model.json")
CHAR_SIZES = (3, 4, 5)
# A pasted log or diff adds nothing after its first screen; the ask is at the start or the end.
HEAD, TAIL = 400, 300
_WORD = Lazy(r"[a-z0-9_]+")


def features(folded: str) -> set[str]:
    """The distinct features of a folded prompt: `w word`, `b word word`, character n-grams of the
    words joined by single spaces (so they span word boundaries), and `?` for a question."""
    text = folded if len(folded) <= HEAD + TAIL else folded[:HEAD] + " " + folded[-TAIL:]
    words = _WORD.findall(text)
    found = {"w " + w for w in words}
    found.update("b " + a + " " + b for a, b in pairwise(words))
    joined = " " + " ".join(words) + " "
    for size in CHAR_SIZES:
        found.update(joined[i : i + size] for i in range(len(joined) - size + 1))
    if "?" in text:
        found.add("?")
    return found


def feature_key(feature: str) -> int:
    return crc32(feature.encode("utf-8"))


def softmax(logits: list[float]) -> list[float]:
    top = max(logits)
    exps = [math.exp(z - top) for z in logits]
    total = sum(exps)
    return [e / total for e in exps]


class Model:
    """`keys[j]` is the CRC-32 of feature j; `columns[k][j]` its weight for class k."""

    __slots__ = ("bias", "classes", "columns", "keys", "scale")

    def __init__(
        self, classes: list[str], keys: array[int], columns: list[array[int]], scale: float, bias: list[float]
    ) -> None:
        self.classes = classes
        self.keys = keys
        self.columns = columns
        self.scale = scale
        self.bias = bias

    def logits(self, folded: str) -> list[float]:
        found = features(folded)
        keys, count = self.keys, len(self.keys)
        rows = []
        for key in map(crc32, map(str.encode, found)):  # feature_key, without a call per feature
            row = bisect_left(keys, key)
            if row < count and keys[row] == key:
                rows.append(row)
        # features are present or not, and the vector has unit length: a long prompt is not surer
        norm = self.scale / math.sqrt(len(found)) if found else 0.0
        return [
            b + sum(map(column.__getitem__, rows)) * norm for b, column in zip(self.bias, self.columns, strict=True)
        ]

    def probabilities(self, folded: str, among: list[str] | None = None) -> dict[str, float]:
        """Calibrated probability of each class, renormalised over `among` (the classes the policy
        lets words decide), most likely first."""
        logits = self.logits(folded)
        keep = [k for k, name in enumerate(self.classes) if among is None or name in among]
        if not keep:
            return {}
        probs = softmax([logits[k] for k in keep])
        ranked = sorted(zip(probs, keep, strict=True), key=lambda pair: -pair[0])
        return {self.classes[k]: p for p, k in ranked}


def _array(typecode: str, itemsize: int, encoded: str) -> array[int]:
    values = array(typecode, a2b_base64(encoded))
    if values.itemsize != itemsize:
        raise ValueError(f"array({typecode!r}) has {values.itemsize}-byte items here, the file has {itemsize}")
    if sys.byteorder == "big":
        values.byteswap()  # stored little-endian
    return values


def parse(raw: bytes) -> Model:
    from governor import jsonio  # not json, which imports re

    data = jsonio.loads(raw)
    if data.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT!r} file (format {data.get('format')!r})")
    classes = list(data["classes"])
    keys = _array("I", 4, data["keys"])
    weights = _array("b", 1, data["weights"])  # class-major: all of class 0's weights, then class 1's
    count = len(keys)
    if len(weights) != count * len(classes) or len(data["bias"]) != len(classes):
        raise ValueError("the weights do not match the vocabulary and the classes")
    columns = [weights[k * count : (k + 1) * count] for k in range(len(classes))]
    return Model(classes, keys, columns, float(data["scale"]), [float(b) for b in data["bias"]])


_loaded: tuple[tuple[str, int, int], Model] | None = None


def load(path: str | None = None) -> Model:
    """The model in `path` (the shipped WEIGHTS), parsed once per version of the file.
    Raises OSError or ValueError."""
    global _loaded
    path = path or WEIGHTS
    info = os.stat(path)
    version = (path, info.st_mtime_ns, info.st_size)
    if _loaded is not None and _loaded[0] == version:
        return _loaded[1]
    with open(path, "rb") as handle:
        model = parse(handle.read())
    _loaded = (version, model)
    return model
