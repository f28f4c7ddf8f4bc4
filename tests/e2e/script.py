"""What every loopback model stand-in shares, whatever its wire format: a script played in
order, lanes for subagents, a record of every request, and a small threaded HTTP server.

A SCRIPT is a list of replies, one per model request of one *lane*. A reply is
``text("...")`` (the turn ends), ``tool_uses(call(name, {...}), ...)`` (one assistant message
with several tool calls, run as one parallel batch), or a callable ``f(request) -> reply``
that looks at the request it answers (e.g. to fetch an id the previous search surfaced).
Tool names in ``call`` are written as the harness names the tool to the model.

Lanes: the main agent and each subagent talk to the model separately. A lane is chosen by a
*marker string*: the first lane whose marker occurs in the request's system prompt or in its
first user message serves it; other requests go to the ``main`` lane.

A wire module (fake_model.py for the Anthropic Messages API, and one per other API) defines
its own ``Request`` (with ``system``, ``first_user_text``, ``tools``, ``tool_results()``),
subclasses ``ScriptedModel`` and implements ``handle(method, path, body) -> Response``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = dict[str, Any]
Step = Reply | Callable[[Any], Reply]


# -- building replies --------------------------------------------------------------------


def text(body: str) -> Reply:
    """An assistant reply that ends the turn with `body`."""
    return {"kind": "text", "text": body}


def call(name: str, tool_input: dict[str, Any] | None = None) -> dict[str, Any]:
    """One tool call (`name` as the model would write it, e.g. mcp__engram__mem_search)."""
    return {"name": name, "input": dict(tool_input or {})}


def tool_uses(*calls: dict[str, Any], preface: str = "") -> Reply:
    """One assistant message with these tool calls (run as one parallel batch)."""
    return {"kind": "tool_use", "calls": list(calls), "text": preface}


def after(condition: Callable[[], bool], step: Step, timeout: float = 60.0) -> Step:
    """`step`, answered only once `condition()` holds (polled; after `timeout` seconds it is
    answered anyway, and the test's own assertions show the order was not met). For a
    background subagent whose calls must come after something, e.g. its parent's turn ending."""

    def reply(request: Any) -> Reply:
        import time

        deadline = time.monotonic() + timeout
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.05)
        return step(request) if callable(step) else step

    return reply


# -- one HTTP exchange -------------------------------------------------------------------


class Response:
    """What a wire module answers: a status, headers, and a body (bytes, or SSE event chunks)."""

    def __init__(self, status: int = 200, body: bytes | Iterable[bytes] = b"", content_type: str = "application/json",
                 headers: dict[str, str] | None = None) -> None:  # fmt: skip
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers or {}

    @classmethod
    def json(cls, data: Any, status: int = 200) -> Response:
        return cls(status, json.dumps(data).encode())

    @classmethod
    def sse(cls, chunks: Iterable[str]) -> Response:
        return cls(200, [c.encode() for c in chunks], "text/event-stream")


class BaseRequest:
    """A recorded request; wire modules subclass it with the accessors their format needs."""

    def __init__(self, index: int, path: str, body: dict[str, Any]) -> None:
        self.index = index
        self.path = path
        self.body = body
        self.lane: str | None = None  # None: a side query, answered outside the script
        self.step: int | None = None  # which script step answered it
        self.reply: Reply | None = None

    @property
    def system(self) -> str:
        return ""

    @property
    def first_user_text(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(#{self.index} lane={self.lane!r} step={self.step})"


# -- the script and the server -----------------------------------------------------------


class ScriptedModel:
    """A scripted stand-in on 127.0.0.1. Use as a context manager, or start()/stop(). Thread-safe."""

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.other: list[tuple[str, str, Any]] = []  # paths outside the script (token counts, model lists)
        self.errors: list[str] = []  # script problems (exhausted lanes), asserted empty by tests
        self._lanes: dict[str, list[Step]] = {"main": []}
        self._markers: list[tuple[str, str]] = []
        self._served: dict[str, int] = {}
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # script -----------------------------------------------------------------------------
    def script(self, main: Iterable[Step], lanes: dict[str, Iterable[Step]] | None = None) -> ScriptedModel:
        """Set the script for the next run(s): the main lane, and marker -> steps for subagents."""
        with self.lock:
            self._lanes = {"main": list(main)}
            self._markers = []
            for marker, steps in (lanes or {}).items():
                self._lanes[marker] = list(steps)
                self._markers.append((marker, marker))
            self._served = {}
        return self

    def lane_of(self, request: Any) -> str:
        haystacks = (request.system, request.first_user_text)
        for marker, lane in self._markers:
            if any(marker in h for h in haystacks):
                return lane
        return "main"

    def reset(self) -> None:
        """Forget the script and the errors (between tests); the recorded requests stay."""
        with self.lock:
            self._lanes = {"main": []}
            self._markers = []
            self._served = {}
            self.errors = []

    def remaining(self) -> dict[str, int]:
        with self.lock:
            return {lane: len(steps) - self._served.get(lane, 0) for lane, steps in self._lanes.items()}

    def next_reply(self, request: Any, lane: str | None = None) -> Reply:
        """Record `request` and answer it from its lane's script (`lane` forces one)."""
        with self.lock:
            self.requests.append(request)
            lane = lane or self.lane_of(request)
            request.lane = lane
            steps = self._lanes.get(lane, [])
            index = self._served.get(lane, 0)
            self._served[lane] = index + 1
            request.step = index
        if index >= len(steps):
            self.errors.append(f"lane {lane!r} exhausted at request #{request.index} (step {index})")
            reply = text("(script exhausted)")
        else:
            step = steps[index]
            reply = step(request) if callable(step) else step
        request.reply = reply
        return reply

    def record_side_query(self, request: Any) -> None:
        """A request answered outside the script (titles, routing, summaries): recorded, no lane."""
        with self.lock:
            self.requests.append(request)
            request.lane = None

    # inspection -------------------------------------------------------------------------
    def mark(self) -> int:
        """The current request count; pass it to `since` to look at one run's requests."""
        with self.lock:
            return len(self.requests)

    def since(self, mark: int = 0, lane: str | None = None) -> list[Any]:
        with self.lock:
            out = [r for r in self.requests[mark:] if r.lane is not None]
        return [r for r in out if lane is None or r.lane == lane]

    def results_since(self, mark: int = 0, lane: str | None = None) -> list[Any]:
        """Every tool result the model received after `mark` (each once, by call id)."""
        seen: dict[str, Any] = {}
        for request in self.since(mark, lane):
            for result in request.tool_results():
                seen.setdefault(result.tool_use_id, result)
        return list(seen.values())

    # serving ----------------------------------------------------------------------------
    def handle(self, method: str, path: str, body: Any) -> Response:
        raise NotImplementedError

    def start(self) -> ScriptedModel:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                response = model.handle(method, self.path, body)
                self.send_response(response.status)
                self.send_header("content-type", response.content_type)
                for name, value in response.headers.items():
                    self.send_header(name, value)
                if isinstance(response.body, bytes):
                    self.send_header("content-length", str(len(response.body)))
                    self.end_headers()
                    self.wfile.write(response.body)
                    return
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                for chunk in response.body:
                    self.wfile.write(chunk)
                    self.wfile.flush()
                self.close_connection = True

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name=type(self).__name__, daemon=True)
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def serving(model: ScriptedModel) -> Iterator[ScriptedModel]:
    """For a session-scoped fixture: `yield from serving(SomeModel())`."""
    with model:
        yield model
