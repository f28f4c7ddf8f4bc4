"""What the governor did, from its audit trail: per-turn usage against each limit, denials by
reason, tokens trimmed and saved, the sessions and agents that hit limits most, and what
monitor mode would have done. Holds no memory contents: the audit trail has none.
"""

from __future__ import annotations

import html
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from governor.engine.ledger import Ledger

LIMIT_ROLES = {
    "max_search_calls": ("search",),
    "max_full_fetches": ("fetch",),
    "max_save_calls_per_turn": ("save", "summary"),
}


def build(ledger: Ledger, limits: dict[str, dict[str, Any]], unit: str, session: str | None = None,
          since: float | None = None, limits_of: Callable[[str], dict[str, Any] | None] = lambda _d: None,
          window: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """`limits`: the policy in force now; `limits_of(digest)`: those of the policy a turn was
    decided under (the audit row names it), so each turn is shown against its own limits.
    `window`: the policy's per-user window, against which each user's busiest stretch is shown."""
    rows = ledger.audit(session, since)
    now = {name: spec["value"] for name, spec in limits.items()}
    turns: dict[tuple[str, str], dict[str, Any]] = {}
    denials: Counter[str] = Counter()
    would: Counter[str] = Counter()
    by_session: Counter[str] = Counter()
    by_agent: Counter[str] = Counter()
    for row in rows:
        ts, sess, turn, agent_type, event, role, decision, code, mode, delivered, saved, deduped, seq, digest = row[:14]
        entry = turns.setdefault((sess, turn), {
            "session": sess, "turn": turn, "turn_number": seq, "started": ts, "calls": Counter(), "tokens": 0,
            "denied": 0, "would_deny": 0, "trimmed": 0, "tokens_saved": 0, "tokens_deduped": 0, "mode": mode,
            "policy": digest,
        })  # fmt: skip
        entry["policy"] = entry["policy"] or digest
        if event == "pre_tool" and role and decision != "deny":
            entry["calls"][role] += 1
        if event in ("post_tool", "prompt", "session_start") or role == "governor":
            entry["tokens"] += delivered
        if decision == "replace" and code != "snippets":  # a result shaped to its snippets held nothing back
            entry["trimmed"] += 1
        entry["tokens_saved"] += saved
        entry["tokens_deduped"] += deduped
        if decision == "deny":
            label = code or "deny"
            if mode == "monitor":
                entry["would_deny"] += 1
                would[label] += 1
            else:
                entry["denied"] += 1
                denials[label] += 1
                by_session[sess] += 1
                by_agent[agent_type or "(main agent)"] += 1
    budget = limits["max_memory_tokens_injected"]["value"]
    out_turns = []
    hits: Counter[str] = Counter()
    for entry in turns.values():
        if not entry["turn_number"] and not (entry["calls"] or entry["tokens"] or entry["denied"] or entry["would_deny"]
                                             or entry["trimmed"] or entry["tokens_saved"]):  # fmt: skip
            continue  # a session's start before its first prompt, with nothing in it: no turn
        usage = {name: sum(entry["calls"][r] for r in roles) for name, roles in LIMIT_ROLES.items()}
        usage["max_memory_tokens_injected"] = entry["tokens"]
        then = {**now, **(limits_of(entry["policy"]) or {})} if entry["policy"] else now
        at_limit = [
            name for name, used in usage.items() if isinstance(then.get(name), (int, float)) and 0 < then[name] <= used
        ]
        hits.update(at_limit)
        out_turns.append({
            "session": entry["session"], "turn": entry["turn"], "turn_number": entry["turn_number"],
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(entry["started"])), "mode": entry["mode"],
            "usage": usage, "limits": then, "policy": entry["policy"], "at_limit": at_limit,
            "denied": entry["denied"], "would_deny": entry["would_deny"],
            "trimmed": entry["trimmed"], "tokens_saved": entry["tokens_saved"],
            "tokens_deduped": entry["tokens_deduped"],
        })  # fmt: skip
    return {
        "unit": unit,
        "budget": budget,
        "limits": {name: spec["value"] for name, spec in limits.items()},
        "turns": out_turns,
        "totals": {
            "turns": sum(1 for t in out_turns if t["turn_number"]),  # a session's start (turn 0) is no turn
            "tokens_delivered": sum(t["usage"]["max_memory_tokens_injected"] for t in out_turns),
            "tokens_saved": sum(t["tokens_saved"] for t in out_turns),
            "tokens_deduped": sum(t["tokens_deduped"] for t in out_turns),
            "trimmed": sum(t["trimmed"] for t in out_turns),
            "denied": sum(denials.values()),
            "would_deny": sum(would.values()),
        },
        "denials_by_reason": dict(denials.most_common()),
        "monitor_would_deny_by_reason": dict(would.most_common()),
        "turns_at_limit": dict(hits.most_common()),
        "sessions_most_denied": [{"session": s, "denied": n} for s, n in by_session.most_common(5)],
        "agents_most_denied": [{"agent_type": a, "denied": n} for a, n in by_agent.most_common(5)],
        "window": _window(rows, window) if window else None,
    }


