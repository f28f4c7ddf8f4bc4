// memory-governor for OpenCode: forwards OpenCode's hook calls to the governor and applies its answers.
// Written by `memory-governor install opencode` (or `install kilo`: Kilo Code loads OpenCode's plugins), which fills in
// CONFIG; a new install rewrites this file.
//
// Each forwarded hook call is one JSON message (governor/harnesses/opencode/__init__.py reads it) sent
// to the warm server's Unix socket ("MG1 <harness> <fingerprint> <env-bytes> <body-bytes>\n" env body ->
// "OK <stdout-bytes> <stderr-bytes>\n" stdout stderr, or "RETRY <reason>"), or, when there is no server,
// to the hook process on stdin. The answer is one JSON object (or nothing): deny (throw it), args
// (the call's new arguments), content (the MCP result's new content), context (a line for the model),
// systemMessage (for the user). A governed memory call never goes through silently: when no governor
// answers, the policy's on_error decides here (closed when the policy could never be read), visibly.
// No dependencies: node's built-ins only (a plugin with dependencies makes OpenCode install packages).
import { realpathSync } from "node:fs"
import { fileURLToPath } from "node:url"
// memory-governor: the shared client (client.js) is written here by the install

const CONFIG = {} // memory-governor: the install writes this line
// The hook command: a project install's finds each machine's own governor as the project's hook settings
// do (CONFIG.script), and on a machine with none runs the project's committed launcher, found beside this
// file (<project>/.opencode/plugin/ -> <project>/.memory-governor/hook), once it has checked it is the one
// installed: it gives the project's no-governor answers (governor/harnesses/launcher.py); a user install's
// is this machine's interpreter on the governor's entry file.
const COMMAND = CONFIG.launcher
  ? ["sh", "-c", CONFIG.script, "sh", fileURLToPath(new URL(`../../${CONFIG.launcher}`, import.meta.url)),
     CONFIG.harness]
  : CONFIG.command

const ID_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

