"""A policy in plain words: the rendered Markdown rule file and `policy explain`.

Both read the same dumped policy and use the same phrases, so the documentation a team
reads and the explanation of what is enforced cannot drift apart.
"""

from __future__ import annotations

from typing import Any

LAYER_TOOL_ROLE = {"L1": "search", "L2": "timeline", "L3": "fetch"}
_ENFORCE_WORDS = {"block": "blocked past the limit", "warn": "warned past the limit", "off": "not enforced"}
_SCOPE_WORDS = {
    "this_turn": "for the rest of the turn it was armed in",
    "next_turn": "for the rest of this turn and the next one",
    "once": "until used",
}
_LIMIT_WORDS = {
    "max_search_calls": "L1 searches per turn",
    "max_full_fetches": "L3 full fetches per turn",
    "max_memory_tokens_injected": "memory tokens reaching the model per turn",
    "max_save_calls_per_turn": "saves per turn",
}


def tools_for(policy: dict[str, Any], role: str) -> list[str]:
    names = []
    for mapping in policy["tools"]:
        for tool, spec in mapping["map"].items():
            if spec["role"] == role and tool not in names:
                names.append(tool)
    return names


def limit_phrase(name: str, spec: dict[str, Any], unit: str) -> str:
    what = _LIMIT_WORDS.get(name, name)
    value = f"{spec['value']} {unit}" if name == "max_memory_tokens_injected" else str(spec["value"])
    return f"at most {value} {what} ({_ENFORCE_WORDS[spec['enforce']]})"


def window_phrase(name: str, spec: dict[str, Any], minutes: int, unit: str) -> str:
    """A per-user window limit, in words."""
    what = _LIMIT_WORDS.get(name, name).replace(" per turn", "")
    value = f"{spec['value']} {unit}" if name == "max_memory_tokens_injected" else str(spec["value"])
    return (f"at most {value} {what} in any {minutes} minutes, across every session and harness of one user "
            f"({_ENFORCE_WORDS[spec['enforce']]})")  # fmt: skip


def layer_phrase(name: str, layer: dict[str, Any], policy: dict[str, Any]) -> str:
    tools = ", ".join(tools_for(policy, LAYER_TOOL_ROLE[name])) or "(no tool mapped)"
    parts = [f"{name} {tools}: ~{layer['expected_tokens']} tokens" + (" per result" if name == "L1" else "")]
    if layer.get("max_limit") is not None:
        parts.append(f"limit <= {layer['max_limit']} (a larger or missing limit is clamped)")
    if layer.get("max_tokens") is not None:
        parts.append(f"hits passed while they fit {layer['max_tokens']} tokens a search (shaped by tokens)")
    if layer.get("snippets_only"):
        parts.append("snippets only (Engram v2 asked for its compact form)")
    if layer.get("requires_surfaced_id"):
        parts.append("only for an id an L1/L2 result surfaced in this turn")
    return "; ".join(parts)


def trigger_phrase(name: str, trigger: dict[str, Any]) -> str:
    uses = f"{trigger['uses']} call" + ("s" if trigger["uses"] != 1 else "")
    text = f"{name}: unlocks {uses}, {_SCOPE_WORDS[trigger['scope']]}"
    if trigger.get("armed_by") == "dispatch":
        text += "; armed by the session's first subagent dispatch, not by SessionStart"
        text += (
            f", when the memory holds a {trigger.get('requires_topic') or 'state/wave/'}* topic (a saved wave state)"
        )
    elif trigger.get("requires_topic"):
        text += f"; only when the memory holds a {trigger['requires_topic']}* topic"
    if trigger.get("min_idle_minutes") and trigger.get("armed_by") != "dispatch":
        text += f"; only after {trigger['min_idle_minutes']} idle minutes"
    if name == "explicit_user_recall":
        text += "; armed by a prompt that asks for everything remembered"
        if trigger.get("phrases"):
            text += ": one of " + ", ".join(f'"{p}"' for p in trigger["phrases"]) + ", or the same ask in other words"
        text += " (never negated, quoted, in code, a reminder, or a question about the words themselves)"
    elif trigger.get("phrases"):
        text += "; armed by a prompt containing " + ", ".join(f'"{p}"' for p in trigger["phrases"])
    return text


