#!/usr/bin/env python3
"""Which prompts unlock mem_context as explicit recall: requests and near-misses, by language.

    python scripts/eval_recall.py [FILE ...] [--policy P] [--min-recall 0.9] [--errors] [--markdown]

FILE: JSON Lines of {"prompt", "unlocks", "lang", "kind"} (default: every tests/fixtures/recall_*.jsonl);
`unlocks` true for a request for everything remembered, false for a near-miss (`kind` says which:
negation, quoted, knowledge, reminder, search, name). Each prompt is decided as the
UserPromptSubmit hook decides it (governor.engine.recall.judge, the effective policy here).

Precision first: exits 1 if any near-miss unlocks, or if fewer than --min-recall of the
requests of a language unlock, so CI fails on either.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from governor.engine.recall import judge  # noqa: E402
from governor.policy import compiled  # noqa: E402
from governor.state import state_dir  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
from eval_memory_needs import load  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--policy", help="A policy file (default: the effective policy here).")
    parser.add_argument("--min-recall", type=float, default=0.9, help="Of each language's requests (default 0.9).")
    parser.add_argument("--errors", action="store_true", help="List every prompt decided wrong, and why.")
    parser.add_argument("--markdown", action="store_true", help="Print the table as Markdown.")
    args = parser.parse_args()
    files = args.files or sorted((ROOT / "tests" / "fixtures").glob("recall_*.jsonl"))
    env = dict(os.environ)
    if args.policy:
        env["MEMORY_GOVERNOR_POLICY"] = args.policy
    policy, _ = compiled.load(env, os.getcwd(), state_dir(env))
    needs = policy.data["memory_needs"]
    rows = load(files)
    counts: Counter[tuple[str, str, bool]] = Counter()  # (lang, kind, unlocked)
    wrong = []
    for row in rows:
        verdict, recall = judge(str(row["prompt"]), needs, policy.recall_phrases)
        counts[(str(row["lang"]), str(row["kind"]), recall.unlocks)] += 1
        if recall.unlocks != bool(row["unlocks"]):
            wrong.append((row, verdict.need, recall.why))
    langs = sorted({str(r["lang"]) for r in rows})
    kinds = sorted({str(r["kind"]) for r in rows}, key=lambda k: (k != "request", k))
    lines = ["| kind | " + " | ".join(f"{lang}: unlocked" for lang in langs) + " |", "|---|" + "---|" * len(langs)]
    for kind in kinds:
        cells = [f"{counts[(lang, kind, True)]} of {counts[(lang, kind, True)] + counts[(lang, kind, False)]}"
                 for lang in langs]  # fmt: skip
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    if not args.markdown:
        lines = [line.replace("|", " ").rstrip() for line in lines if not line.startswith("|---")]
    print(f"over {len(rows)} prompts from {', '.join(f.name for f in files)}")
    print("\n".join(lines))
    failures = []
    for lang in langs:
        requests = sum(counts[(lang, "request", u)] for u in (True, False))
        unlocked = counts[(lang, "request", True)]
        false = sum(counts[(lang, kind, True)] for kind in kinds if kind != "request")
        misses = sum(counts[(lang, kind, u)] for kind in kinds if kind != "request" for u in (True, False))
        print(f"{lang}: requests unlocked {unlocked}/{requests} ({unlocked / max(requests, 1):.1%}), "
              f"near-misses unlocked {false}/{misses}")  # fmt: skip
        if requests and unlocked / requests < args.min_recall:
            failures.append(f"{lang}: {unlocked} of {requests} requests unlock, below {args.min_recall:.0%}")
        if false:
            failures.append(f"{lang}: {false} near-miss(es) unlock mem_context")
    if args.errors:
        for row, need, why in wrong:
            label = "missed request" if row["unlocks"] else f"false unlock ({row['kind']})"
            print(f"{row['where']}: {label}: {row['prompt']!r} -> {need}; {why}")
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
