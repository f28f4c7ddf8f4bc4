"""An orchestrator on LangChain / LangGraph with langchain-mcp-adapters, as a program of its own:
one graph invocation.

Run by tests/e2e/orchestrators_env.py as `python langchain_driver.py SPEC.json` in the test's
project, with the pinned packages. SPEC names the model stand-in's URL (Chat Completions), the
prompt, the Engram stand-in's command, the subagents (each a `create_agent(name=...)` the lead
runs through a tool `run_<name>`), and whether to govern() the client. Prints one JSON line: the
last message's text.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    from langchain.agents import create_agent
    from langchain_core.tools import StructuredTool
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_openai import ChatOpenAI

    client = MultiServerMCPClient({"engram": {**spec["engram"], "transport": "stdio"}})
    if spec["govern"]:
        from governor.sdk.langchain import govern

        govern(client)
    tools = await client.get_tools()
    model = ChatOpenAI(base_url=f"{spec['model_url']}/v1", model="gpt-4.1")
    runners = []
    for name, d in spec["agents"].items():
        agent = create_agent(model, tools, name=name, system_prompt=d["instructions"])

        async def run(task: str, agent: Any = agent) -> str:
            out = await agent.ainvoke({"messages": [("user", task)]})
            return str(out["messages"][-1].content)

        runners.append(StructuredTool.from_function(coroutine=run, name=f"run_{name}",
                                                    description=f"Run the {name} agent on a task."))  # fmt: skip
    lead = create_agent(model, [*tools, *runners], name="lead", system_prompt="You lead the work.")
    out = await lead.ainvoke({"messages": [("user", spec["prompt"])]})
    return {"final": str(out["messages"][-1].content)}


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        print(json.dumps(asyncio.run(main(json.load(handle)))))
