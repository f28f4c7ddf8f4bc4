// memory-governor for the Claude Agent SDK (TypeScript): govern(options) adds hook callbacks that decide each event.
// Written by `memory-governor install claude-agent-sdk --project DIR` (DIR/memory-governor.mjs), which fills in CONFIG.
//
//   import { query } from "@anthropic-ai/claude-agent-sdk"
//   import { govern } from "./memory-governor.mjs"
//   for await (const m of query({ prompt, options: govern({ cwd: repo, settingSources: [], mcpServers }) })) ...
//
// Each callback forwards the event's input (Claude Code's hook payload) to the warm server's Unix socket
// ("MG1 <harness> <fingerprint> <env-bytes> <body-bytes>\n" env body -> "OK <stdout-bytes> <stderr-bytes>\n"
// stdout stderr, or "RETRY <reason>"), else to the hook process on stdin, and returns its answer: the object
// a Claude Code hook prints ({} for no objection). A governed memory call never goes through silently: when
// no governor answers, the policy's on_error decides here (closed when the policy could never be read).
// The caller's own hooks are kept. The project is options.cwd. Node's built-ins only.
import { spawn } from "node:child_process"
import { appendFileSync, readFileSync } from "node:fs"
import net from "node:net"
import path from "node:path"

const CONFIG = {} // memory-governor: the install writes this line

const EVENTS = ["PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit", "SessionStart", "PreCompact",
  "SubagentStart", "SubagentStop", "Stop"]
const OURS = Symbol.for("memory-governor.claude-agent-sdk")
const MAX_SOCKET_PATH = 107 // sun_path; a longer path is reached through the hook process instead
const UNREACHABLE = "memory-governor could not check this memory call (the governor could not be reached), and " +
  "policy on_error=closed refuses memory calls until it can. Continue without memory; the user has been told."

export function govern(options = {}) {
  const cwd = path.resolve(options.cwd ?? process.cwd())
  // The binary's environment (the SDK passes options.env, else this process's): the same state directory.
  const env = { ...(options.env ?? process.env), CLAUDE_PROJECT_DIR: cwd }
  const callback = governor(env, cwd)
  const hooks = {}
  for (const [event, matchers] of Object.entries(options.hooks ?? {})) hooks[event] = [...matchers]
  for (const event of EVENTS) {
    const matchers = (hooks[event] ??= [])
    if (!matchers.some((m) => (m.hooks ?? []).some((h) => h[OURS]))) matchers.push({ hooks: [callback] })
  }
  return { ...options, hooks }
}

function governor(env, cwd) {
  let described = null // Promise of what `entry.py --describe` said, or of null
  let told = false

  function describe() {
    if (!described) {
      described = run([...CONFIG.command.slice(0, -1), "--describe", cwd], "", CONFIG.processTimeoutMs)
        .then((r) => { try { return JSON.parse(r.out) } catch { return null } })
      described.then((d) => { if (!d) described = null })
    }
    return described
  }

  function run(argv, input, timeoutMs) {
    return new Promise((resolve) => {
      let done = false
      const finish = (value) => { if (!done) { done = true; clearTimeout(timer); resolve(value) } }
      let child
      try {
        child = spawn(argv[0], argv.slice(1), { env, cwd, stdio: ["pipe", "pipe", "pipe"] })
      } catch { return finish(null) }
      const out = [], err = []
      const timer = setTimeout(() => { child.kill("SIGKILL"); finish(null) }, timeoutMs)
      child.stdout.on("data", (c) => out.push(c))
      child.stderr.on("data", (c) => err.push(c))
      child.on("error", () => finish(null))
      child.on("close", (code) => finish(code === 0 ? { out: Buffer.concat(out).toString(), err: Buffer.concat(err).toString() } : null))
      child.stdin.on("error", () => {})
      child.stdin.end(input)
    })
  }

  function viaSocket(info, body) {
    if (env.MEMORY_GOVERNOR_WARM_SERVER === "off" || !info.socket || Buffer.byteLength(info.socket) > MAX_SOCKET_PATH) {
      return Promise.resolve(null)
    }
    return new Promise((resolve) => {
      const chunks = []
      let done = false
      const finish = (value) => { if (!done) { done = true; conn.destroy(); resolve(value) } }
      const conn = net.createConnection(info.socket)
      conn.setTimeout(CONFIG.socketTimeoutMs, () => finish(null))
      conn.on("error", () => finish(null))
      conn.on("connect", () => {
        const vars = Buffer.from(Object.entries(env).filter(([k, v]) => v !== undefined && !`${k}${v}`.includes("\0"))
          .map(([k, v]) => `${k}=${v}`).join("\0"))
        conn.write(Buffer.concat([Buffer.from(`MG1 ${CONFIG.harness} ${info.fingerprint} ${vars.length} ${body.length}\n`), vars, body]))
      })
      conn.on("data", (c) => chunks.push(c))
      const replied = () => {
        const reply = Buffer.concat(chunks)
        const nl = reply.indexOf(10)
        const head = reply.subarray(0, nl < 0 ? reply.length : nl).toString().split(" ")
        if (head[0] === "RETRY") return finish({ retry: head[1] || "" })
        const rest = reply.subarray(nl + 1)
        const outLen = Number(head[1]), errLen = Number(head[2])
        if (head[0] !== "OK" || head.length !== 3 || rest.length !== outLen + errLen) return finish(null)
        finish({ out: rest.subarray(0, outLen).toString(), err: rest.subarray(outLen).toString() })
      }
      conn.on("end", replied)
      conn.on("close", replied)
    })
  }

  async function ask(body) {
    const info = await describe()
    if (info) {
      const reply = await viaSocket(info, body)
      if (reply && !reply.retry) return reply
      if (reply && reply.retry === "code-changed") described = null // the governor was upgraded: learn it again
    }
    return run(CONFIG.command, body, CONFIG.processTimeoutMs)
  }

  async function unreachable(input) {
    const info = await (described ?? null)
    let mode = info?.on_error === "open" ? "open" : "closed"
    try { mode = JSON.parse(readFileSync(info.policy, "utf8")).policy.on_error === "open" ? "open" : "closed" } catch {}
    const event = input?.hook_event_name
    const governed = CONFIG.governed.includes(input?.tool_name) && (event === "PreToolUse" || event === "PostToolUse")
    const message = `memory-governor could not be reached (neither its warm server nor its hook process ` +
      `${CONFIG.command[0]} answered); memory calls are ` +
      (mode === "closed" ? "denied, their results withheld (on_error: closed)." : "let through (on_error: open).")
    if (!told) {
      told = true
      process.stderr.write(message + "\n")
      if (info?.state) {
        try { appendFileSync(`${info.state}/errors.log`, `${new Date().toISOString().slice(0, 19)}Z ${message}\n`) } catch {}
      }
    }
    if (mode !== "closed" || !governed) return {}
    if (event === "PreToolUse") {
      return { hookSpecificOutput: { hookEventName: event, permissionDecision: "deny", permissionDecisionReason: UNREACHABLE } }
    }
    return { hookSpecificOutput: { hookEventName: event, updatedMCPToolOutput: `[${UNREACHABLE}]` } }
  }

  async function memoryGovernor(input) {
    const reply = await ask(Buffer.from(JSON.stringify(input)))
    let answer = null
    if (reply) {
      try { answer = reply.out.trim() ? JSON.parse(reply.out) : {} } catch { answer = null }
      if (reply.err) process.stderr.write(reply.err)
    }
    if (!answer || typeof answer !== "object") return unreachable(input)
    return answer
  }
  memoryGovernor[OURS] = true
  return memoryGovernor
}
