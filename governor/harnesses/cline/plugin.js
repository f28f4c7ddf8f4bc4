// memory-governor for Cline: a plugin that forwards Cline's runtime hooks to the governor and applies its answers.
// Written by `memory-governor install cline`, which fills in CONFIG; a new install rewrites this file.
//
// Cline (the `cline` CLI, 3.x) loads plugins from `.cline/plugins/` and `~/.cline/plugins/` into a sandbox
// process beside its agent and calls their `hooks` there. Each forwarded hook is one JSON message
// (governor/harnesses/cline/__init__.py reads it), answered by the governor through the shared client below:
// one JSON object (or nothing): deny (the reason the model gets instead of the call's result), input (the
// call's new arguments), content (the result's new content), context (a line for the model), systemMessage
// (for the user). A governed memory call never goes through silently: when no governor answers, the policy's
// on_error decides here (closed when the policy could never be read), visibly. Node's built-ins only.
import { fileURLToPath } from "node:url"
// memory-governor: the shared client (client.js) is written here by the install

const CONFIG = {} // memory-governor: the install writes this line
// The hook command: a project install's is the project's committed launcher, found beside this file
// (<project>/.cline/plugins/ -> <project>/.memory-governor/hook), which runs each machine's own governor and, on
// a machine with none, gives the project's no-governor answers (governor/harnesses/launcher.py); a user
// install's is this machine's interpreter on the governor's entry file.
const COMMAND = CONFIG.launcher
  ? ["sh", fileURLToPath(new URL(`../../${CONFIG.launcher}`, import.meta.url)), CONFIG.harness]
  : CONFIG.command

const state = {
  session: "", // the CLI session (its --id), every agent's calls counted in it
  cwd: process.cwd(),
  gov: null,
  started: false, // session_start sent
  lead: "", // the session's own agent (see agent())
  runs: new Map(), // a root agent's run id -> {prompt: the user's message id, context: a line for the model}
  callKey: governorCallKeys(), // Cline's call id -> the id the governor knows the call by
  mcpOf: governorTools(CONFIG.tools, /^(.+?)__(mem_[a-z0-9_]+)$/), // and the memory under another server name
}

function say(text) {
  process.stderr.write(text.endsWith("\n") ? text : text + "\n")
}

function client() {
  state.gov ??= governorClient({ config: CONFIG, command: COMMAND, env: process.env, project: state.cwd })
  return state.gov
}

// The agent at work. The session's lead is the first agent without a parent this process ran (the same agent
// runs every prompt of a session); another agent without one (a teammate) is counted as the lead's subagent,
// so that its runs open no turn of their own.
function agent(snapshot) {
  const id = snapshot?.agentId ?? ""
  if (!snapshot?.parentAgentId && !state.lead) state.lead = id
  const parent = snapshot?.parentAgentId ?? (id !== state.lead ? state.lead : null)
  return { agentId: id, parentAgentId: parent, agentRole: snapshot?.agentRole ?? null }
}

// The governor's answer to a message, or on_error's when none came (a governed call refused under closed).
function decide(event, snapshot, fields, governed) {
  const gov = client()
  const payload = { event, sessionId: state.session, cwd: state.cwd, ...agent(snapshot), ...fields }
  const refused = !governed ? null : event === "tool_call" ? { deny: gov.refusal }
    : event === "tool_result" ? { content: [{ type: "text", text: `[${gov.refusal}]` }] } : null
  return gov.decide(payload, `${event} ${fields.toolName ?? ""}`, state.session, say, refused)
}

function textOf(message) {
  const parts = Array.isArray(message?.content) ? message.content : []
  return parts.filter((p) => p?.type === "text" && typeof p.text === "string").map((p) => p.text).join("\n")
}

const plugin = {
  name: "memory-governor",
  manifest: { capabilities: ["hooks"] },

  setup(_api, ctx) {
    state.session = ctx?.session?.sessionId ?? ""
    state.cwd = ctx?.workspaceInfo?.rootPath ?? process.cwd()
    client().describe() // learn the governor while Cline starts
  },

  hooks: {
    // A root agent's run is one user prompt; a subagent's run (parentAgentId set) is no prompt of the user's.
    async beforeRun({ snapshot }) {
      if (agent(snapshot).parentAgentId) return
      const users = (snapshot?.messages ?? []).filter((m) => m?.role === "user")
      const prompt = users[users.length - 1]
      let context = ""
      if (!state.started) {
        state.started = true // a session that already held a user's message is being resumed
        context = (await decide("session_start", snapshot, { reason: users.length > 1 ? "resume" : "startup" }, false)).context ?? ""
      }
      const answer = await decide("prompt", snapshot, { prompt: textOf(prompt) }, false)
      context = [context, answer.context].filter(Boolean).join("\n")
      state.runs.set(snapshot?.runId, { prompt: prompt?.id, context })
    },

    // The run's context line reaches the model with the user's message, in every request of the run.
    async beforeModel({ snapshot, request }) {
      const run = state.runs.get(snapshot?.runId)
      if (!run?.context || !Array.isArray(request?.messages)) return
      let at = request.messages.findIndex((m) => m?.id === run.prompt)
      if (at < 0) at = request.messages.map((m) => m?.role).lastIndexOf("user")
      if (at < 0) return
      const messages = [...request.messages]
      const message = messages[at]
      messages[at] = { ...message, content: [...(message.content ?? []), { type: "text", text: run.context }] }
      return { messages }
    },

    async beforeTool({ snapshot, toolCall, input }) {
      const name = toolCall?.toolName
      const mcp = state.mcpOf(name)
      if (!mcp && !CONFIG.forward.includes(name)) return
      const callId = state.callKey(toolCall.toolCallId, true)
      const answer = await decide("tool_call", snapshot, { toolName: name, toolCallId: callId, input, mcp }, !!mcp)
      if (typeof answer.deny === "string") return { skip: true, reason: answer.deny }
      const out = {}
      if (answer.input && typeof answer.input === "object") out.input = answer.input
      if (answer.context) out.appendContext = answer.context
      return Object.keys(out).length ? out : undefined
    },

    async afterTool({ snapshot, toolCall, input, result }) {
      const name = toolCall?.toolName
      const mcp = state.mcpOf(name)
      if (!mcp) return
      const callId = state.callKey(toolCall.toolCallId, false)
      const output = result?.output
      const content = Array.isArray(output?.content) ? output.content : typeof output === "string" ? output : []
      const answer = await decide("tool_result", snapshot, { toolName: name, toolCallId: callId, input, mcp, content,
        isError: result?.isError === true }, true)
      const out = {}
      if (Array.isArray(answer.content)) out.result = { ...result, output: { content: answer.content } } // all the model reads of it
      if (answer.context) out.appendContext = answer.context
      return Object.keys(out).length ? out : undefined
    },
  },
}

export { plugin }
export default plugin
