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
          since: float | None = None, limits_of: Callable[[str], dict[str, Any] | None] = lambda _d: None
          ) -> dict[str, Any]:  # fmt: skip
    """`limits`: the policy in force now; `limits_of(digest)`: those of the policy a turn was
    decided under (the audit row names it), so each turn is shown against its own limits."""
    rows = ledger.audit(session, since)
    now = {name: spec["value"] for name, spec in limits.items()}
    turns: dict[tuple[str, str], dict[str, Any]] = {}
    denials: Counter[str] = Counter()
    would: Counter[str] = Counter()
    by_session: Counter[str] = Counter()
    by_agent: Counter[str] = Counter()
    for ts, sess, turn, agent_type, event, role, decision, code, mode, delivered, saved, deduped, seq, digest in rows:
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
        if decision == "replace":
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
            "turns": len(out_turns),
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
    }


def table(report: dict[str, Any]) -> str:
    lines = [f"{'session':14} {'turn':>4} {'searches':>8} {'fetches':>7} {'saves':>5} {'tokens':>8} "
             f"{'denied':>6} {'trimmed':>7} {'saved':>6}"]  # fmt: skip
    for t in report["turns"]:
        u, limits = t["usage"], t.get("limits") or report["limits"]
        mark = "*" if "max_memory_tokens_injected" in t["at_limit"] else " "
        denied = f"{t['denied']}" + (f"(+{t['would_deny']})" if t["would_deny"] else "")
        lines.append(f"{t['session'][-14:]:14} {t['turn_number']:>4} {u['max_search_calls']:>5}/{limits['max_search_calls']:<2} "
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
    return "\n".join(lines) + "\n"


def _chart(report: dict[str, Any], width: int = 860, height: int = 260) -> str:
    turns = report["turns"][-60:]
    budget = report["budget"]
    top = max([budget, *[t["usage"]["max_memory_tokens_injected"] for t in turns]]) * 1.1 or 1
    pad_left, pad_bottom = 56, 28
    plot_w, plot_h = width - pad_left - 10, height - pad_bottom - 10
    step = plot_w / max(1, len(turns))
    bars = []
    for i, t in enumerate(turns):
        used = t["usage"]["max_memory_tokens_injected"]
        h = plot_h * used / top
        x = pad_left + i * step + step * 0.15
        colour = "#c0392b" if used > budget else "#2e86de"
        title = html.escape(f"turn {t['turn_number']} of {t['session'][-12:]}: {used} tokens, {t['denied']} denied")
        bars.append(f'<rect class="bar" x="{x:.1f}" y="{10 + plot_h - h:.1f}" width="{step * 0.7:.1f}" height="{h:.1f}" '
                    f'fill="{colour}"><title>{title}</title></rect>')  # fmt: skip
    y_budget = 10 + plot_h - plot_h * budget / top
    return (
        f'<svg id="tokens-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="memory tokens per turn against the budget">'
        f'<rect x="{pad_left}" y="10" width="{plot_w}" height="{plot_h}" fill="#f6f8fa"/>'
        + "".join(bars)
        + f'<line id="budget-line" x1="{pad_left}" x2="{pad_left + plot_w}" y1="{y_budget:.1f}" y2="{y_budget:.1f}" '
        f'stroke="#e67e22" stroke-width="3" stroke-dasharray="8 4"/>'
        f'<text x="{pad_left + 6}" y="{y_budget - 6:.1f}" font-size="12" fill="#a0522d">budget {budget}</text>'
        f'<text x="{pad_left - 6}" y="{10 + plot_h}" font-size="11" text-anchor="end">0</text>'
        f'<text x="{pad_left - 6}" y="20" font-size="11" text-anchor="end">{int(top)}</text>'
        f'<text x="{pad_left + plot_w / 2}" y="{height - 6}" font-size="12" text-anchor="middle">turns (oldest to newest)</text>'
        "</svg>"
    )


def page(report: dict[str, Any]) -> str:
    """One self-contained HTML file: no scripts, no external resources."""
    totals = report["totals"]
    rows = "".join(
        f"<tr><td>{html.escape(t['session'][-14:])}</td><td>{t['turn_number']}</td>"
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
<h2>Memory tokens per turn against the budget</h2>
{_chart(report)}
<h2>Denials by reason</h2><ul>{reasons}</ul>
<h2>Monitor mode: would have denied</h2><ul>{would}</ul>
<h2>Denied most</h2><ul>{agents}</ul>
<h2>Per turn</h2>
<table><tr><th>session</th><th>turn</th><th>searches</th><th>fetches</th><th>saves</th><th>tokens</th><th>denied</th>
<th>would deny</th><th>trimmed</th><th>tokens saved</th></tr>{rows}</table>
</body></html>
"""
