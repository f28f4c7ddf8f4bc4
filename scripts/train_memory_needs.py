#!/usr/bin/env python3
"""Train the memory-need model shipped as governor/engine/need_model.json, reproducibly.

    python scripts/train_memory_needs.py            # write governor/engine/need_model.json
    python scripts/train_memory_needs.py --check    # retrain; exit 1 unless it equals the shipped file
    python scripts/train_memory_needs.py --without memory_needs_holdout.jsonl --out /tmp/m.json
                                                    # a validation model that never saw that set

Standard library only, deterministic: the same sets give the same file, byte for byte.

1. Features (governor.engine.need_model.features) of every prompt in TRAINING_SETS; the
   vocabulary is every feature seen in at least MIN_PROMPTS prompts.
2. Calibration: for each set, a model trained on the other sets predicts it (each set was
   written at another time, so this is the closest thing to prompts never seen); one
   temperature is fitted to those held-out predictions (least log-loss).
3. The shipped model: trained on all sets, divided by that temperature, weights as int8;
   the vocabulary as the sorted CRC-32s of its features (see governor/engine/need_model.py).

The fresh held-out set (tests/fixtures/memory_needs_fresh.jsonl) is never read here.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
from array import array
from base64 import b64encode
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from governor.engine.classify import fold  # noqa: E402
from governor.engine.need_model import FORMAT, WEIGHTS, feature_key, features, softmax  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
TRAINING_SETS = (
    "memory_needs.jsonl",
    "memory_needs_dev2.jsonl",
    "memory_needs_dev3.jsonl",
    "memory_needs_holdout.jsonl",
)
CLASSES = ("none", "recent_session", "similar_issue", "architecture_decision", "explicit_user_recall")
MIN_PROMPTS = 2  # a feature seen in one prompt only is that prompt's, not the class's
L2 = 1e-4
EPOCHS = 20
RATE = 0.5
SEED = 20261130
INT8 = 127

Example = tuple[list[int], float, int]  # vocabulary rows, 1/sqrt(feature count), class


def read_sets(names: tuple[str, ...] = TRAINING_SETS) -> list[dict[str, str]]:
    rows = []
    for name in names:
        for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                rows.append({"set": name, "label": row["label"], "folded": fold(row["prompt"])})
    return rows


def vocabulary(rows: list[dict[str, str]]) -> list[str]:
    """The features seen in at least MIN_PROMPTS prompts, in the order of their keys (CRC-32)."""
    seen: dict[str, int] = {}
    for row in rows:
        for feature in sorted(features(row["folded"])):
            seen[feature] = seen.get(feature, 0) + 1
    kept = sorted((feature_key(f), f) for f, n in seen.items() if n >= MIN_PROMPTS)
    clashes = [(a, b) for (ka, a), (kb, b) in pairwise(kept) if ka == kb]
    if clashes:
        raise SystemExit(f"features with one CRC-32, which the shipped model cannot tell apart: {clashes}")
    return [f for _, f in kept]


def examples(rows: list[dict[str, str]], vocab: list[str]) -> list[Example]:
    index = {f: i for i, f in enumerate(vocab)}
    out = []
    for row in rows:
        found = sorted(features(row["folded"]))  # sorted: sums in one order, so one result
        rows_of = [index[f] for f in found if f in index]
        out.append((rows_of, 1 / math.sqrt(len(found)) if found else 0.0, CLASSES.index(row["label"])))
    return out


def train(data: list[Example], size: int) -> tuple[list[list[float]], list[float]]:
    """Multinomial logistic regression by stochastic gradient descent with L2, in a seeded order.

    Weights are kept as `stored * scale` so the L2 shrink of every weight is one multiplication."""
    width = len(CLASSES)
    weights = [[0.0] * size for _ in range(width)]
    bias = [0.0] * width
    order = list(range(len(data)))
    shuffle = random.Random(SEED).shuffle
    scale, step = 1.0, 0
    for _ in range(EPOCHS):
        shuffle(order)
        for i in order:
            rows, norm, label = data[i]
            rate = RATE / (1 + RATE * L2 * step)
            step += 1
            logits = [bias[k] + scale * norm * sum(map(weights[k].__getitem__, rows)) for k in range(width)]
            error = softmax(logits)
            error[label] -= 1.0
            scale *= 1 - rate * L2
            for k in range(width):
                delta = rate * error[k] * norm / scale
                column = weights[k]
                for j in rows:
                    column[j] -= delta
                bias[k] -= rate * error[k]
            if scale < 1e-6:  # fold the shrink back in before it underflows
                weights = [[w * scale for w in column] for column in weights]
                scale = 1.0
    return [[w * scale for w in column] for column in weights], bias


def logits_of(model: tuple[list[list[float]], list[float]], example: Example) -> list[float]:
    weights, bias = model
    rows, norm, _ = example
    return [bias[k] + norm * sum(map(weights[k].__getitem__, rows)) for k in range(len(CLASSES))]


def log_loss(held: list[tuple[list[float], int]], temperature: float) -> float:
    total = 0.0
    for logits, label in held:
        total -= math.log(max(softmax([z / temperature for z in logits])[label], 1e-300))
    return total / len(held)


def fit_temperature(held: list[tuple[list[float], int]]) -> float:
    """Golden-section search on log T in [1/100, 100]: log-loss is unimodal in T."""
    lo, hi = math.log(0.01), math.log(100.0)
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if log_loss(held, math.exp(a)) < log_loss(held, math.exp(b)):
            hi = b
        else:
            lo = a
    return round(math.exp((lo + hi) / 2), 4)


def macro_f1(truth: list[int], predicted: list[int]) -> float:
    scores = []
    for k in sorted(set(truth)):
        tp = sum(1 for t, p in zip(truth, predicted, strict=True) if t == k and p == k)
        fp = sum(1 for t, p in zip(truth, predicted, strict=True) if t != k and p == k)
        fn = sum(1 for t, p in zip(truth, predicted, strict=True) if t == k and p != k)
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(scores) / len(scores)


def held_out(
    rows: list[dict[str, str]], names: tuple[str, ...]
) -> tuple[list[tuple[list[float], int]], list[dict[str, object]]]:
    """Each set predicted by a model trained on the others: raw logits, and per-set macro-F1."""
    held: list[tuple[list[float], int]] = []
    per_set: list[dict[str, object]] = []
    for name in names:
        rest = [r for r in rows if r["set"] != name]
        vocab = vocabulary(rest)
        model = train(examples(rest, vocab), len(vocab))
        mine = examples([r for r in rows if r["set"] == name], vocab)
        logits = [logits_of(model, e) for e in mine]
        held += [(z, e[2]) for z, e in zip(logits, mine, strict=True)]
        predicted = [max(range(len(CLASSES)), key=z.__getitem__) for z in logits]
        per_set.append(
            {"set": name, "prompts": len(mine), "macro_f1": round(macro_f1([e[2] for e in mine], predicted), 3)}
        )
    return held, per_set


def reliability(held: list[tuple[list[float], int]], temperature: float) -> list[dict[str, object]]:
    """How often the top class is right, by calibrated confidence band."""
    bands: dict[float, list[int]] = {}
    for logits, label in held:
        probs = softmax([z / temperature for z in logits])
        top = max(range(len(CLASSES)), key=probs.__getitem__)
        band = min(math.floor(probs[top] * 10), 9) / 10
        tally = bands.setdefault(band, [0, 0])
        tally[0] += 1
        tally[1] += top == label
    return [
        {"confidence": f"{b:.1f}-{b + 0.1:.1f}", "prompts": n, "right": right}
        for b, (n, right) in sorted(bands.items())
    ]


def build(names: tuple[str, ...] = TRAINING_SETS) -> str:
    rows = read_sets(names)
    held, per_set = held_out(rows, names)
    temperature = fit_temperature(held)
    vocab = vocabulary(rows)
    weights, bias = train(examples(rows, vocab), len(vocab))
    largest = max(abs(w) for column in weights for w in column) / temperature
    scale = float(f"{largest / INT8:.6e}")
    packed = array("b", bytes(0))  # class-major
    for column in weights:
        packed.extend(max(-INT8, min(INT8, round(w / temperature / scale))) for w in column)
    keys = array("I", [feature_key(f) for f in vocab])
    assert keys.itemsize == 4
    if sys.byteorder == "big":
        keys.byteswap()  # stored little-endian
    sources = [
        {"file": f"tests/fixtures/{name}", "prompts": sum(r["set"] == name for r in rows),
         "sha256": hashlib.sha256((FIXTURES / name).read_bytes()).hexdigest()}
        for name in names
    ]  # fmt: skip
    document = {
        "format": FORMAT,
        "classes": list(CLASSES),
        "trained_from": sources,
        "method": {
            "model": "multinomial logistic regression, SGD",
            "l2": L2,
            "epochs": EPOCHS,
            "rate": RATE,
            "seed": SEED,
            "min_prompts_per_feature": MIN_PROMPTS,
        },
        "calibration": {
            "temperature": temperature,
            "held_out_log_loss": round(log_loss(held, temperature), 4),
            "uncalibrated_log_loss": round(log_loss(held, 1.0), 4),
            "held_out_by_set": per_set,
            "reliability": reliability(held, temperature),
        },
        "bias": [round(b / temperature, 6) for b in bias],
        "scale": scale,
        "features": len(vocab),
        "keys": b64encode(keys.tobytes()).decode("ascii"),
        "weights": b64encode(packed.tobytes()).decode("ascii"),
    }
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(WEIGHTS))
    parser.add_argument("--check", action="store_true", help="Retrain and compare with --out instead of writing it.")
    parser.add_argument("--without", action="append", default=[], choices=TRAINING_SETS, metavar="SET",
                        help="Leave this training set out (a validation model; never the shipped one).")  # fmt: skip
    args = parser.parse_args()
    if args.without and args.out == Path(WEIGHTS):
        parser.error("--without needs --out: the shipped model is trained on every set")
    text = build(tuple(n for n in TRAINING_SETS if n not in args.without))
    if args.check:
        same = args.out.read_text(encoding="utf-8") == text
        print(f"{args.out}: {'reproduced byte for byte' if same else 'DIFFERS from a fresh training run'}")
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    calibration = json.loads(text)["calibration"]
    print(f"wrote {args.out} ({len(text.encode()) // 1024} KiB); temperature {calibration['temperature']}")
    for entry in calibration["held_out_by_set"]:
        print(f"  {entry['set']}: macro-F1 {entry['macro_f1']} predicted by a model trained on the other sets")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
