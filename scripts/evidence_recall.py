#!/usr/bin/env python3
"""Evidence recall within budget: how often a briefing carries the memory a question needs.

    python scripts/evidence_recall.py [--conversations 10] [--questions 60] [--seed 7] [--write docs/evidence.md]

Builds a synthetic long-memory set shaped like LoCoMo (long multi-session conversations;
each question has one known evidence memory), then for every question packs that
conversation's memories with `memory-governor brief`'s own packer under each ranking and
budget, and reports the share of questions whose evidence memory was injected.

`relevance` is the memory server's own search order; here the stand-in for the server is a
BM25 ranking of the question over the memories (what Engram's FTS5 does), not part of the
governor. Everything is seeded and offline.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from governor.engine.briefing import Candidate, pack, rank  # noqa: E402
from governor.engine.tokens import counter  # noqa: E402

PEOPLE = ["Maria", "Jon", "Aiko", "Tomas", "Priya", "Lena", "Omar", "Sofia", "Kwame", "Ines", "Ravi", "Elif"]
TOPICS = {
    "pet": (["beagle", "tabby cat", "parrot", "tortoise", "corgi"], ["Pixel", "Miso", "Captain", "Nube", "Biscuit"]),
    "job": (["bakery", "hospital", "startup", "school", "library"], ["Lisbon", "Osaka", "Denver", "Accra", "Porto"]),
    "trip": (
        ["hiking trip", "road trip", "ferry ride", "city break", "ski week"],
        ["Madeira", "Hokkaido", "Patagonia", "Crete", "Banff"],
    ),
    "hobby": (
        ["pottery class", "chess club", "choir", "climbing gym", "book club"],
        ["Tuesday", "Sunday", "Thursday", "Friday", "Monday"],
    ),
    "family": (
        ["sister", "cousin", "grandfather", "nephew", "aunt"],
        ["wedding", "graduation", "birthday", "reunion", "move"],
    ),
    "project": (
        ["garden shed", "podcast", "mobile app", "novel", "bike restoration"],
        ["spring", "summer", "autumn", "winter", "weekend"],
    ),
}
FILLER = (
    "They talked about it for a while and went back to it later in the conversation, adding small details about "
    "the weather, the people involved and how it felt at the time."
)


def memory_text(rng: random.Random, person: str, topic: str, thing: str, detail: str, session: int) -> str:
    templates = [
        f"In session {session}, {person} said the {thing} in {detail} mattered a lot to them.",
        f"{person} mentioned their {thing} ({detail}) and explained why it changed their plans for the month.",
        f"During session {session}, {person} shared news about the {thing}: it is tied to {detail}.",
    ]
    text = rng.choice(templates)
    for _ in range(rng.choice([0, 0, 1, 2, 4])):  # some memories are long episodes
        text += " " + FILLER
    return text


def conversation(rng: random.Random, index: int, sessions: int, now: float) -> tuple[list[dict], list[tuple[str, int]]]:
    people = rng.sample(PEOPLE, 2)
    memories: list[dict] = []
    questions: list[tuple[str, int]] = []
    start = now - 220 * 86400
    for session in range(1, sessions + 1):
        when = start + session * (200 / sessions) * 86400
        for _ in range(rng.randint(2, 5)):
            topic = rng.choice(list(TOPICS))
            things, details = TOPICS[topic]
            person, thing, detail = rng.choice(people), rng.choice(things), rng.choice(details)
            mid = len(memories)
            popular = topic in ("job", "project")
            memories.append(
                {
                    "id": f"c{index}-m{mid}",
                    "title": f"{person}: {topic}",
                    "type": "fact" if mid % 3 else "episode",
                    "content": memory_text(rng, person, topic, thing, detail, session),
                    "created_at": when + rng.random() * 3600,
                    "scope": "org" if rng.random() < 0.1 else "project",
                    "use_count": rng.randint(1, 6) if popular and rng.random() < 0.6 else 0,
                    "last_used_at": now - rng.random() * 20 * 86400 if popular and rng.random() < 0.6 else None,
                    "_terms": (person, thing, detail),
                }
            )
    # A question names two of its evidence's three cues, so other memories of the same person,
    # thing or detail compete with it (as in LoCoMo, where questions paraphrase the evidence).
    shapes = [
        "What did {p} say about the {t}?",
        "What did {p} mention about {d}?",
        "Which conversation linked the {t} and {d}?",
    ]
    general = {
        "pet": "pet",
        "job": "work",
        "trip": "trip",
        "hobby": "hobby",
        "family": "relative",
        "project": "project",
    }
    for memory in rng.sample(memories, min(len(memories), 12)):
        person, thing, detail = memory["_terms"]
        if rng.random() < 0.5:  # the lexical gap: the question says "pet", the memory says "beagle"
            thing = general[memory["title"].split(": ")[1]]
        question = rng.choice(shapes).format(p=person, t=thing, d=detail)
        questions.append((question, memories.index(memory)))
    return memories, questions


def _tokens(text: str) -> list[str]:
    return [w.strip(".,:;()?!").lower() for w in text.split() if len(w.strip(".,:;()?!")) > 2]


def bm25_order(query: str, docs: list[str], k1: float = 1.2, b: float = 0.75) -> list[int]:
    """The stand-in memory server's search order (FTS5-style BM25, OR semantics)."""
    tokenized = [_tokens(d) for d in docs]
    avg = sum(len(t) for t in tokenized) / max(1, len(tokenized))
    df = Counter(term for t in tokenized for term in set(t))
    n = len(docs)
    scores = []
    for index, terms in enumerate(tokenized):
        tf = Counter(terms)
        score = 0.0
        for term in set(_tokens(query)):
            if term not in tf:
                continue
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            score += idf * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * len(terms) / avg))
        scores.append((-score, index))
    return [index for _, index in sorted(scores)]


