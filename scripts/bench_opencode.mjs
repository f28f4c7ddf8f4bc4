// OpenCode's hook calls through memory-governor's installed plugin, timed inside this node process
// (scripts/bench.py, the harness section). OpenCode loads the plugin once and calls its hooks in its
// own process, so a call is a function call that reaches the governor over the warm server's socket
// (or, with no server, a hook process the plugin starts); what is timed is that call, from entry to
// its resolved promise. Each line on stdin names a case; each answer is "<ms> <who answered>".
//
//   bare    `python -c pass` started from here (node's spawn): the hook process's yardstick
//   floor   a round trip to a Unix socket that answers at once, framed as the plugin frames its
//           requests: the least a call to an out-of-process governor costs
//   prompt  chat.message, one session, a new message each time (a new turn)
//   before  tool.execute.before, a memory search with limit 10 (a new session every two calls)
//   after   tool.execute.after, the search's result
//
// Environment: PLUGIN (the installed plugin's file URL), PYTHON, FLOOR_SOCKET, SEARCH_FILE.
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import net from "node:net"
import readline from "node:readline"

const { MemoryGovernor } = await import(process.env.PLUGIN)
let answered = "nobody"
const write = process.stderr.write.bind(process.stderr)
process.stderr.write = (chunk, ...rest) => { // the plugin's trace line names who answered each call
  const seen = /answered by (.+)$/m.exec(String(chunk))
  if (seen) { answered = seen[1].trim(); return true }
  return write(chunk, ...rest)
}
const client = { session: { get: async ({ path }) => ({ data: { id: path.id, parentID: "", agent: "build",
  time: { created: Date.now() } } }) } }
const directory = process.cwd()
const hooks = await MemoryGovernor({ client, directory, worktree: directory })
const search = readFileSync(process.env.SEARCH_FILE, "utf8")
let n = 0

function bare() {
  return new Promise((resolve, reject) => {
    const child = spawn(process.env.PYTHON, ["-c", "pass"], { env: process.env, stdio: ["pipe", "pipe", "pipe"] })
    child.on("error", reject)
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`python exited ${code}`))))
    child.stdin.end()
  })
}

function floor() {
  return new Promise((resolve, reject) => {
    const env = Buffer.from(Object.entries(process.env).map(([k, v]) => `${k}=${v}`).join("\0"))
    const body = Buffer.from(JSON.stringify({ hook: "tool.execute.before", tool: "engram_mem_search", args: { query: "importer", limit: 10 } }))
    const conn = net.createConnection(process.env.FLOOR_SOCKET)
    const chunks = []
    conn.on("error", reject)
    conn.on("connect", () => conn.write(Buffer.concat([Buffer.from(`MG1 opencode x ${env.length} ${body.length}\n`), env, body])))
    conn.on("data", (c) => chunks.push(c))
    conn.on("close", () => (Buffer.concat(chunks).toString().startsWith("OK ") ? resolve() : reject(new Error("no answer"))))
  })
}

const cases = {
  bare,
  floor,
  prompt: () => hooks["chat.message"]({ sessionID: "ses_bench_prompt" }, {
    message: { id: `msg_bench${++n}` }, parts: [{ type: "text", text: "where did we leave off with the importer?" }] }),
  before: async () => {
    n++
    const output = { args: { query: "importer", limit: 10 } }
    await hooks["tool.execute.before"]({ tool: "engram_mem_search", sessionID: `ses_bench${n >> 1}`, callID: `call_b${n}` }, output)
  },
  after: () => {
    n++
    const output = { content: [{ type: "text", text: search }] }
    return hooks["tool.execute.after"]({ tool: "engram_mem_search", sessionID: `ses_bench${n >> 1}`, callID: `call_a${n}`,
      args: { query: `q${n}`, limit: 3 } }, output)
  },
}

for await (const line of readline.createInterface({ input: process.stdin })) {
  const name = line.trim()
  answered = "-"
  const started = process.hrtime.bigint()
  try {
    await cases[name]()
  } catch (err) {
    process.stdout.write(`error ${String(err?.message ?? err).replace(/\s+/g, " ")}\n`)
    continue
  }
  const ms = Number(process.hrtime.bigint() - started) / 1e6
  process.stdout.write(`${ms.toFixed(4)} ${answered.replace(/\s+/g, "_")}\n`)
}
