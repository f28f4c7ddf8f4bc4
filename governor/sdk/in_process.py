"""Deciding in the program's own process: what every govern() shares.

- `decide(harness, payload, env)`: one event through governor.runtime.runner.respond, the
  function the hook process and the warm server run (errors and notices to stderr);
- `warm_up(env, project)`: what the warm server loads at its start, on a daemon thread;
- `Governor`: one governed MCP tool call of a framework that has no hook payload of its own
  (the OpenAI Agents SDK, LangChain's MCP adapters): the decision before the call (refuse, or
  clamp the arguments the server receives), the call, and the decision after it (count the
  result, trim it to the turn's budget in whole entries, or give the reservation back when the
  call failed or was cancelled). Each decision runs on a worker thread, so the event loop never
  waits on the ledger's lock; parallel calls are counted exactly by the ledger's transaction.

The model reads exactly the text that was counted: a governed result keeps its text blocks (or
gets its structured content as text when it has none) and loses `structuredContent`, which a
framework may hand the model instead. Nothing here imports a framework: results are the MCP
Python SDK's `CallToolResult` (both frameworks use it), built through the class they came in.
"""

from __future__ import annotations

import os
import sys
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from threading import Thread
    from typing import Any

_warmed: set[tuple[str, str]] = set()  # (state directory, project) warm_up has been started for


def decide(harness: str, payload: Any, env: Mapping[str, str]) -> dict[str, Any]:
    """One event, decided in this thread: the adapter's answer ({} for no objection)."""
    from governor.runtime import runner

    out = runner.respond(harness, b"", env, payload=payload)
    for line in out.errors:
        sys.stderr.write(line + "\n")
    return out.answer or {}


def warm_up(env: Mapping[str, str], project: str) -> Thread | None:
    """Start loading, on a daemon thread, what the warm server loads at its start (tiktoken for the
    policy's unit, the memory-need model), once per state directory and project in this process;
    the thread, or None when it was started already. Decisions go on meanwhile, counting with
    the cached table (exactly; none waits for it)."""
    from governor.state import state_dir

    key = (state_dir(env), project)
    if key in _warmed:
        return None
    _warmed.add(key)
    from governor.runtime.runner import warm_up as load

    thread = threading.Thread(target=load, args=(dict(env), project), name="memory-governor warm-up", daemon=True)
    thread.start()
    return thread


def prepare(env: Mapping[str, str], project: str) -> None:
    """Once per govern(): one ledger connection per worker thread, the cached token table, the
    warm-up thread, and the audit trail's exporter when telemetry is on (as the proxy sends it)."""
    from governor.engine.tokens import load_quickly
    from governor.runtime import runner
    from governor.state import cache_dir

    runner.keep_connections()
    load_quickly(cache_dir(env))
    warm_up(env, project)
    _start_telemetry(env)


_exporting: set[str] = set()  # state directories whose audit trail this process sends


def _start_telemetry(env: Mapping[str, str]) -> None:
    from governor.runtime import telemetry
    from governor.state import state_dir

    state = state_dir(env)
    if not telemetry.enabled(env) or state in _exporting:
        return
    _exporting.add(state)
    exporter = telemetry.start(env)
    if exporter is not None:
        import atexit

        atexit.register(exporter.stop)


_governors: dict[tuple[Any, ...], Governor] = {}


def governor_for(harness: str, env: Mapping[str, str] | None, project: str | None, session: str) -> Governor:
    """The Governor of `harness` for this environment (default: this process's), project (default:
    the working directory) and session: one per process, whichever govern() asks for it."""
    environ = dict(os.environ if env is None else env)
    where = os.path.abspath(os.fspath(project)) if project else os.getcwd()
    key = (harness, tuple(sorted(environ.items())), where, session)
    if key not in _governors:
        _governors[key] = Governor(harness, environ, where, session)
    return _governors[key]


