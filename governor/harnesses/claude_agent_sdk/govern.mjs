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
import path from "node:path"
// memory-governor: the shared client (client.js) is written here by the install

const CONFIG = {} // memory-governor: the install writes this line

const EVENTS = ["PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit", "SessionStart", "PreCompact",
  "SubagentStart", "SubagentStop", "Stop"]
const OURS = Symbol.for("memory-governor.claude-agent-sdk")

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
  return { ...options, hooks, env: { ...(options.env ?? process.env), ...marker() } }
}

// The governor's marker for the binary's environment, which its tools (and any agent they start)
// inherit: this program's process, `<boot id>:<pid>:<start time>` as governor/runtime/lineage.py names
// processes, so a session started under it is charged to this program's (governor/engine/nesting.py).
function marker() {
  try {
    const boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim().replaceAll("-", "").slice(0, 8)
    const stat = readFileSync(`/proc/${process.pid}/stat`, "utf8")
    const start = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]
    return boot && /^\d+$/.test(start ?? "") ? { MEMORY_GOVERNOR_PARENT: `${boot}:${process.pid}:${start}` } : {}
  } catch {
    return {} // no /proc (another OS): no marker, as no lineage is read there either
  }
}

function governor(env, cwd) {
  const gov = governorClient({ config: CONFIG, command: CONFIG.command, env, cwd, project: cwd, relayStderr: true })

  async function memoryGovernor(input) {
    const event = input?.hook_event_name
    const answer = await gov.answer(input, `${event} ${input?.tool_name ?? ""}`)
    if (answer) return answer
    const governed = CONFIG.governed.includes(input?.tool_name) && (event === "PreToolUse" || event === "PostToolUse")
    const say = (message) => process.stderr.write(message + "\n")
    if ((await gov.unreachable("", say)) !== "closed" || !governed) return {}
    if (event === "PreToolUse") {
      return { hookSpecificOutput: { hookEventName: event, permissionDecision: "deny", permissionDecisionReason: gov.refusal } }
    }
    return { hookSpecificOutput: { hookEventName: event, updatedMCPToolOutput: `[${gov.refusal}]` } }
  }
  memoryGovernor[OURS] = true
  return memoryGovernor
}
