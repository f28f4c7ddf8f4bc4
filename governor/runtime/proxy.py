"""The governing MCP proxy: a stdio MCP server that runs the real memory server behind it.

    memory-governor proxy [--name SERVER] -- COMMAND [ARGS...]

An MCP client starts the proxy instead of its memory server; the proxy starts the real server
as its child and relays every line between them unchanged, except:

- a `tools/call` of a tool the policy governs (under server name SERVER) is decided by the
  same engine as the hooks, through governor.runtime.runner with the mcp-proxy adapter
  (governor.harnesses.mcp_proxy): denied (the client gets an `isError` result saying what to
  do instead; the server never sees the call), clamped (the server gets the rewritten
  arguments), or passed on; its result is counted, trimmed to the turn's budget in whole
  entries, committed and audited in the ledger the hooks use;
- a `tools/list` result hides `outputSchema` of governed tools, and their results carry no
  `structuredContent`, so every client shows the model the text the governor counted;
- `notifications/cancelled` for a governed call releases its reservation.

Turns: the client's hooks, when it has them and they decided the call (the proxy recognises
the call by the client's own call id, deferring only to a live reservation no observer has used,
and counts nothing); else one turn for a connection the client says is one run (Claude Code's
`-p`), or the proxy's own numbering: a new turn after `proxy.turn_gap_seconds` with no governed
call in flight or answered.

The child's stderr is the proxy's stderr (the client's server log). If the child exits, the
requests it left unanswered get an error, the proxy says so on stderr and exits; if the
client goes away, the child is stopped (stdin closed, then SIGTERM, then SIGKILL). Nothing
here raises past `run`: a line it cannot read is passed on as it came, and when the governor
itself cannot decide, the policy's on_error applies, visibly (governor.runtime.runner).

One thread relays both ways and decides every event (one ledger connection, no hand-offs between
threads on the hot path); a second only loads the tokenizer once, after the server's first
answer. With MEMORY_GOVERNOR_ENABLE_TELEMETRY=1, a third sends the audit trail to the team's
collector (governor.runtime.telemetry; its console exporter writes to stderr, never stdout).
Standard library only (JSON-RPC over stdio is one JSON object per line).
"""

from __future__ import annotations

import json
import os
import select
import selectors
import signal
import subprocess
import sys
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, BinaryIO

    from governor.engine.rules import CompiledPolicy
    from governor.runtime.runner import Loaded

HARNESS = "mcp-proxy"
DEFAULT_SERVER = "engram"
EXPORT_START_SECONDS = 10.0  # at exit, the longest wait for the exporter still starting (the OpenTelemetry SDK loads)
STOP_SECONDS = 2.0  # after closing the child's stdin, then after SIGTERM (as the MCP spec's shutdown)
POLICY_RECHECK_SECONDS = 1.0  # a policy edit reaches a running proxy within this long
SERVER_GONE = -32000  # JSON-RPC error code for requests the child left unanswered
CHUNK = 4096  # at most this much per write: a pipe that selects writable takes it without blocking
USAGE = "usage: memory-governor proxy [--name SERVER] -- COMMAND [ARGS...]"


class _Call:
    """A governed tools/call in flight."""

    __slots__ = ("call_id", "context", "tool", "turn_id")

    def __init__(self, call_id: str, tool: str, turn_id: str | None, context: str) -> None:
        self.call_id, self.tool, self.turn_id, self.context = call_id, tool, turn_id, context