WINDOW_LIMITS = ("max_search_calls", "max_full_fetches", "max_memory_tokens_injected")


def _window(rows: list[Any], window: dict[str, Any]) -> dict[str, Any]:
    """Each user's busiest stretch of the window's length (every session of theirs together): the
    most searches, full fetches and memory tokens any `minutes` of the trail held, and how many of
    their calls the window refused."""
    length = window["minutes"] * 60
    by_user: dict[str, list[tuple[float, tuple[int, int, int]]]] = {}
    refused: Counter[str] = Counter()
    for ts, _s, _t, _a, event, role, decision, code, mode, delivered, *_rest, user in rows:
        if decision == "deny" and (code or "").startswith("window:") and mode != "monitor":
            refused[user] += 1
        if event == "pre_tool" and decision != "deny" and role in ("search", "fetch"):
            by_user.setdefault(user, []).append((ts, (int(role == "search"), int(role == "fetch"), 0)))
        elif event == "post_tool" and role not in ("save", "summary", "governor", "") and delivered:
            by_user.setdefault(user, []).append((ts, (0, 0, int(delivered))))
    users = []
    for user in sorted(set(by_user) | set(refused)):
        points = sorted(by_user.get(user, []))
        busiest, held, start = [0, 0, 0], [0, 0, 0], 0
        for ts, amounts in points:  # the stretch ending at each point, its oldest point dropped as it leaves
            held = [h + a for h, a in zip(held, amounts, strict=True)]
            while points[start][0] <= ts - length:
                held = [h - a for h, a in zip(held, points[start][1], strict=True)]
                start += 1
            busiest = [max(b, h) for b, h in zip(busiest, held, strict=True)]
        users.append({"user": user or "(not recorded)", "busiest": dict(zip(WINDOW_LIMITS, busiest, strict=True)),
                      "refused": refused[user]})  # fmt: skip
    return {"minutes": window["minutes"], "limits": {name: window[name]["value"] for name in WINDOW_LIMITS},
            "users": users}  # fmt: skip


def table(report: dict[str, Any]) -> str:
    lines = [f"{'session':14} {'turn':>5} {'searches':>7} {'fetches':>7} {'saves':>5} {'tokens':>8} "
             f"{'denied':>6} {'trimmed':>7} {'saved':>6}"]  # fmt: skip
    for t in report["turns"]:
        u, limits = t["usage"], t.get("limits") or report["limits"]
        mark = "*" if "max_memory_tokens_injected" in t["at_limit"] else " "
        denied = f"{t['denied']}" + (f"(+{t['would_deny']})" if t["would_deny"] else "")
        lines.append(f"{t['session'][-14:]:14} {turn_label(t):>5} {u['max_search_calls']:>4}/{limits['max_search_calls']:<2} "
                     f"{u['max_full_fetches']:>4}/{limits['max_full_fetches']:<2} {u['max_save_calls_per_turn']:>3}/"
                     f"{limits['max_save_calls_per_turn']:<1} {u['max_memory_tokens_injected']:>7}{mark} {denied:>6} "
                     f"{t['trimmed']:>7} {t['tokens_saved']:>6}")  # fmt: skip
    totals = report["totals"]
    lines.append("")
    lines.append(f"{totals['turns']} turn(s); {totals['tokens_delivered']} {report['unit']} tokens of memory delivered "
                 f"(budget {report['budget']} per turn); {totals['tokens_saved']} saved by {totals['trimmed']} trim(s), "
                 f"{totals['tokens_deduped']} of them by not delivering an entry twice; {totals['denied']} denial(s)")  # fmt: skip
    if report["denials_by_reason"]:
        lines.append("denials by reason: " + ", ".join(f"{k} {v}" for k, v in report["denials_by_reason"].items()))
    if report["monitor_would_deny_by_reason"]:
        lines.append(
            "monitor mode would have denied: "
            + ", ".join(f"{k} {v}" for k, v in report["monitor_would_deny_by_reason"].items())
        )
    if report["agents_most_denied"]:
        lines.append(
            "denied most: " + ", ".join(f"{a['agent_type']} {a['denied']}" for a in report["agents_most_denied"])
        )
    lines += [f"window: {line}" for line in _window_lines(report)]
    return "\n".join(lines) + "\n"


