"""An orchestrator on the OpenAI Agents SDK, as a program of its own: one `Runner.run`.

Run by tests/e2e/orchestrators_env.py as `python openai_agents_driver.py SPEC.json` in the test's
project, with the pinned openai-agents. SPEC names the model stand-in's URL, the prompt, the
Engram stand-in's command, the subagents (each both a handoff and a tool of the lead: the model
picks), and whether to govern(). Prints one JSON line: the run's final output.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled
    from agents.mcp import MCPServerStdio
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    model = OpenAIResponsesModel(model="gpt-4.1", openai_client=AsyncOpenAI(base_url=f"{spec['model_url']}/v1"))
    engram = spec["engram"]
    async with MCPServerStdio(name="engram", params=engram, client_session_timeout_seconds=30) as server:
        subagents = [Agent(name=name, instructions=d["instructions"], model=model, mcp_servers=[server])
                     for name, d in spec["agents"].items()]  # fmt: skip
        tools = [a.as_tool(tool_name=f"run_{a.name}", tool_description=f"Run the {a.name} agent.") for a in subagents]
        lead = Agent(name="lead", instructions="You lead the work.", model=model, mcp_servers=[server],
                     handoffs=list(subagents), tools=tools)  # fmt: skip
        if spec["govern"]:
            from governor.sdk.openai_agents import govern

            govern(lead)
        result = await Runner.run(lead, spec["prompt"])
    return {"final": str(result.final_output)}


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        print(json.dumps(asyncio.run(main(json.load(handle)))))