class Governor:
    """The decisions of one govern(): its harness's adapter, the environment and project the policy
    and the ledger are found from (as for the hooks), and the session its turns belong to."""

    def __init__(self, harness: str, env: Mapping[str, str], project: str, session: str) -> None:
        from governor.runtime.runner import HARNESS_PROJECT_VARIABLES

        self.harness = harness
        # The project is the program's word for it: no harness variable inherited from a parent stands in.
        self.env = {k: v for k, v in env.items() if k not in HARNESS_PROJECT_VARIABLES}
        self.project = project
        self.session = session
        self.prompted: set[tuple[str, str]] = set()  # (session, turn) whose prompt was decided (`before`)
        self.prompting = threading.Lock()
        prepare(self.env, project)

    def decide(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One event of this governor's session (unless the payload names another), in this thread."""
        answer = decide(self.harness, {"session_id": self.session, "project": self.project, **payload}, self.env)
        message = answer.get("systemMessage")
        if message:  # for the user: the program's stderr, as the proxy writes it to its client's log
            sys.stderr.write(f"{message}\n")
        return answer

    async def decided(self, payload: dict[str, Any]) -> dict[str, Any]:
        import asyncio

        return await asyncio.to_thread(self.decide, payload)

    def governs(self, server: str, tool: str) -> bool:
        """Does the policy govern this tool? (Yes when there is no policy to ask: the runner's
        on_error then says what a governed call gets, as for the hooks.)"""
        from governor.runtime.runner import load_policy

        try:
            policy = load_policy(self.env, self.project, self.session)[1][0]
        except Exception:
            return True
        return policy.tool(server, tool) is not None

    def before(self, ids: dict[str, Any], arguments: dict[str, Any] | None,
               prompt: str | None = None) -> dict[str, Any] | None:  # fmt: skip
        """The decision before a call, in this thread; None for a tool the policy does not govern.
        `prompt`: the user's prompt of the call's turn, decided first when this turn's first call
        is the first the governor sees of it (the calls of its first batch wait for it)."""
        if not self.governs(str(ids["server"]), str(ids["tool"])):
            return None
        if prompt is not None and ids.get("turn_id"):
            turn = (str(ids.get("session_id") or self.session), str(ids["turn_id"]))
            with self.prompting:
                if turn not in self.prompted:
                    self.prompted.add(turn)
                    self.decide({"event": "prompt", "prompt": prompt, "turn_id": turn[1], "session_id": turn[0]})
        return self.decide({"event": "call", "arguments": arguments, **ids})

    async def call(self, ids: dict[str, Any], arguments: dict[str, Any] | None,
                   send: Callable[[dict[str, Any] | None], Awaitable[Any]], prompt: str | None = None) -> Any:  # fmt: skip
        """One governed tool call: `ids` (server, tool, call_id, turn_id, agent_id, agent_type,
        session_id), the arguments the model gave, and `send(arguments)`, which calls the server
        and returns its CallToolResult (`prompt`: see `before`). What the model gets back: the server's result, trimmed; or
        the refusal, as an error result (the server is not called)."""
        import asyncio

        answer = await asyncio.to_thread(self.before, ids, arguments, prompt)
        if answer is None:  # not a memory tool: the server's result as it is
            return await send(arguments)
        if "deny" in answer:
            return error_result(str(answer["deny"]))
        context = [str(answer["context"])] if answer.get("context") else []
        try:
            result = await send(answer.get("arguments", arguments))
        except BaseException:  # a failure, or the run cancelled: the turn gets the reservation back
            await _shielded(self.decided({"event": "failed", **ids}))
            raise
        text = result_text(result)
        if text is None:  # an error result, or none at all: no memory reached the model
            await self.decided({"event": "failed", **ids})
            return result
        answer = await self.decided({"event": "result", "result": text, **ids})
        if answer.get("context"):
            context.append(str(answer["context"]))
        return with_text(result, answer.get("replace", text), context)


async def _shielded(step: Awaitable[Any]) -> None:
    """`step` run to its end even when the task awaiting it is being cancelled."""
    import asyncio

    try:
        await asyncio.shield(step)
    except asyncio.CancelledError:
        pass


def result_text(result: Any) -> str | None:
    """The text of a CallToolResult as the model reads it (text blocks, embedded resources'
    text, else the structured content as JSON); None for an error result or none at all."""
    from governor.harnesses.mcp_proxy import model_text

    dump = getattr(result, "model_dump", None)
    if dump is None:
        return None
    data = dump(by_alias=True, mode="json")
    if not isinstance(data, dict) or data.get("isError"):
        return None
    return model_text(data)


def error_result(reason: str) -> Any:
    """An error CallToolResult saying `reason` (what the model gets for a refused call)."""
    from mcp.types import CallToolResult

    return CallToolResult.model_validate({"content": [{"type": "text", "text": reason}], "isError": True})


def with_text(result: Any, text: str, context: list[str]) -> Any:
    """`result` carrying exactly `text` (then each context line) as its content, without
    structured content; `result` itself when that is what it carries already."""
    from mcp.types import TextContent

    # The MCP Python SDK spells it structuredContent before 2.0, structured_content (that alias) since.
    structured = "structured_content" if "structured_content" in type(result).model_fields else "structuredContent"
    kept = [getattr(b, "text", None) for b in result.content or []]
    if not context and getattr(result, structured) is None and kept == [text]:
        return result
    content = [TextContent(type="text", text=part) for part in (text, *context) if part]
    return result.model_copy(update={"content": content, structured: None})