def topic_conditions_phrase(triggers: dict[str, Any]) -> str:
    """Which of the seed's topic conditions the policy uses, and what that means for a team."""
    compact, resume = triggers.get("post_compact") or {}, triggers.get("session_resume") or {}
    used = [name for name, t in (("post_compact", compact), ("session_resume", resume))
            if t.get("requires_topic") or t.get("armed_by") == "dispatch"]  # fmt: skip
    if used:
        return (f"This policy uses the seed's memory conditions for {' and '.join(used)}: it unlocks only when the "
                "memory holds the topics named above, as the governor saw them in saves and results (topic_key).")  # fmt: skip
    return (
        "Compaction and resume unlock whatever the memory holds. The seed's conditions are available: "
        "`post_compact.requires_topic: session/` (the first action after /compact when a session/<change> "
        "topic exists) and `session_resume.armed_by: dispatch` (the first dispatch of a wave when a "
        "state/wave/<change>/<N> topic exists). They are off by default because they assume the seed's "
        "topic naming: a team that names its topics otherwise would never unlock mem_context at all."
    )


def class_budget_phrase(need: dict[str, Any], policy: dict[str, Any]) -> str:
    """A memory-need class's own limits, in words; '' when it inherits the turn's."""
    unit = policy["token_counter"]
    parts = []
    if need.get("max_memory_tokens_injected") is not None:
        parts.append(f"{need['max_memory_tokens_injected']} {unit} tokens")
    if need.get("max_search_calls") is not None:
        parts.append(f"{need['max_search_calls']} searches")
    if need.get("max_full_fetches") is not None:
        parts.append(f"{need['max_full_fetches']} full fetches")
    return ", ".join(parts)


def dedupe_phrase(policy: dict[str, Any]) -> str:
    if policy["delivery"]["dedupe"] == "on":
        return (
            "a memory entry already delivered whole to the same conversation context (the main agent, or one "
            "subagent) since compaction, /clear or the session's start is replaced by one line naming it, and only "
            "that line is counted; a full fetch of an observation the context holds whole is refused with that line"
        )
    return "a memory entry is delivered (and counted) again each time a result repeats it"


def tier_phrase(name: str, tier: dict[str, Any]) -> str:
    roles = ", ".join(tier["roles"]) or "nothing"
    cap = f"; at most {tier['max_search_calls']} searches per turn" if tier.get("max_search_calls") is not None else ""
    return f"{name}: may use {roles}{cap}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return out