class Proxy:
    def __init__(self, server: str, command: list[str], env: Mapping[str, str], cwd: str,
                 stdin: BinaryIO, stdout: BinaryIO, stderr: BinaryIO) -> None:  # fmt: skip
        from governor import harnesses

        self.server = server
        self.command = command
        self.env = env
        self.adapter = harnesses.adapter(HARNESS)
        self.instance = f"{os.getpid():x}.{time.time_ns():x}"  # this connection, unique across processes
        self.session = self.adapter.session_of(env) or f"mcp-proxy:{self.instance}"
        self.project = self.adapter.project_of(env, cwd)
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.outbox: dict[int, bytearray] = {}  # fd -> bytes waiting to be written (client, server)
        self.client_out = self.server_in = -1  # the two fds written to, once the relay runs
        self.writable: Any = None  # a poll of client_out, once the relay runs
        self.governed: dict[str, _Call] = {}  # request id (as JSON) -> governed call in flight
        self.lists: set[str] = set()  # tools/list requests in flight
        self.open: dict[str, Any] = {}  # every client request in flight: id (as JSON) -> id
        self.turn = 0
        self.last_activity: float | None = None
        self.hooked = False  # the client's hooks decide calls of this session: follow their turn
        self.one_run = self.adapter.one_run(env)  # the client says this connection is one `-p` run: one turn
        self.spent: set[str] = set()  # client call ids seen here: a repeat is decided under an id of our own
        self.child: subprocess.Popen[bytes] | None = None
        self.telemetry: Any = None

    # -- the process ------------------------------------------------------------------

    def run(self) -> int:
        from governor.engine.tokens import load_quickly
        from governor.policy.compiled import recheck_every
        from governor.runtime.runner import keep_connections
        from governor.state import cache_dir

        keep_connections()
        recheck_every(POLICY_RECHECK_SECONDS)
        load_quickly(cache_dir(self.env))  # the first results: no wait for tiktoken (_warm)
        try:
            self.child = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          env=dict(self.env))  # fmt: skip
        except (OSError, ValueError) as err:
            self.say(f"cannot start the memory server `{' '.join(self.command)}`: {err}")
            return 1
        from governor.runtime import telemetry

        starting = None
        if telemetry.enabled(self.env):  # after the child is started: no exporter thread is forked with it
            starting = threading.Thread(target=self._start_export, daemon=True)
            starting.start()
        try:
            try:
                closed = self._relay()
            except (KeyboardInterrupt, SystemExit):
                closed = "client"  # SIGTERM or SIGINT: stop as when the client goes away
            if closed == "server":
                return self._server_gone()
            self._stop()
            return 0
        finally:
            if starting is not None:  # a short connection: its decisions are sent by this proxy too
                starting.join(EXPORT_START_SECONDS)
            if self.telemetry is not None:
                self.telemetry.stop()

    def _start_export(self) -> None:
        from governor.runtime import telemetry

        try:
            self.telemetry = telemetry.start(self.env, console=sys.stderr, quiet=True)
        except Exception as err:
            self.say(f"telemetry is not sent: {type(err).__name__}: {err}")

    def _relay(self) -> str:
        """Relay lines both ways until one side closes; which one ("client" or "server")."""
        child = self.child
        assert child is not None and child.stdin is not None and child.stdout is not None
        client_in, server_out = self.stdin.fileno(), child.stdout.fileno()
        self.client_out, self.server_in = self.stdout.fileno(), child.stdin.fileno()
        os.set_blocking(self.server_in, False)  # our own pipe: a full one never stalls the loop
        self.outbox = {self.client_out: bytearray(), self.server_in: bytearray()}
        selector = selectors.DefaultSelector()
        selector.register(client_in, selectors.EVENT_READ)
        selector.register(server_out, selectors.EVENT_READ)
        self.writable = select.poll()  # the client's pipe, asked without waiting before a write
        self.writable.register(self.client_out, select.POLLOUT)
        partial = {client_in: bytearray(), server_out: bytearray()}  # a line still arriving
        writing: set[int] = set()
        warming = False
        deadline: float | None = None  # once the client has gone: how long the server may take to finish
        while True:
            for fd, waiting in self.outbox.items():
                if waiting and fd not in writing:
                    selector.register(fd, selectors.EVENT_WRITE)
                    writing.add(fd)
                elif not waiting and fd in writing:
                    selector.unregister(fd)
                    writing.discard(fd)
            ready = selector.select(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if deadline is not None and not ready and time.monotonic() >= deadline:
                selector.close()
                return "client"
            for key, _ in ready:
                fd = key.fd
                if fd in writing:
                    self._write_some(fd)
                    continue
                if fd not in partial or (fd == client_in and deadline is not None):
                    continue  # closed earlier in this round
                try:
                    data = os.read(fd, 1 << 16)
                except OSError:
                    data = b""
                if data and b"\n" not in data:  # a long line arriving in pieces: no copying it each time
                    partial[fd] += data
                    continue
                lines = data.split(b"\n")
                lines[0] = bytes(partial[fd]) + lines[0]
                partial[fd] = bytearray(lines.pop()) if data else bytearray()
                for line in lines:
                    if not line.strip():
                        continue
                    if fd == client_in:
                        self._client_line(line + b"\n")
                    else:
                        self.to_client(self._server_line(line + b"\n"))
                for out in self.outbox:  # written now where the pipe takes it: no round of the loop per line
                    self._write_some(out, until_full=True)
                if fd == server_out and not warming:  # after the first answer: loading it holds the GIL
                    warming = True
                    threading.Thread(target=self._warm, daemon=True).start()
                if not data and fd == server_out:
                    selector.close()
                    if deadline is not None:  # the client left first; the server has finished
                        self._drain(self.client_out)
                        return "client"
                    return "server"
                if not data:  # the client is done: the server gets the rest, then EOF, and may finish
                    selector.unregister(client_in)
                    if self.server_in in writing:
                        selector.unregister(self.server_in)
                        writing.discard(self.server_in)
                    self._close_server_input()
                    deadline = time.monotonic() + STOP_SECONDS

    def _close_server_input(self) -> None:
        """Everything for the server written, its stdin closed (the MCP spec's first step of shutdown)."""
        child = self.child
        assert child is not None and child.stdin is not None
        self._drain(self.server_in)
        self.outbox.pop(self.server_in, None)
        try:
            child.stdin.close()
        except OSError:
            pass

    def _write_some(self, fd: int, until_full: bool = False) -> None:
        """A chunk of what waits for `fd` (which the selector found writable); `until_full`: as much
        as the pipe takes now, without waiting (the server's end is non-blocking; the client's is
        ours only to write when it polls writable, so a full one never blocks the relay)."""
        waiting = self.outbox[fd]
        while waiting:
            if until_full and fd == self.client_out and not self.writable.poll(0):
                return
            try:
                written = os.write(fd, waiting[:CHUNK])
            except BlockingIOError:
                return
            except OSError:  # that side is gone; its end of the other pipe closes too
                waiting.clear()
                return
            del waiting[:written]
            if not until_full:
                return

    def _drain(self, fd: int, seconds: float = STOP_SECONDS) -> None:
        """Write out what waits for `fd` before the proxy stops, for at most `seconds`: a side that
        stopped reading does not hold the proxy up."""
        waiting = self.outbox.get(fd)
        if not waiting:
            return
        deadline = time.monotonic() + seconds
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_WRITE)
            while waiting and selector.select(max(0.0, deadline - time.monotonic())):
                try:
                    del waiting[: os.write(fd, waiting[:CHUNK])]
                except BlockingIOError:
                    continue
                except OSError:
                    break
        waiting.clear()

    def _warm(self) -> None:
        """Load tiktoken now, on this thread: until it has loaded, results are counted with the
        state directory's table (load_quickly, as a hook deciding alone counts), exactly."""
        try:
            from governor.engine.tokens import load_fully

            policy = self.policy()
            if policy is not None:
                load_fully(policy.unit)
        except Exception:
            pass  # results go on being counted with the table, or report why they cannot

    def _stop(self) -> None:
        """The client went away: see the child stopped (stdin closed, then SIGTERM, then SIGKILL, each
        after STOP_SECONDS), and release what it never answered."""
        child = self.child
        assert child is not None
        if self.server_in in self.outbox:
            self._close_server_input()
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                try:
                    child.send_signal(sig)
                except OSError:
                    pass
            try:
                child.wait(STOP_SECONDS)
                break
            except subprocess.TimeoutExpired:
                continue
        left = list(self.governed.values())
        self.governed.clear()
        for call in left:
            self.decide("failed", call.tool, call.call_id, call.turn_id)

    def say(self, message: str) -> None:
        """A line for the client's server log (our stderr)."""
        try:
            self.stderr.write(f"memory-governor proxy: {message}\n".encode("utf-8", "backslashreplace"))
            self.stderr.flush()
        except (OSError, ValueError):
            pass

    # -- client -> server -------------------------------------------------------------

    def _client_line(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            self.to_server(line)  # not ours to judge: the server answers it as it would
            return
        if isinstance(message, list):  # a JSON-RPC batch (before MCP 2025-06-18): one by one
            for item in message:
                self._client_message(item, _line(item))
        else:
            self._client_message(message, line)

    def _client_message(self, message: Any, line: bytes) -> None:
        if not isinstance(message, dict):
            self.to_server(line)
            return
        method = message.get("method")
        if "id" in message and isinstance(method, str):
            ident = _id_key(message["id"])
            self.open[ident] = message["id"]
            if method == "tools/list":
                self.lists.add(ident)
            if method == "tools/call" and self._call(message, ident):
                return
        elif method == "notifications/cancelled":
            self._cancelled(message)
        self.to_server(line)

    def _call(self, message: dict[str, Any], ident: str) -> bool:
        """Decide a tools/call; True if it was answered here (denied) or sent on rewritten."""
        params = message.get("params")
        tool = params.get("name") if isinstance(params, dict) else None
        loaded = self.loaded()  # one look at the policy for the call: the check here and the decision
        policy = loaded[1][0] if loaded is not None else None
        if not isinstance(tool, str) or (policy is not None and policy.tool(self.server, tool) is None):
            return False  # not a governed tool: relayed as it came
        assert isinstance(params, dict)
        own = f"rpc:{self.instance}:{ident}"
        client_id = self.adapter.call_id_of(params)
        call_id = own if client_id is None or client_id in self.spent else client_id
        turn_id = self._turn_id(time.time(), policy)
        answer = self.decide("call", tool, call_id, turn_id, loaded, arguments=params.get("arguments"))
        if answer.get("reused"):  # a client id seen before and spent: no licence to pass uncounted
            call_id = own
            answer = self.decide("call", tool, call_id, turn_id, loaded, arguments=params.get("arguments"))
        if client_id is not None:
            self.spent.add(client_id)
        if "deny" in answer:
            self.open.pop(ident, None)
            result = {"content": [{"type": "text", "text": str(answer["deny"])}], "isError": True}
            self.to_client(_line({"jsonrpc": "2.0", "id": message["id"], "result": result}))
            return True
        if answer.get("defer"):
            self.hooked = True  # the client's hooks decide; they number the turns
            return False
        self.governed[ident] = _Call(call_id, tool, turn_id, str(answer.get("context") or ""))
        if "arguments" in answer:
            self.to_server(_line({**message, "params": {**params, "arguments": answer["arguments"]}}))
            return True
        return False

    def _turn_id(self, now: float, policy: CompiledPolicy | None) -> str | None:
        """This call's turn: the hooks' when they decide, else by quiet gaps."""
        if self.hooked:
            return None
        gap = policy.data["proxy"]["turn_gap_seconds"] if policy is not None else 60
        quiet = self.last_activity is None or (now - self.last_activity > gap and not self.one_run)
        if not self.governed and quiet:
            self.turn += 1
        self.last_activity = now
        return f"gap:{self.instance}:{self.turn}"

    def _cancelled(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        ident = _id_key(params.get("requestId")) if isinstance(params, dict) else None
        call = self.governed.pop(ident, None) if ident is not None else None
        if ident is not None:
            self.open.pop(ident, None)
        if call is not None:  # the model will not read its result: free the turn's budget
            self.decide("failed", call.tool, call.call_id, call.turn_id)

    def to_server(self, line: bytes) -> None:
        self.outbox[self.server_in] += line if line.endswith(b"\n") else line + b"\n"

    # -- server -> client -------------------------------------------------------------

    def _server_line(self, line: bytes) -> bytes:
        if b'"id"' not in line:
            return line  # a notification: nothing to match
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return line
        if not isinstance(message, dict) or "id" not in message or "method" in message:
            return line  # a request from the server to the client: relayed
        ident = _id_key(message["id"])
        call = self.governed.pop(ident, None)
        listed = ident in self.lists
        self.lists.discard(ident)
        self.open.pop(ident, None)
        if call is not None:
            self.last_activity = time.time()
        if call is not None:
            return self._result(call, message, line)
        if listed:
            return self._tools_list(message, line)
        return line

    def _result(self, call: _Call, message: dict[str, Any], line: bytes) -> bytes:
        result = message.get("result")
        if not isinstance(result, dict) or result.get("isError"):
            self.decide("failed", call.tool, call.call_id, call.turn_id)
            return line
        answer = self.decide("result", call.tool, call.call_id, call.turn_id, result=result)
        changed = dict(result)
        if "structuredContent" in changed:  # the client would show it instead of the counted text
            structured = changed.pop("structuredContent")
            if not self.adapter.model_text({"content": changed.get("content")}):
                changed["content"] = [
                    {"type": "text", "text": self.adapter.model_text({"structuredContent": structured})}
                ]
        if "replace" in answer:
            changed["content"] = [{"type": "text", "text": str(answer["replace"])}]
        for context in (call.context, str(answer.get("context") or "")):
            if context:
                changed["content"] = [*(changed.get("content") or []), {"type": "text", "text": context}]
        if changed == result:
            return line
        return _line({**message, "result": changed})

    def _tools_list(self, message: dict[str, Any], line: bytes) -> bytes:
        result = message.get("result")
        tools = result.get("tools") if isinstance(result, dict) else None
        policy = self.policy()
        if not isinstance(tools, list) or policy is None:
            return line
        hidden = False
        out = []
        for tool in tools:
            if isinstance(tool, dict) and "outputSchema" in tool and policy.tool(self.server, str(tool.get("name"))):
                tool = {k: v for k, v in tool.items() if k != "outputSchema"}
                hidden = True
            out.append(tool)
        if not hidden:
            return line
        assert isinstance(result, dict)
        return _line({**message, "result": {**result, "tools": out}})

    def _server_gone(self) -> int:
        """The child exited: answer what it left open, release its calls, say so; the exit status."""
        child = self.child
        assert child is not None
        try:
            code: int | None = child.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            code = None  # it closed its output but lives on: stopped below
            child.kill()
        calls = list(self.governed.values())
        self.governed.clear()
        left = list(self.open.values())
        self.open.clear()
        for call in calls:
            self.decide("failed", call.tool, call.call_id, call.turn_id)
        how = f"exited with code {code}" if code is not None else "closed its output"
        for ident in left:
            error = {"code": SERVER_GONE, "message": f"memory-governor proxy: the memory server {how} before answering"}
            self.to_client(_line({"jsonrpc": "2.0", "id": ident, "error": error}))
        self._drain(self.client_out)
        self.say(f"the memory server `{' '.join(self.command)}` {how}; closing the connection")
        return 0 if code == 0 else 1

    def to_client(self, line: bytes) -> None:
        self.outbox[self.client_out] += line

    # -- deciding ---------------------------------------------------------------------

    def policy(self) -> CompiledPolicy | None:
        """The compiled policy the hooks read (None when there is none: the runner says why)."""
        loaded = self.loaded()
        return loaded[1][0] if loaded is not None else None

    def loaded(self) -> Loaded | None:
        """The policy this connection's decisions are made under, as the runner looks it up (so a
        decision can take it instead of looking again); None when there is none."""
        from governor.runtime.runner import load_policy

        try:
            return load_policy(self.env, self.project, self.session)
        except Exception:
            return None

    def decide(self, event: str, tool: str, call_id: str, turn_id: str | None, loaded: Loaded | None = None,
               **fields: Any) -> dict[str, Any]:  # fmt: skip
        """One event through the runner (as a hook's): its answer; errors and notices to stderr.
        `loaded`: the policy looked up for this event a moment ago (`loaded`)."""
        from governor.runtime.runner import respond

        payload = {"event": event, "session_id": self.session, "turn_id": turn_id, "call_id": call_id,
                   "server": self.server, "tool": tool, "project": self.project, **fields}  # fmt: skip
        outcome = respond(HARNESS, b"", self.env, payload=payload, loaded=loaded)
        for line in outcome.errors:
            self.say(line.removeprefix("memory-governor: "))
        answer = outcome.answer or {}
        message = answer.get("systemMessage")
        if message and message not in outcome.errors:  # the user's copy of an error is said once
            self.say(str(message).removeprefix("memory-governor: "))
        return answer


def _id_key(ident: Any) -> str:
    """A request id as a table key (1 and "1" are different ids)."""
    return json.dumps(ident)


def _line(message: Any) -> bytes:
    try:
        return (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from the wire: escape everything
        return (json.dumps(message, separators=(",", ":")) + "\n").encode("ascii")


def parse_args(argv: list[str]) -> tuple[str, list[str]]:
    """`--name SERVER -- COMMAND ARGS...` -> (SERVER, [COMMAND, ARGS...]); ValueError if wrong."""
    server = DEFAULT_SERVER
    rest = list(argv)
    while rest and rest[0] != "--":
        option = rest.pop(0)
        if option == "--name" and rest:
            server = rest.pop(0)
        elif option.startswith("--name="):
            server = option.split("=", 1)[1]
        else:
            rest.insert(0, option)
            break
    if rest and rest[0] == "--":
        rest.pop(0)
    if not rest or not server:
        raise ValueError(USAGE)
    return server, rest


def main(argv: list[str]) -> int:
    try:
        server, command = parse_args(argv)
    except ValueError as err:
        sys.stderr.write(f"{err}\n")
        return 2

    def stop(_signum: int, _frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    proxy = Proxy(server, command, os.environ, os.getcwd(), sys.stdin.buffer, sys.stdout.buffer, sys.stderr.buffer)
    return proxy.run()


if __name__ == "__main__":
    # Run as a file (python -I -S .../governor/runtime/proxy.py): import the package from where
    # this file is, first, so nothing on the user's path or in their project stands in for it.
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    if sys.path and os.path.abspath(sys.path[0]) == here:
        sys.path[0] = root
    else:
        sys.path.insert(0, root)
    sys.exit(main(sys.argv[1:]))