def _window_lines(report: dict[str, Any]) -> list[str]:
    window = report.get("window")
    if not window:
        return []
    limits = window["limits"]
    return [f"busiest {window['minutes']} min of {u['user']}: " + ", ".join(
        f"{u['busiest'][name]}/{limits[name]} {what}" for name, what in zip(
            WINDOW_LIMITS, ("searches", "full fetches", f"{report['unit']} tokens"), strict=True))
        + f"; {u['refused']} refused by the window" for u in window["users"]]  # fmt: skip


def turn_label(turn: dict[str, Any]) -> str:
    """A turn by its number in its session; what came before a session's first prompt is its start."""
    return str(turn["turn_number"]) if turn["turn_number"] else "start"


DELIVERED, OVER, HELD, DEDUPED, BUDGET = "#2e86de", "#c0392b", "#f5b7b1", "#d5d8dc", "#e67e22"


def _chart(report: dict[str, Any], width: int = 860, height: int = 300) -> str:
    """Per turn: the memory tokens delivered, with what was held back above them (trimmed away,
    and entries already delivered), against the budget in force in that turn."""
    turns = report["turns"][-60:]
    unit = html.escape(report["unit"])

    def held(t: dict[str, Any]) -> tuple[int, int]:
        return max(0, t["tokens_saved"] - t["tokens_deduped"]), t["tokens_deduped"]

    def budget(t: dict[str, Any]) -> int:
        return int((t.get("limits") or report["limits"])["max_memory_tokens_injected"])

    tallest = max([report["budget"], *(t["usage"]["max_memory_tokens_injected"] + sum(held(t)) for t in turns),
                   *(budget(t) for t in turns)])  # fmt: skip
    top = _round_up(tallest * 1.05) or 1
    left, right, above, below = 72, 12, 34, 46
    plot_w, plot_h = width - left - right, height - above - below
    step = plot_w / max(1, len(turns))

    def y(tokens: float) -> float:
        return above + plot_h - plot_h * tokens / top

    parts = [f'<rect x="{left}" y="{above}" width="{plot_w}" height="{plot_h}" fill="#f6f8fa"/>']
    for tick in range(0, 5):  # the y axis: five gridlines, and its values
        value = top * tick / 4
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#e1e4e8"/>'
                     f'<text x="{left - 6}" y="{y(value) + 4:.1f}" font-size="11" text-anchor="end">{value:g}</text>')  # fmt: skip
    previous = None
    for i, t in enumerate(turns):
        x, bar = left + i * step + step * 0.15, step * 0.7
        used = t["usage"]["max_memory_tokens_injected"]
        trimmed, deduped = held(t)
        limit = budget(t)
        where = f"turn {turn_label(t)} of {t['session'][-12:]}"
        for kind, base, amount, colour in (
            ("bar", 0, used, OVER if used > limit else DELIVERED),
            ("held", used, trimmed, HELD),
            ("deduped", used + trimmed, deduped, DEDUPED),
        ):
            if amount or kind == "bar":
                said = {"bar": f"{used} delivered", "held": f"{trimmed} held back (trimmed)",
                        "deduped": f"{deduped} held back (already delivered)"}[kind]  # fmt: skip
                title = html.escape(f"{where}: {said} of a {limit}-token budget, {t['denied']} denied")
                parts.append(f'<rect class="{kind}" x="{x:.1f}" y="{y(base + amount):.1f}" width="{bar:.1f}" '
                             f'height="{y(base) - y(base + amount):.1f}" fill="{colour}"><title>{title}</title></rect>')  # fmt: skip
        # The budget in force in this turn, over its slot: the line steps where a policy changed it.
        parts.append(f'<line class="budget" x1="{left + i * step:.1f}" x2="{left + (i + 1) * step:.1f}" '
                     f'y1="{y(limit):.1f}" y2="{y(limit):.1f}" stroke="{BUDGET}" stroke-width="3" '
                     f'stroke-dasharray="8 4"><title>{html.escape(f"{where}: budget {limit}")}</title></line>')  # fmt: skip
        if previous is not None and previous != limit:
            parts.append(f'<line x1="{left + i * step:.1f}" x2="{left + i * step:.1f}" y1="{y(previous):.1f}" '
                         f'y2="{y(limit):.1f}" stroke="{BUDGET}" stroke-width="2"/>')  # fmt: skip
        previous = limit
        if len(turns) <= 30 or i % (len(turns) // 30 + 1) == 0:  # the x axis: each turn's number
            parts.append(f'<text x="{left + (i + 0.5) * step:.1f}" y="{above + plot_h + 14}" font-size="11" '
                         f'text-anchor="middle">{html.escape(turn_label(t))}</text>')  # fmt: skip
    legend = [(DELIVERED, "delivered"), (HELD, "held back: trimmed"), (DEDUPED, "held back: already delivered"),
              (BUDGET, "budget in force")]  # fmt: skip
    keys, at = [], float(left)
    for colour, label in legend:
        keys.append(f'<rect x="{at:.0f}" y="8" width="12" height="12" fill="{colour}"/>'
                    f'<text x="{at + 16:.0f}" y="18" font-size="12">{label}</text>')  # fmt: skip
        at += 16 + 7 * len(label) + 24  # about the label's width at 12 px
    return (
        f'<svg id="tokens-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="memory tokens per turn: delivered and held back, against the budget in force in each turn">'
        + "".join(keys + parts)
        + f'<text id="x-axis" x="{left + plot_w / 2}" y="{height - 8}" font-size="12" text-anchor="middle">'
        "turn (its number in its session; oldest to newest)</text>"
        f'<text id="y-axis" transform="rotate(-90)" x="{-(above + plot_h / 2)}" y="16" font-size="12" '
        f'text-anchor="middle">memory tokens ({unit})</text>'
        "</svg>"
    )


def _round_up(value: float) -> int:
    """`value` up to a round number (1, 2, 4 or 5 times a power of ten), so the axis reads plainly."""
    if value <= 0:
        return 0
    scale = int(10 ** (len(str(int(value))) - 1))
    for factor in (1, 2, 4, 5, 10):
        if factor * scale >= value:
            return factor * scale
    return 10 * scale


def page(report: dict[str, Any]) -> str:
    """One self-contained HTML file: no scripts, no external resources."""
    totals = report["totals"]
    rows = "".join(
        f"<tr><td>{html.escape(t['session'][-14:])}</td><td>{turn_label(t)}</td>"
        f"<td>{t['usage']['max_search_calls']}</td><td>{t['usage']['max_full_fetches']}</td>"
        f"<td>{t['usage']['max_save_calls_per_turn']}</td><td>{t['usage']['max_memory_tokens_injected']}</td>"
        f"<td>{t['denied']}</td><td>{t['would_deny']}</td><td>{t['trimmed']}</td><td>{t['tokens_saved']}</td></tr>"
        for t in report["turns"]
    )
    reasons = (
        "".join(f"<li>{html.escape(k)}: {v}</li>" for k, v in report["denials_by_reason"].items()) or "<li>none</li>"
    )
    would = (
        "".join(f"<li>{html.escape(k)}: {v}</li>" for k, v in report["monitor_would_deny_by_reason"].items())
        or "<li>none</li>"
    )
    agents = (
        "".join(f"<li>{html.escape(a['agent_type'])}: {a['denied']}</li>" for a in report["agents_most_denied"])
        or "<li>none</li>"
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>memory-governor report</title>
<style>body{{font-family:system-ui,sans-serif;margin:24px;color:#222}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ddd;padding:3px 8px;text-align:right}}th{{background:#f0f0f0}}h2{{margin-top:28px}}</style>
</head><body>
<h1>memory-governor report</h1>
<p>{totals["turns"]} turn(s); <b>{totals["tokens_delivered"]}</b> {html.escape(report["unit"])} tokens of memory reached the
model (budget {report["budget"]} per turn); {totals["tokens_saved"]} saved by {totals["trimmed"]} trim(s),
{totals["tokens_deduped"]} of them by not delivering an entry twice;
{totals["denied"]} denial(s); monitor mode would have denied {totals["would_deny"]} more.</p>
<h2>Memory tokens per turn: delivered, held back, and the budget</h2>
{_chart(report)}
<h2>Denials by reason</h2><ul>{reasons}</ul>
<h2>Monitor mode: would have denied</h2><ul>{would}</ul>
<h2>Denied most</h2><ul>{agents}</ul>
<h2>Per-user window</h2><ul>{"".join(f"<li>{html.escape(line)}</li>" for line in _window_lines(report)) or "<li>none</li>"}</ul>
<h2>Per turn</h2>
<table><tr><th>session</th><th>turn</th><th>searches</th><th>fetches</th><th>saves</th><th>tokens</th><th>denied</th>
<th>would deny</th><th>trimmed</th><th>tokens saved</th></tr>{rows}</table>
<p><small>memory-governor {html.escape(str(report.get("governor", "")))}</small></p>
</body></html>
"""
