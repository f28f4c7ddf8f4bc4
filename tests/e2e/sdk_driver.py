"""An orchestrator on the Claude Agent SDK, as a program of its own: one `query()` run.

Run by tests/e2e/claude_agent_sdk_env.py as `python sdk_driver.py SPEC.json` with the pinned SDK
on PYTHONPATH. SPEC names the options (cwd, env, setting_sources, mcp_servers, allowed_tools,
agents, resume), whether to `govern()` them, and a file where the program's OWN hooks log each
event they see (the caller's hooks, which govern() must keep). Prints one JSON line: the
session id and the result message's subtype.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    from claude_agent_sdk import AgentDefinition, ClaudeAgentOptions, HookMatcher, ResultMessage, query

    own_log = spec["own_hook_log"]

    async def own_hook(input_data: dict[str, Any], tool_use_id: str | None, context: Any) -> dict[str, Any]:
        with open(own_log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"event": input_data.get("hook_event_name"), "tool": input_data.get("tool_name"),
                                     "tool_use_id": tool_use_id}) + "\n")  # fmt: skip
        return {}

    options = ClaudeAgentOptions(
        cwd=spec["cwd"],
        env=spec["env"],
        setting_sources=spec["setting_sources"],
        mcp_servers=spec["mcp_servers"],
        allowed_tools=spec["allowed_tools"],
        agents={name: AgentDefinition(**d) for name, d in spec["agents"].items()} or None,
        resume=spec.get("resume"),
        hooks={"PreToolUse": [HookMatcher(matcher="mcp__engram__.*", hooks=[own_hook])]},
    )
    if spec["govern"]:
        from governor.sdk.claude_agent import govern

        options = govern(options, env=spec["env"])
    out: dict[str, Any] = {"session_id": "", "subtype": ""}
    async for message in query(prompt=spec["prompt"], options=options):
        if isinstance(message, ResultMessage):
            out = {"session_id": message.session_id, "subtype": message.subtype}
    return out


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        print(json.dumps(asyncio.run(main(json.load(handle)))))