def render_markdown(policy: dict[str, Any], source_name: str) -> str:
    """The rule file a team reads, rendered from the policy YAML."""
    unit = policy["token_counter"]
    lines = [
        "# Memory budget: Engram retrieval discipline",
        "",
        f"<!-- Rendered from {source_name} by `memory-governor policy render`. Edit the YAML, not this file. -->",
        "",
        f"Mode: **{policy['mode']}**. When the governor cannot decide, a governed memory call is "
        f"**{'let through' if policy['on_error'] == 'open' else 'denied'}** (on_error: {policy['on_error']}), "
        f"and the user is told. Token figures are in **{unit}**.",
        "",
        "## Retrieval ladder",
        "",
    ]
    rows = []
    for name in ("L1", "L2", "L3"):
        layer = policy["ladder"][name]
        tools = ", ".join(tools_for(policy, LAYER_TOOL_ROLE[name]))
        when = []
        if layer.get("max_limit") is not None:
            when.append(f"limit <= {layer['max_limit']}" + (", snippets only" if layer["snippets_only"] else ""))
        if layer.get("max_tokens") is not None:
            when.append(f"hits cut at {layer['max_tokens']} tokens a search")
        if layer.get("requires_surfaced_id"):
            when.append("id surfaced by an L1/L2 result this turn")
        cost = f"~{layer['expected_tokens']} tokens" + ("/result" if name == "L1" else "")
        rows.append([name, tools, "; ".join(when) or "any time", cost])
    lines += _table(["Layer", "Tool", "Allowed when", "Expected cost"], rows)
    lines += ["", "Never jump to L3 without first reading L1 results.", "", "## Per-turn budget", ""]
    rows = [
        [
            name,
            str(spec["value"]) + (f" {unit}" if name == "max_memory_tokens_injected" else ""),
            spec["enforce"],
        ]
        for name, spec in policy["limits"].items()
    ]
    ctx = policy["mem_context"]
    budgeted = ctx.get("outside_triggers") == "budgeted"
    rows.append(["allow_mem_context", "true" if ctx["allow"] else "false",
                 "a budgeted read otherwise" if budgeted else "only the triggers below unlock it"])  # fmt: skip
    lines += _table(["Limit", "Value", "Enforced"], rows)
    window = policy["window"]
    lines += [
        "",
        "## Per-user window",
        "",
        f"Every session and harness of one user, together, in any {window['minutes']} minutes (a session started "
        "under a governed session also counts in that session's turn):",
        "",
    ]
    rows = [[name, str(window[name]["value"]) + (f" {unit}" if name == "max_memory_tokens_injected" else ""),
             window[name]["enforce"]] for name in ("max_search_calls", "max_full_fetches",
                                                   "max_memory_tokens_injected")]  # fmt: skip
    lines += _table(["Limit", "Value", "Enforced"], rows)
    lines += ["", "## mem_context", "", "mem_context is the heaviest tool. Unlocked only by:", ""]
    lines += [f"- {trigger_phrase(name, trigger)}" for name, trigger in ctx["unlocked_by"].items()]
    subagents = "may" if ctx["subagents_may_arm"] else "may not"
    lines += ["", topic_conditions_phrase(ctx["unlocked_by"])]
    lines += [
        "",
        "A trigger unlocks at most its calls in any one turn, however often it is armed in that turn (a "
        "compaction's SessionStart or a prompt delivered again arms it anew): a turn that has had that many "
        "mem_context calls gets no more from it.",
        "",
    ]
    lines += [f"A subagent's events {subagents} arm a trigger.", "", "## Memory needs", ""]
    needs = policy["memory_needs"]
    rows = [
        [
            name,
            ", ".join(need["triggers"]),
            need["action"],
            ", ".join(need["namespaces"]) or "-",
            class_budget_phrase(need, policy) or "the per-turn limits",
        ]
        for name, need in needs["classes"].items()
    ]
    lines += _table(["memory_need", "Triggers", "Recommended action", "Namespaces", "Budget per turn"], rows)
    lines += [
        "",
        f"Precedence when several match: {', '.join(needs['precedence'])}; no match: {needs['default']}. "
        f"For `none` the agent is {'told to skip memory' if needs['on_none'] == 'advise' else 'denied retrieval'}.",
        "",
        "## Save discipline",
        "",
        f"Save only: {', '.join(policy['save']['allowed_types'])}.",
        f"Only the orchestrator saves: {', '.join(policy['save']['orchestrator_only']) or '-'}.",
        "",
    ]
    rows = [[rule, enforce] for rule, enforce in policy["save"]["never_save"].items()]
    lines += _table(["Never save", "Enforced"], rows)
    size = policy["save"]["max_chars"]
    speakers = policy["save"]["speakers"]
    lines += [
        "",
        f"Every free-text field of a save is checked, the title too. A field longer than {size['value']} characters: "
        f"{size['enforce']}.",
        f"A transcript is recognised by speaker labels: {', '.join(speakers['human'])} (the person) and "
        f"{', '.join(speakers['machine'])} (the agent).",
        f"Topic keys are checked against the namespace contract: {policy['save']['topic_keys']}.",
        "",
    ]
    sub = policy["subagents"]
    lines += ["## Subagents", "", f"Default tier: **{sub['default_tier']}**."]
    if sub["honor_front_matter"]:
        lines.append(f"An agent may declare its tier in its definition's front matter (`{sub['front_matter_key']}:`).")
    lines += ["", *(f"- {tier_phrase(name, tier)}" for name, tier in sub["tiers"].items()), ""]
    if sub["agents"]:
        lines += [*_table(["Agent", "Tier"], [[a, t] for a, t in sub["agents"].items()]), ""]
    lines += ["## Delivered once", "", dedupe_phrase(policy)[0].upper() + dedupe_phrase(policy)[1:] + ".", ""]
    brief = policy["briefing"]
    lines += [
        "## Dispatch briefings",
        "",
        f"Memory cards in a briefing: at most {brief['max_tokens']['value']} {unit} "
        f"({brief['max_tokens']['enforce']}). A raw L3 body pasted into a "
        f"dispatch ({', '.join(brief['dispatch_tools'])}): {brief['raw_l3_body']}.",
        "",
        "## Ledger",
        "",
        f"Unreported calls release their slot after {policy['ledger']['reservation_ttl_seconds']} s; "
        f"sessions are kept {policy['ledger']['retention_days']} days; memory contents are "
        f"{'recorded' if policy['ledger']['record_contents'] else 'never recorded'}.",
        "",
        "## MCP proxy",
        "",
        f"For a client with no hooks, a governed call after {policy['proxy']['turn_gap_seconds']} quiet seconds "
        "starts a new turn.",
        "",
    ]
    if policy.get("routes"):
        lines += ["## Routes around the memory tools", "",
                  "A call of one of these tools is refused when its pattern is found in what the call opens, "
                  "connects to or runs as code, or when it writes or removes one of the files, or runs one of "
                  "the commands, listed ({state}: the governor's state directory; {project}, {home}, {path}, "
                  "{package}, {prefix}: the project and the folders above it, the home folder, each folder on "
                  "PATH, the governor's package and its environment; {$NAME}: the variable NAME's value).",
                  ""]  # fmt: skip
        rows = [[r["name"], ", ".join(r["tools"]), ", ".join(r.get("fields") or ["the command, paths and URLs"]),
                 f"`` {r['pattern']} ``" if r.get("pattern") else "",
                 ", ".join(f"`{t}`" for t in r.get("writes") or []),
                 ", ".join(f"`{t}`" for t in r.get("runs") or [])] for r in policy["routes"]]  # fmt: skip
        lines += [*_table(["Route", "Tools", "Input read", "Pattern", "Writes", "Runs"], rows), ""]
    return "\n".join(lines)


