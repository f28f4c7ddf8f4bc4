#!/usr/bin/env python3
"""Precision, recall and F1 of the memory-need classifier on a labelled prompt set.

    python scripts/eval_memory_needs.py [FILE ...] [--policy P] [--min-macro-f1 0.9] [--min-class-f1 0]
        [--errors] [--markdown] [--model WEIGHTS] [--model-threshold T]

FILE: JSON Lines of {"prompt", "label", "lang"} (default: tests/fixtures/memory_needs*.jsonl).
Exits 1 when macro-F1 is below --min-macro-f1 or a class's F1 below --min-class-f1, so CI
fails on a regression. --model and --model-threshold evaluate other weights (e.g. a model
trained without one set, `train_memory_needs.py --without`) or another threshold.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from governor.engine import need_model  # noqa: E402
from governor.engine.recall import judge  # noqa: E402
from governor.policy import compiled  # noqa: E402
from governor.state import state_dir  # noqa: E402


def load(files: list[Path]) -> list[dict[str, str]]:
    rows = []
    for file in files:
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                row = json.loads(line)
                row["where"] = f"{file.name}:{number}"
                rows.append(row)
    return rows


def scores(rows: list[dict[str, str]], predicted: list[str]) -> tuple[dict[str, dict[str, float]], float, float]:
    labels = sorted({r["label"] for r in rows} | set(predicted))
    table: dict[str, dict[str, float]] = {}
    for label in labels:
        tp = sum(1 for r, p in zip(rows, predicted, strict=True) if p == label and r["label"] == label)
        fp = sum(1 for r, p in zip(rows, predicted, strict=True) if p == label and r["label"] != label)
        fn = sum(1 for r, p in zip(rows, predicted, strict=True) if p != label and r["label"] == label)
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        table[label] = {"precision": precision, "recall": recall, "f1": f1, "support": tp + fn}
    present = [label for label in labels if table[label]["support"]]
    macro = sum(table[label]["f1"] for label in present) / len(present)
    accuracy = sum(1 for r, p in zip(rows, predicted, strict=True) if p == r["label"]) / len(rows)
    return table, macro, accuracy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--policy", help="A policy file (default: the effective policy here).")
    parser.add_argument("--min-macro-f1", type=float, default=0.9)
    parser.add_argument("--min-class-f1", type=float, default=0.0)
    parser.add_argument("--model", help="Weights to use instead of the shipped governor/engine/need_model.json.")
    parser.add_argument("--model-threshold", type=float, help="Override memory_needs.model_threshold.")
    parser.add_argument("--errors", action="store_true", help="List every misclassified prompt.")
    parser.add_argument("--markdown", action="store_true", help="Print the table as Markdown.")
    args = parser.parse_args()
    files = args.files or sorted((ROOT / "tests" / "fixtures").glob("memory_needs*.jsonl"))
    env = dict(os.environ)
    if args.policy:
        env["MEMORY_GOVERNOR_POLICY"] = args.policy
    policy, _ = compiled.load(env, os.getcwd(), state_dir(env))
    needs = dict(policy.data["memory_needs"])
    if args.model_threshold is not None:
        needs["model_threshold"] = args.model_threshold
    if args.model:
        need_model.WEIGHTS = os.path.abspath(args.model)
    rows = load(files)
    verdicts = [judge(r["prompt"], needs, policy.recall_phrases)[0] for r in rows]  # as the hook decides
    predicted = [v.need for v in verdicts]
    decided_by = Counter(v.via for v in verdicts)
    right_by = Counter(v.via for v, r in zip(verdicts, rows, strict=True) if v.need == r["label"])
    parts = " · ".join(
        f"{via} {decided_by[via]} ({right_by[via]} right)"
        for via in ("pattern", "model", "cues", "default")
        if decided_by[via]
    )
    table, macro, accuracy = scores(rows, predicted)
    by_lang = {}
    for lang in sorted({r.get("lang", "?") for r in rows}):
        picked = [(r, p) for r, p in zip(rows, predicted, strict=True) if r.get("lang", "?") == lang]
        by_lang[lang] = scores([r for r, _ in picked], [p for _, p in picked])[1]
    if args.markdown:
        print("| memory_need | precision | recall | F1 | prompts |\n|---|---|---|---|---|")
        for label, row in table.items():
            print(
                f"| {label} | {row['precision']:.2f} | {row['recall']:.2f} | {row['f1']:.2f} | {row['support']:.0f} |"
            )
        print(
            f"\nmacro-F1 {macro:.3f} · accuracy {accuracy:.3f} · "
            + " · ".join(f"{k} macro-F1 {v:.3f}" for k, v in by_lang.items())
        )
        print(f"\ndecided by: {parts}")
    else:
        print(f"{'memory_need':24} {'precision':>9} {'recall':>7} {'F1':>6} {'prompts':>8}")
        for label, row in table.items():
            print(f"{label:24} {row['precision']:9.2f} {row['recall']:7.2f} {row['f1']:6.2f} {row['support']:8.0f}")
        print(
            f"macro-F1 {macro:.3f}  accuracy {accuracy:.3f}  over {len(rows)} prompts from {', '.join(f.name for f in files)}"
        )
        print("by language: " + ", ".join(f"{k} macro-F1 {v:.3f}" for k, v in by_lang.items()))
        print(f"decided by: {parts}")
    if args.errors:
        confusion = Counter((r["label"], p) for r, p in zip(rows, predicted, strict=True) if r["label"] != p)
        print("\nconfusions (true -> predicted):", dict(confusion))
        for r, v in zip(rows, verdicts, strict=True):
            if r["label"] != v.need:
                print(f"  {r['where']}: {r['label']} -> {v.need} ({v.via}): {r['prompt']}")
    failed = False
    if macro < args.min_macro_f1:
        print(f"FAIL: macro-F1 {macro:.3f} is below {args.min_macro_f1}", file=sys.stderr)
        failed = True
    for label, row in table.items():
        if row["support"] and row["f1"] < args.min_class_f1:
            print(f"FAIL: {label} F1 {row['f1']:.3f} is below {args.min_class_f1}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
