"""A loopback stand-in for the Gemini API (generateContent) that plays a script.

The real Gemini CLI is pointed at it with GOOGLE_GEMINI_BASE_URL (and a GEMINI_API_KEY). It
answers

- ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse`` with one SSE ``data:`` chunk
  holding the whole reply (``candidates[0].content.parts``: a text part, and a ``functionCall``
  part per tool call, each with a fresh id), ``finishReason: STOP`` and ``usageMetadata``;
- ``POST ...:generateContent`` with the same reply as one JSON object;
- ``POST ...:countTokens`` with ``{"totalTokens": N}``;
- side queries, outside the script: a request that asks for JSON (``generationConfig.
  responseMimeType: application/json`` — the model router's classifier, the next-speaker
  check) gets a JSON object that fits its schema (the router is told ``flash``, or complexity
  1 of 100; the next-speaker check ``user``); a request without tools (chat compression's summary and its
  verification) gets a fixed ``<state_snapshot>``.

The script, its lanes and the recording are script.py's; ``engram(tool, ...)`` names an Engram
tool as Gemini CLI names it to the model (``mcp_engram_<tool>``). Everything is recorded
(``FakeGemini.requests``), so a test asserts on exactly what the model received.

Request shapes seen from the real binary (Gemini CLI 0.61.0, `gemini -p`, API-key auth):

- ``contents`` is the whole conversation, ``role`` "user" or "model"; ``systemInstruction``
  is ``{"role": "user", "parts": [{"text": ...}]}``; ``tools`` is ``[{"functionDeclarations":
  [{"name", "description", "parametersJsonSchema"}]}]``.
- The results of one batch come back in one user content: one ``functionResponse`` part per
  call, ``{"id", "name", "response": {"output": TEXT}}`` for a result and ``{"response":
  {"error": TEXT}}`` for a refusal or failure.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, ClassVar

from script import BaseRequest, Reply, Response, ScriptedModel, Step, call, text, tool_uses

__all__ = ["FakeGemini", "Reply", "Request", "Step", "ToolResult", "call", "engram", "text", "tool_uses"]

STATE_SNAPSHOT = (
    "<state_snapshot>\n<overall_goal>Work on myapp with memory from Engram.</overall_goal>\n"
    "<key_knowledge>The user searched project memory.</key_knowledge>\n</state_snapshot>"
)


def engram(tool: str, **tool_input: Any) -> dict[str, Any]:
    """A function call for the Engram stand-in as Gemini CLI names it: engram("mem_search", query="jwt")."""
    return call(f"mcp_engram_{tool}", tool_input)


def _parts_text(parts: Any) -> str:
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return ""
    return "\n".join(str(p["text"]) for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


class ToolResult:
    """One functionResponse part as the model received it."""

    def __init__(self, part: dict[str, Any], name: str | None, tool_input: dict[str, Any] | None) -> None:
        self.part = part
        self.tool_use_id: str = str(part.get("id") or "")
        response = part.get("response")
        response = response if isinstance(response, dict) else {"output": response}
        self.response = response
        self.is_error = "error" in response
        value = response.get("error") if self.is_error else response.get("output")
        self.text: str = value if isinstance(value, str) else json.dumps(value)
        self.name = name or part.get("name")
        self.input = tool_input

    def __repr__(self) -> str:
        return f"ToolResult({self.name!r}, is_error={self.is_error}, text={self.text[:80]!r})"


class Request(BaseRequest):
    """One recorded generateContent / streamGenerateContent request."""

    @property
    def contents(self) -> list[dict[str, Any]]:
        return [c for c in self.body.get("contents") or [] if isinstance(c, dict)]

    @property
    def tools(self) -> list[str]:
        names = []
        for tool in self.body.get("tools") or []:
            for declaration in tool.get("functionDeclarations") or [] if isinstance(tool, dict) else []:
                names.append(str(declaration.get("name", "")))
        return names

    @property
    def system(self) -> str:
        system = self.body.get("systemInstruction")
        if isinstance(system, dict):
            return _parts_text(system.get("parts"))
        return system if isinstance(system, str) else ""

    @property
    def first_user_text(self) -> str:
        for content in self.contents:
            if content.get("role") == "user":
                found = _parts_text(content.get("parts"))
                if found:
                    return found
        return ""

    @property
    def last_user(self) -> dict[str, Any]:
        for content in reversed(self.contents):
            if content.get("role") == "user":
                return content
        return {}

    @property
    def wants_json(self) -> bool:
        config = self.body.get("generationConfig") or {}
        return config.get("responseMimeType") == "application/json"

    def all_text(self) -> str:
        """Every text the model was given in this request (system + the text parts of all contents)."""
        return self.system + "\n" + "\n".join(_parts_text(c.get("parts")) for c in self.contents)

    def calls_by_id(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for content in self.contents:
            if content.get("role") == "model":
                for part in content.get("parts") or []:
                    fn = part.get("functionCall") if isinstance(part, dict) else None
                    if isinstance(fn, dict):
                        out[str(fn.get("id") or "")] = fn
        return out

    def tool_results(self) -> list[ToolResult]:
        """The functionResponse parts of the last user content (the results of the last batch)."""
        return self._results([self.last_user])

    def all_tool_results(self) -> list[ToolResult]:
        return self._results([c for c in self.contents if c.get("role") == "user"])

    def _results(self, contents: list[dict[str, Any]]) -> list[ToolResult]:
        calls = self.calls_by_id()
        out = []
        for content in contents:
            for part in content.get("parts") or []:
                response = part.get("functionResponse") if isinstance(part, dict) else None
                if isinstance(response, dict):
                    fn = calls.get(str(response.get("id") or ""), {})
                    out.append(ToolResult(response, fn.get("name"), fn.get("args")))
        return out

    def last_user_text(self) -> str:
        """Text parts of the last user content that are not function responses (hook context, prompts)."""
        return _parts_text(self.last_user.get("parts"))


def _fill(schema: Any, hints: dict[str, Any]) -> Any:
    """A value that fits a JSON schema (OpenAPI-style or JSON Schema), preferring `hints` by property."""
    if not isinstance(schema, dict):
        return ""
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        out = {}
        for name, sub in (schema.get("properties") or {}).items():
            out[name] = hints[name] if name in hints else _fill(sub, hints)
        return out
    if schema.get("enum"):
        return schema["enum"][0]
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    return {"string": "stand-in", "boolean": False, "array": []}.get(kind, "")


class FakeGemini(ScriptedModel):
    """The generateContent stand-in. Use as a context manager, or start()/stop(). Thread-safe."""

    # What the JSON side queries are told: the router picks flash (or the lowest complexity, 1-100),
    # the next speaker is the user.
    JSON_HINTS: ClassVar[dict[str, Any]] = {"model_choice": "flash", "complexity_score": 1, "next_speaker": "user",
                                            "reasoning": "Scripted stand-in."}  # fmt: skip

    def handle(self, method: str, path: str, body: Any) -> Response:
        bare = path.split("?", 1)[0]
        if method != "POST" or ":" not in bare.rsplit("/", 1)[-1]:
            self.other.append((method, path, body))
            return Response.json({"error": {"code": 404, "message": bare, "status": "NOT_FOUND"}}, 404)
        action = bare.rsplit(":", 1)[1]
        if action == "countTokens":
            self.other.append((method, path, body))
            return Response.json({"totalTokens": max(1, len(json.dumps(body)) // 4)})
        if action not in ("generateContent", "streamGenerateContent"):
            self.other.append((method, path, body))
            return Response.json({"error": {"code": 404, "message": action, "status": "NOT_FOUND"}}, 404)
        request = Request(len(self.requests), path, body if isinstance(body, dict) else {})
        if request.wants_json:
            self.record_side_query(request)
            config = request.body.get("generationConfig") or {}
            schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
            reply = text(json.dumps(_fill(schema, self.JSON_HINTS)))
        elif not request.body.get("tools"):
            self.record_side_query(request)  # chat compression: a summary, then its verification
            reply = text(STATE_SNAPSHOT)
        else:
            reply = self.next_reply(request)
        request.reply = reply
        chunk = _chunk(reply, bare.rsplit("/", 1)[-1].split(":")[0])
        if action == "generateContent":
            return Response.json(chunk)
        return Response.sse([f"data: {json.dumps(chunk)}\r\n\r\n"])


def _chunk(reply: Reply, model: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if reply.get("text"):
        parts.append({"text": reply["text"]})
    for c in reply.get("calls", []):
        parts.append({"functionCall": {"id": f"call_{uuid.uuid4().hex[:16]}", "name": c["name"], "args": c["input"]}})
    if not parts:
        parts.append({"text": "Done."})
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
        "modelVersion": model,
        "responseId": uuid.uuid4().hex[:20],
    }
