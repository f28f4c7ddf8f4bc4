"""govern(options): Claude Agent SDK options whose hooks add memory-governor's, decided in-process.

    from claude_agent_sdk import ClaudeAgentOptions, query
    from governor.sdk.claude_agent import govern

    options = govern(ClaudeAgentOptions(cwd=repo, setting_sources=[], mcp_servers={...}))

The copy's `env` adds the governor's marker (this program's process, which a session started from
the binary's tools is charged to: governor.engine.nesting), and its `hooks` keep every matcher the
caller set and add one async callback per event the Claude Code adapter governs (the SDK's own `HookMatcher` shape, matching every tool: the callback
answers nothing for tools no policy governs). Each callback decides through
`governor.runtime.runner.respond`, the function the hook process and the warm server run, in a
worker thread of this process (the event loop is never blocked on the ledger's lock): no
subprocess per call. The project is `options.cwd` (else this process's working directory); the
policy files, their acceptance and the state directory are found as the hooks find them, in this
process's environment with `options.env` over it (the environment the SDK gives the binary, so
its settings hooks, where loaded, share the ledger). A call both see is decided and counted once
(`twin` events, governor.engine.events).

Tokens are counted as a hook deciding alone counts them: with the table cached under the state
directory (governor.engine.tokens.load_quickly), which loads in milliseconds, so the first
callback of a process does not wait for tiktoken. govern() also starts, on a thread, what the
warm server loads at its start (governor.runtime.runner.warm_up: tiktoken, which the counter
moves to once loaded, and the memory-need model), while the SDK starts its binary. Every count
is exact, with the table or with tiktoken; none waits for that thread but one the table cannot
vouch for (governor.engine.bpe), which tiktoken counts as it does in a hook.

Needs the `claude-agent-sdk` package (`pip install 'memory-governor[sdk]'`). Importing this module
imports little beyond the adapter a callback decides with (no `dataclasses`, `typing`, engine).
"""

from __future__ import annotations

import os

from governor.harnesses.claude_agent_sdk import EVENTS, NAME
from governor.sdk import in_process
from governor.sdk.in_process import warm_up

__all__ = ["callback_for", "decide", "govern", "warm_up"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from typing import Any

    Callback = Callable[[dict[str, Any], "str | None", Any], Awaitable[dict[str, Any]]]
_MARK = "_memory_governor"  # set on our callbacks, so a second govern() adds none
BATCH = "PostToolBatch"  # after a batch of calls: one the SDK's permission check refused never reported back


def govern(options: Any, env: Mapping[str, str] | None = None) -> Any:
    """A copy of `options` (a `ClaudeAgentOptions`) with memory-governor's callbacks added to its
    hooks. `env` replaces this process's environment as the base `options.env` is laid over."""
    import dataclasses

    from claude_agent_sdk import HookMatcher

    from governor.runtime import runner

    project = os.path.abspath(os.fspath(options.cwd)) if options.cwd else os.getcwd()
    decide_env = {**(os.environ if env is None else env), **(options.env or {}), "CLAUDE_PROJECT_DIR": project}
    runner.keep_connections()  # a long-lived process: one ledger connection per worker thread
    callback = callback_for(decide_env, resumed=bool(options.resume or options.continue_conversation))
    warm_up(decide_env, project)
    hooks: dict[str, list[Any]] = {event: list(matchers) for event, matchers in (options.hooks or {}).items()}
    for event in (*EVENTS, BATCH):
        matchers = hooks.setdefault(event, [])
        if not any(getattr(hook, _MARK, False) for matcher in matchers for hook in matcher.hooks):
            matchers.append(HookMatcher(matcher=None, hooks=[callback]))
    return dataclasses.replace(options, hooks=hooks, env={**(options.env or {}), **marker()})


def marker() -> dict[str, str]:
    """The governor's marker for the binary's environment, which its tools (and any agent they start,
    the bundled binary again included) inherit: this process's key, the session's own process, so a
    session started under it is charged to this program's session (governor.engine.nesting)."""
    from governor.engine.nesting import MARKER
    from governor.runtime.lineage import key_of

    own = key_of(os.getpid())
    return {MARKER: own} if own else {}


def decide(input_data: Any, env: Mapping[str, str]) -> dict[str, Any]:
    """One event, decided in this thread: the object a callback returns ({} for no objection)."""
    return in_process.decide(NAME, input_data, env)


def callback_for(env: Mapping[str, str], resumed: bool = False) -> Callback:
    """The async hook callback that decides each event in `env` (the project, the state directory).

    `resumed`: the options resume a session (`resume`, `continue_conversation`). The binary fires
    SessionStart `resume` for its command hooks but not for callbacks (0.2.189: only `compact`), so the first event
    of each session seen here is preceded by that SessionStart, decided as the hooks would decide it
    (the resume trigger, its idle time); what it adds to the model's context rides on the prompt.

    Tokens are counted from here on with the table a hook deciding alone reads (load_quickly),
    kept in `env`'s state directory: no callback waits for tiktoken to load (but for a text the
    table cannot vouch for, which tiktoken counts, as in a hook)."""
    import threading

    from governor.engine.tokens import load_quickly
    from governor.state import cache_dir

    load_quickly(cache_dir(env))
    started: set[str] = set()
    lock = threading.Lock()

    def resume_first(input_data: Any) -> dict[str, Any]:
        opening: dict[str, Any] = {}
        if resumed and isinstance(input_data, dict) and isinstance(input_data.get("session_id"), str):
            with lock:
                first = input_data["session_id"] not in started
                started.add(input_data["session_id"])
            if first and input_data.get("hook_event_name") != "SessionStart":
                fields = {k: input_data[k] for k in ("session_id", "transcript_path", "cwd") if k in input_data}
                opening = decide({**fields, "hook_event_name": "SessionStart", "source": "resume"}, env)
        if isinstance(input_data, dict) and input_data.get("hook_event_name") == BATCH:
            return unreported(input_data)
        answer = decide(input_data, env)
        context = opening.get("hookSpecificOutput", {}).get("additionalContext")
        if context and isinstance(input_data, dict) and input_data.get("hook_event_name") == "UserPromptSubmit":
            own = answer.setdefault("hookSpecificOutput", {"hookEventName": "UserPromptSubmit"})
            own["additionalContext"] = (
                f"{context}\n{own['additionalContext']}" if own.get("additionalContext") else context
            )
        return answer

    def unreported(batch: dict[str, Any]) -> dict[str, Any]:
        """A batch's end: each call in it reported as failed, so that one the SDK's permission check
        refused after its PreToolUse (no PostToolUse or PostToolUseFailure follows it) gives its
        reservation back. A call whose end the ledger knows already is left as it is (`twin`)."""
        fields = {k: v for k, v in batch.items() if k not in ("hook_event_name", "tool_calls")}
        for made in batch.get("tool_calls") or []:
            if isinstance(made, dict) and isinstance(made.get("tool_use_id"), str):
                decide({**fields, "hook_event_name": "PostToolUseFailure", "tool_name": made.get("tool_name"),
                        "tool_input": made.get("tool_input") or {}, "tool_use_id": made["tool_use_id"],
                        "error": str(made.get("tool_response") or "")[:2000]}, env)  # fmt: skip
        return {}

    async def memory_governor(input_data: dict[str, Any], tool_use_id: str | None, context: Any) -> dict[str, Any]:
        try:
            from anyio import to_thread
        except ImportError:  # no anyio (the SDK brings it): decide on the loop's thread
            return resume_first(input_data)
        return await to_thread.run_sync(resume_first, input_data)

    setattr(memory_governor, _MARK, True)
    return memory_governor
