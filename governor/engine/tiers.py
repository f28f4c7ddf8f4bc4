"""Which access tier a subagent is in: the policy's list, its definition file, or the default.

A subagent's definition (`<name>.md` in a folder where the harness keeps them, or the path a
harness's template names, `{name}` standing for the agent's name) may declare
its tier in YAML front matter (`engram_access_tier: search-capable`, the key is the policy's) or, as the seed
writes it, in its body (`Engram access tier: search-capable`). The policy's own agent list
wins over what an agent says of itself.

Hot path: standard library only. Agent names come from outside: only a plain name is ever
turned into a file path.
"""

from __future__ import annotations

import os

from governor.state import read_regular

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
_BODY_LABEL = "engram access tier:"


def _plain_name(name: str) -> bool:
    return 0 < len(name) <= 64 and name[0] != "." and all(c in _NAME_CHARS for c in name)


def declared_tier(text: str, key: str) -> str | None:
    """The tier an agent definition declares, from its front matter or its body."""
    keys = {key.lower(), key.lower().replace("_", "-")}
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":
        for line in lines[1:]:
            if line.strip() == "---":
                break
            name, _, value = line.partition(":")
            if name.strip().lower() in keys:
                return value.strip().strip("'\"") or None
    for line in lines:
        at = line.lower().find(_BODY_LABEL)
        if at >= 0:
            value = line[at + len(_BODY_LABEL) :].strip().strip("*`'\". ")
            return value.split()[0] if value else None
    return None


def looser(tier: str, than: str, tiers: dict[str, Any]) -> bool:
    """Does `tier` let an agent do anything `than` does not (a role more, or more searches)?"""
    mine, theirs = tiers[tier], tiers[than]
    if not set(mine["roles"]) <= set(theirs["roles"]):
        return True
    cap, their_cap = mine.get("max_search_calls"), theirs.get("max_search_calls")
    return their_cap is not None and (cap is None or cap > their_cap)


def _changed_after(path: str, moment: float) -> bool:
    try:
        return os.stat(path).st_ctime > moment
    except OSError:
        return True


def tier_of(agent_type: str | None, subagents: dict[str, Any], agent_dirs: list[str],
            accepted_at: float | None = None) -> tuple[str, str]:  # fmt: skip
    """(tier, where it came from) for a subagent of type `agent_type`; `agent_dirs` are the
    folders holding `<name>.md` subagent definitions, or path templates with `{name}` for
    harnesses that name them otherwise; the first found wins.

    A definition changed after `accepted_at` (when a person last accepted the policy; by its
    inode change time, which no tool can set back) may not declare a tier looser than the
    default: an agent could have written it. Then the default holds, and the source says
    `held:<path>`, until `memory-governor policy accept`."""
    tiers = subagents["tiers"]
    if agent_type and agent_type in subagents["agents"]:
        return str(subagents["agents"][agent_type]), "policy"
    if agent_type and subagents["honor_front_matter"] and _plain_name(agent_type):
        for folder in agent_dirs:
            if "{name}" in folder:
                path = folder.replace("{name}", agent_type)
            else:
                path = os.path.join(folder, agent_type + ".md")
            try:
                text = read_regular(path, 65536, follow=True).decode("utf-8", "replace")
            except OSError:
                continue
            tier = declared_tier(text, subagents["front_matter_key"])
            if tier is not None and tier in tiers:
                default = str(subagents["default_tier"])
                if accepted_at is not None and looser(tier, default, tiers) and _changed_after(path, accepted_at):
                    return default, f"held:{path}"
                return tier, path
    return str(subagents["default_tier"]), "default"