RANKINGS = [
    ("recency", "recency", None),
    ("relevance (server order)", "relevance", None),
    ("usage (last_used, use_count)", "usage", None),
    ("scope (org first)", "scope", None),
    ("relevance x 30-day decay", "relevance", 30.0),
]
BUDGETS = [300, 600, 1200]


def evaluate(args: argparse.Namespace) -> tuple[dict[tuple[str, int], float], int, int]:
    rng = random.Random(args.seed)
    now = 1_790_000_000.0
    count = counter(args.unit).count
    hits: Counter[tuple[str, int]] = Counter()
    total = 0
    memories_seen = 0
    for index in range(args.conversations):
        memories, questions = conversation(rng, index, args.sessions, now)
        memories_seen += len(memories)
        for question, evidence in questions[: args.questions]:
            order = bm25_order(question, [m["content"] for m in memories])
            candidates = []
            for position, memory_index in enumerate(order):
                data = {k: v for k, v in memories[memory_index].items() if not k.startswith("_")}
                candidates.append(Candidate(data, position, data["id"]))
            evidence_id = memories[evidence]["id"]
            total += 1
            for label, how, half_life in RANKINGS:
                ranked = rank(candidates, how, now, half_life)
                for budget in BUDGETS:
                    result = pack(candidates, count, args.unit, budget=budget, order=ranked, card_max_tokens=120)
                    if any(item["id"] == evidence_id for item in result.selected):
                        hits[(label, budget)] += 1
    return {key: hits[key] / total for key in [(r[0], b) for r in RANKINGS for b in BUDGETS]}, total, memories_seen


def table(recall: dict[tuple[str, int], float]) -> str:
    lines = ["| ranking | " + " | ".join(f"{b} tokens" for b in BUDGETS) + " |", "|---|" + "---|" * len(BUDGETS)]
    for label, _, _ in RANKINGS:
        lines.append(f"| {label} | " + " | ".join(f"{recall[(label, b)] * 100:.0f} %" for b in BUDGETS) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=25)
    parser.add_argument("--questions", type=int, default=12, help="Questions per conversation (at most 12).")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--unit", default="o200k_base")
    parser.add_argument("--write", type=Path, help="Write the results as Markdown to this file.")
    args = parser.parse_args()
    started = time.perf_counter()
    recall, total, memories = evaluate(args)
    elapsed = time.perf_counter() - started
    command = "python scripts/evidence_recall.py" + (f" --write {args.write}" if args.write else "")
    body = table(recall)
    print(body)
    print(f"\n{total} questions over {args.conversations} conversations ({memories} memories), unit {args.unit}, "
          f"seed {args.seed}; {elapsed:.1f} s")  # fmt: skip
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        # The file's other section (scripts/evidence_delivery.py's, between its markers) is kept.
        previous = args.write.read_text(encoding="utf-8") if args.write.exists() else ""
        marker = "<!-- delivery evidence:"
        kept = "\n" + previous[previous.index(marker) :] if marker in previous else ""
        args.write.write_text(
            "# Evidence recall within budget\n\n"
            "The share of questions whose evidence memory is among the memory cards a briefing injects, by ranking "
            "and budget. Synthetic LoCoMo-shaped data (long multi-session conversations, one known evidence memory "
            "per question, some long episodes, some memories used before, a few org-wide); cards capped at 120 "
            "tokens; a card that does not fit is left out whole, and packing stops at the first that does not (omit, stop).\n\n"
            f"{body}\n\n"
            f"{total} questions over {args.conversations} conversations ({memories} memories), unit {args.unit}, "
            f"seed {args.seed}. Produced by `{command}`.\n\n"
            "`relevance` is the memory server's own search order; in this script a BM25 ranking of the question "
            "stands in for the server (Engram ranks with FTS5 bm25). Recency and usage ignore the question, so they "
            "find the evidence only when it happens to be recent or popular.\n" + kept,
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