def explain_statements(policy: dict[str, Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    """(section, sentence, the policy path it comes from), in reading order."""
    unit = policy["token_counter"]
    out: list[tuple[str, str, tuple[str, ...]]] = []
    mode = "decisions are applied" if policy["mode"] == "enforce" else "decisions are recorded, nothing is blocked"
    out.append(("General", f"mode {policy['mode']}: {mode}", ("mode",)))
    fail = "let through" if policy["on_error"] == "open" else "denied"
    out.append(("General", f"when the governor cannot decide, a memory call is {fail}", ("on_error",)))
    out.append(("General", f"token figures are in {unit}", ("token_counter",)))
    for index, mapping in enumerate(policy["tools"]):
        for tool, spec in mapping["map"].items():
            servers = ", ".join(mapping["servers"])
            out.append(("Tools", f"{tool} on {servers} is {spec['role']}", ("tools", str(index), "map", tool)))
    for name in ("L1", "L2", "L3"):
        out.append(("Ladder", layer_phrase(name, policy["ladder"][name], policy), ("ladder", name)))
    for name, spec in policy["limits"].items():
        out.append(("Per turn", limit_phrase(name, spec, unit), ("limits", name)))
    window = policy["window"]
    for name in ("max_search_calls", "max_full_fetches", "max_memory_tokens_injected"):
        out.append(("Per user", window_phrase(name, window[name], window["minutes"], unit), ("window", name)))
    ctx = policy["mem_context"]
    allowed = "allowed any time" if ctx["allow"] else "forbidden unless a trigger is armed"
    if not ctx["allow"] and ctx.get("outside_triggers") == "budgeted":
        allowed = "whole only when a trigger is armed; otherwise a budgeted read, cut to what the turn has left"
    out.append(("mem_context", f"mem_context is {allowed}", ("mem_context", "allow")))
    for name, trigger in ctx["unlocked_by"].items():
        out.append(("mem_context", trigger_phrase(name, trigger), ("mem_context", "unlocked_by", name)))
    needs = policy["memory_needs"]
    out.append(("Memory needs", "precedence: " + ", ".join(needs["precedence"]), ("memory_needs", "precedence")))
    for name, need in needs["classes"].items():
        out.append(("Memory needs", f"{name}: {need['action']}", ("memory_needs", "classes", name)))
        budget = class_budget_phrase(need, policy)
        if budget:
            first = next(
                k
                for k in ("max_memory_tokens_injected", "max_search_calls", "max_full_fetches")
                if need.get(k) is not None
            )
            out.append(("Memory needs", f"{name}: at most {budget} per turn", ("memory_needs", "classes", name, first)))
    save = policy["save"]
    out.append(("Saves", "allowed types: " + ", ".join(save["allowed_types"]), ("save", "allowed_types")))
    for rule, enforce in save["never_save"].items():
        out.append(("Saves", f"never save {rule}: {enforce}", ("save", "never_save", rule)))
    size = save["max_chars"]
    out.append(("Saves", f"a field over {size['value']} characters: {size['enforce']}", ("save", "max_chars")))
    sub = policy["subagents"]
    out.append(("Subagents", f"default tier {sub['default_tier']}", ("subagents", "default_tier")))
    for name, tier in sub["tiers"].items():
        out.append(("Subagents", tier_phrase(name, tier), ("subagents", "tiers", name)))
    for agent, tier in sub["agents"].items():
        out.append(("Subagents", f"{agent} is {tier}", ("subagents", "agents", agent)))
    brief = policy["briefing"]
    limit = brief["max_tokens"]
    out.append(
        ("Briefings", f"memory cards per dispatch: at most {limit['value']} {unit} ({limit['enforce']})", ("briefing",))
    )
    out.append(
        ("Briefings", f"a raw L3 body pasted into a dispatch: {brief['raw_l3_body']}", ("briefing", "raw_l3_body"))
    )
    for index, route in enumerate(policy.get("routes", [])):
        from governor.policy.diff import route_summary

        out.append(("Routes", f"{route['name']}: a {', '.join(route['tools'])} call that takes it ("
                    f"{route_summary(route)}) is refused", ("routes", str(index))))  # fmt: skip
    out.append(("Delivery", dedupe_phrase(policy), ("delivery", "dedupe")))
    if policy["loosen_allowed"]:
        keys = ", ".join(policy["loosen_allowed"])
        out.append(("Layering", f"a local override may loosen: {keys}", ("loosen_allowed",)))
    return out
