// memory-governor for Pi: forwards Pi's extension events to the governor and applies its answers.
// Written by `memory-governor install pi`, which fills in CONFIG; a new install rewrites this file.
//
// Each forwarded event is one JSON message (governor/harnesses/pi/__init__.py reads it), answered by the
// governor through the shared client below: one JSON object (or nothing): deny (the reason the model gets
// instead of the call's result), input (the call's new arguments), content (the result's new content),
// context (a line for the model), systemMessage (for the user). A governed memory call never goes through
// silently: when no governor answers, the policy's on_error decides here (closed when the policy could
// never be read), visibly. Node's built-ins only.
import { fileURLToPath } from "node:url"
// memory-governor: the shared client (client.js) is written here by the install

const CONFIG = {} // memory-governor: the install writes this line
// The hook command: a project install's finds each machine's own governor as the project's hook settings do
// (CONFIG.script), and on a machine with none runs the project's committed launcher, found beside this file
// (<project>/.pi/extensions/ -> <project>/.memory-governor/hook), once it has checked it is the one installed
// (governor/harnesses/launcher.py); a user install's is this machine's interpreter on the governor's entry file.
const COMMAND = CONFIG.launcher
  ? ["sh", "-c", CONFIG.script, "sh", fileURLToPath(new URL(`../../${CONFIG.launcher}`, import.meta.url)),
     CONFIG.harness]
  : CONFIG.command
const CUSTOM_TYPE = "memory-governor" // the messages this extension adds for the model

export default function memoryGovernor(pi) {
  // Installed in both scopes, Pi loads two copies: the first to load decides, the other stands aside.
  const claims = (globalThis[Symbol.for("memory-governor.pi")] ??= new Set())
  const scope = CONFIG.launcher ? "project" : "user"
  if (claims.size > 0 && !claims.has(scope)) return
  claims.add(scope)
  const callKey = governorCallKeys() // Pi's call id -> the id the governor knows the call by
  const carried = new Map() // call id -> context a before-answer gave, added to the call's result
  const waiting = new Map() // session id -> context for the session's next prompt
  const mcpOf = governorTools(CONFIG.tools, /^mcp__(.+?)__(mem_[a-z0-9_]+)$/) // and the memory under another name
  let gov = null

  function client(ctx) {
    gov ??= governorClient({ config: CONFIG, command: COMMAND, env: process.env, project: ctx.cwd })
    return gov
  }

  function say(ctx) {
    return (text) => {
      if (ctx.hasUI) ctx.ui.notify(text, "warning")
      else process.stderr.write(text.endsWith("\n") ? text : text + "\n")
    }
  }

  function sessionId(ctx) {
    return ctx.sessionManager.getSessionId()
  }

  // The governor's answer to a message, or on_error's when none came (a governed call refused under closed).
  function decide(ctx, event, fields, governed) {
    const gov = client(ctx)
    const payload = { event, sessionId: sessionId(ctx), cwd: ctx.cwd, ...fields }
    const refused = !governed ? null : event === "tool_call" ? { deny: gov.refusal }
      : event === "tool_result" ? { content: [{ type: "text", text: `[${gov.refusal}]` }] } : null
    return gov.decide(payload, `${event} ${fields.toolName ?? ""}`, payload.sessionId, say(ctx), refused)
  }

  pi.on("session_start", async (event, ctx) => {
    client(ctx).describe() // learn the governor while Pi starts
    // Pi says "startup" for every process it starts, a continued session's too (--session, --continue: 1.6.0):
    // a session that already holds a user's message is being resumed.
    const held = ctx.sessionManager.getEntries().some((e) => e.type === "message" && e.message?.role === "user")
    const reason = event.reason === "startup" && held ? "resume" : event.reason
    governorHold(waiting, sessionId(ctx), (await decide(ctx, "session_start", { reason }, false)).context)
  })

  pi.on("session_compact", async (_event, ctx) => {
    governorHold(waiting, sessionId(ctx), (await decide(ctx, "session_compact", {}, false)).context)
  })

  pi.on("before_agent_start", async (event, ctx) => {
    const answer = await decide(ctx, "before_agent_start", { prompt: event.prompt ?? "", messageType: event.messageType }, false)
    const id = sessionId(ctx)
    governorHold(waiting, id, answer.context)
    const context = waiting.get(id)
    waiting.delete(id)
    if (context) return { message: { customType: CUSTOM_TYPE, content: context, display: false } }
  })

  pi.on("tool_call", async (event, ctx) => {
    const mcp = mcpOf(event.toolName)
    if (!mcp && !CONFIG.forward.includes(event.toolName)) return
    const callId = callKey(event.toolCallId, true)
    const answer = await decide(ctx, "tool_call", { toolName: event.toolName, toolCallId: callId, input: event.input,
      mcp, parentToolCallId: event.parentToolCallId }, !!mcp)
    if (typeof answer.deny === "string") return { block: true, reason: answer.deny }
    if (answer.input && typeof answer.input === "object" && event.input && typeof event.input === "object") {
      for (const key of Object.keys(event.input)) delete event.input[key] // the tool holds this object: change it in place
      Object.assign(event.input, answer.input)
    }
    governorHold(carried, callId, answer.context)
  })

  pi.on("tool_result", async (event, ctx) => {
    const mcp = mcpOf(event.toolName)
    if (!mcp) return
    const callId = callKey(event.toolCallId, false)
    const answer = await decide(ctx, "tool_result", { toolName: event.toolName, toolCallId: callId, input: event.input,
      mcp, content: event.content, isError: event.isError === true }, true)
    governorHold(carried, callId, answer.context)
    const context = carried.get(callId)
    carried.delete(callId)
    let content = Array.isArray(answer.content) ? answer.content : null
    if (context) content = [...(content ?? event.content ?? []), { type: "text", text: context }]
    if (!content) return
    // A codemode script gets an MCP call's result as its structuredContent, the server's CallToolResult,
    // which Pi drops when the content is replaced alone: the script gets the governed content in that
    // shape instead, without the server's own structured copy of what was held back.
    const script = event.structuredContent && typeof event.structuredContent === "object"
      && Array.isArray(event.structuredContent.content)
    return script ? { content, structuredContent: { content, ...(event.isError === true ? { isError: true } : {}) } }
      : { content }
  })
}
