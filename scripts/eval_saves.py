#!/usr/bin/env python3
"""How the save discipline's detectors do on real memories and on disguised pastes.

    python scripts/eval_saves.py [--legit FILE] [--attacks FILE] [--markdown]

legit: JSON Lines of {"type", "title", "content"}: decision, bugfix, pattern, preference,
constraint and session-summary memories as a team writes them (each must pass every check).
attacks: JSON Lines of {"rule", "content"}: a transcript, tool output or step narration in one
of the disguises an agent has used (each must be caught by its rule). The speaker labels are
the shipped policy's. Exits 1 on any false positive or miss, so CI fails on a regression.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from governor.engine.saves import RULES, violations  # noqa: E402
from governor.policy.files import build  # noqa: E402
from governor.policy.sources import shipped_policy_path  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "saves"


def rows(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--legit", type=Path, default=FIXTURES / "legit.jsonl")
    parser.add_argument("--attacks", type=Path, default=FIXTURES / "attacks.jsonl")
    parser.add_argument("--markdown", action="store_true", help="A table for docs/reliability.md.")
    args = parser.parse_args()
    speakers = build([("default", shipped_policy_path())]).dumped()["save"]["speakers"]
    legit, attacks = rows(args.legit), rows(args.attacks)
    flagged = [(row["title"], found) for row in legit for found in [violations(row["content"], speakers)] if found]
    caught = {rule: [0, 0] for rule in RULES}
    missed = []
    for row in attacks:
        caught[row["rule"]][1] += 1
        if row["rule"] in violations(row["content"], speakers):
            caught[row["rule"]][0] += 1
        else:
            missed.append(row["content"][:60])
    if args.markdown:
        print("| set | texts | flagged by any rule |")
        print("|---|---|---|")
        print(f"| real memories (must pass) | {len(legit)} | {len(flagged)} |")
        for rule, (hit, total) in caught.items():
            print(f"| disguised {rule} (must be caught) | {total} | {hit} |")
    else:
        print(f"real memories: {len(legit)}, false positives: {len(flagged)}")
        for title, found in flagged:
            print(f"  false positive: {title!r} flagged as {', '.join(found)}")
        for rule, (hit, total) in caught.items():
            print(f"{rule}: caught {hit} of {total}")
        for text in missed:
            print(f"  missed: {text!r}")
    return 1 if flagged or missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