export const MemoryGovernor = async ({ client, directory, worktree }) => {
  // Installed in both scopes, OpenCode loads two copies: the first to load decides, the other stands aside.
  const claims = (globalThis[Symbol.for("memory-governor.opencode")] ??= new Map())
  if (claims.has(directory)) return {}
  const claim = {}
  claims.set(directory, claim)
  const started = Date.now()
  const headless = ["run", "serve", "acp"].includes(process.argv[2])
  const sessions = new Map() // session id -> Promise of {parentID, agent, created}, or of null
  const opened = new Set() // sessions this process has announced (session.start)
  const callKey = governorCallKeys() // OpenCode's call id -> the id the governor knows the call by
  const refused = new Set() // calls refused before they ran: their failure is no failure to report
  const reported = new Set() // calls whose failure was reported
  const carried = new Map() // call id -> context a before-answer gave, added to the call's result
  const waiting = new Map() // session id -> context for the session's next message
  const gov = governorClient({ config: CONFIG, command: COMMAND, env: process.env, project: directory })
  let counter = 0
  let argsPrompt = process.argv[2] === "run" // the next user message is `opencode run`'s arguments, joined

  // OpenCode takes its directory from an inherited $PWD before its working directory (1.18.33): started
  // by a program with a stale PWD, it loads that folder's plugins and policy, not those of where it runs.
  const stale = stalePwd()
  if (stale) {
    say(`memory-governor: OpenCode runs in ${stale.cwd} but took its project from PWD=${stale.pwd}: the plugins ` +
      `and memory policy of ${stale.cwd} are not in force. Start it with PWD set to the folder it runs in ` +
      `(cd ${stale.cwd} && opencode ..., or env PWD=${stale.cwd} opencode ...).`)
  }

  function stalePwd() {
    const pwd = process.env.PWD
    let cwd
    try { cwd = process.cwd() } catch { return null }
    if (!pwd) return null
    try { return realpathSync(pwd) !== realpathSync(cwd) ? { pwd, cwd } : null } catch { return { pwd, cwd } }
  }

  function say(text) {
    if (headless) process.stderr.write(text.endsWith("\n") ? text : text + "\n")
    else client.tui?.showToast?.({ body: { message: text, variant: "warning" } })?.catch?.(() => {})
  }

  // The governor's answer to a message, or on_error's when none came (a governed call refused under closed).
  function decide(payload, governed) {
    const refused = !governed ? null : payload.hook === "tool.execute.before" ? { deny: gov.refusal }
      : payload.hook === "tool.execute.after" ? { content: [{ type: "text", text: `[${gov.refusal}]` }] } : null
    return gov.decide(payload, `${payload.hook} ${payload.tool ?? ""}`, payload.sessionID, say, refused)
  }

  function session(id) {
    let known = sessions.get(id)
    if (!known) {
      known = Promise.resolve(client.session.get({ path: { id } }))
        .then((r) => (r?.data ? lineage(r.data) : null), () => null)
      sessions.set(id, known)
      known.then((s) => { if (!s) sessions.delete(id) })
    }
    return known
  }

  function lineage(info) {
    return { parentID: info.parentID || "", agent: info.agent || "", created: info.time?.created ?? 0 }
  }

  async function message(hook, sessionID, fields) {
    const s = await session(sessionID)
    return { hook, sessionID, parentID: s ? s.parentID : null, agent: s ? s.agent : null, directory, worktree, ...fields }
  }

  function partID() { // OpenCode's part id: prt_ + 12 hex digits of time and count + 14 random characters
    const stamp = (BigInt(Date.now()) * 4096n + BigInt(++counter)).toString(16).padStart(12, "0").slice(-12)
    let rest = ""
    for (let i = 0; i < 14; i++) rest += ID_CHARS[Math.floor(Math.random() * ID_CHARS.length)]
    return `prt_${stamp}${rest}`
  }

  // The memory under another server name: `<server>_mem_<name>`, what the model's own `mcp` entry in
  // opencode.json would be called.
  const mcpOf = governorTools(CONFIG.tools, /^(.+?)_(mem_[a-z0-9_]+)$/)

  gov.describe() // learn the governor while OpenCode starts

  return {
    event: async ({ event }) => {
      const p = event.properties ?? {}
      if ((event.type === "session.created" || event.type === "session.updated") && p.info?.id) {
        sessions.set(p.info.id, Promise.resolve(lineage(p.info)))
      } else if (event.type === "message.part.updated" && p.part?.type === "tool" && p.part.state?.status === "error") {
        const part = p.part
        const callID = callKey(part.callID, false)
        if (!mcpOf(part.tool) || refused.has(callID) || reported.has(callID)) return
        reported.add(callID)
        decide(await message("tool.failed", part.sessionID, { tool: part.tool, callID, args: part.state.input ?? {},
          mcp: mcpOf(part.tool) }), false).catch(() => {})
      }
    },

    "chat.message": async (input, output) => {
      const sessionID = input.sessionID
      const s = await session(sessionID)
      if (s && !s.parentID && !opened.has(sessionID)) {
        opened.add(sessionID) // a session made before this process started is being resumed
        const source = s.created && s.created < started ? "resume" : "startup"
        governorHold(waiting, sessionID, (await decide(await message("session.start", sessionID, { source }), false)).context)
      }
      const parts = (output.parts ?? []).map((part) => ({ type: part.type, text: part.type === "text" ? part.text : undefined,
        synthetic: !!part.synthetic }))
      const runArgs = argsPrompt && !!s && !s.parentID
      if (runArgs) argsPrompt = false
      const answer = await decide(await message("chat.message", sessionID, { messageID: output.message?.id, parts,
        runArgs }), false)
      governorHold(waiting, sessionID, answer.context)
      const context = waiting.get(sessionID)
      if (context && output.message?.id) {
        waiting.delete(sessionID)
        output.parts.push({ id: partID(), messageID: output.message.id, sessionID, type: "text", text: context, synthetic: true })
      }
    },

    "tool.execute.before": async (input, output) => {
      const mcp = mcpOf(input.tool)
      if (!mcp && !CONFIG.forward.includes(input.tool)) return
      const callID = callKey(input.callID, true)
      const answer = await decide(await message("tool.execute.before", input.sessionID,
        { tool: input.tool, callID, args: output.args, mcp }), !!mcp)
      if (typeof answer.deny === "string") {
        refused.add(callID)
        throw new Error(answer.deny)
      }
      if (answer.args && typeof answer.args === "object" && output.args && typeof output.args === "object") {
        for (const key of Object.keys(output.args)) delete output.args[key] // the tool holds this object: change it in place
        Object.assign(output.args, answer.args)
      }
      governorHold(carried, callID, answer.context)
    },

    "tool.execute.after": async (input, output) => {
      const mcp = mcpOf(input.tool)
      if (!mcp) return
      const callID = callKey(input.callID, false)
      const answer = await decide(await message("tool.execute.after", input.sessionID,
        { tool: input.tool, callID, args: input.args, mcp, content: output.content }), true)
      if (Array.isArray(answer.content)) output.content = answer.content
      governorHold(carried, callID, answer.context)
      const context = carried.get(callID)
      carried.delete(callID)
      if (context && Array.isArray(output.content)) output.content = [...output.content, { type: "text", text: context }]
    },

    "experimental.session.compacting": async (input) => {
      governorHold(waiting, input.sessionID, (await decide(await message("session.compacting", input.sessionID, {}), false)).context)
    },

    dispose: async () => {
      if (claims.get(directory) === claim) claims.delete(directory)
    },
  }
}
