// memory-governor: the shared client (governor/harnesses/client.js), written into this file by the install.
//
// How a JavaScript host (an OpenCode plugin, a Pi extension, the Claude Agent SDK module) reaches the governor:
// each event is one JSON message sent to the warm server's Unix socket ("MG1 <harness> <fingerprint>
// <env-bytes> <body-bytes>\n" env body -> "OK <stdout-bytes> <stderr-bytes>\n" stdout stderr, or
// "RETRY <reason>"), or, when there is no server, to the hook process on stdin. When neither answers, the
// policy's on_error decides (its compiled copy, else what the governor last described, else closed), and the
// user is told once. Node's built-ins only: a file with dependencies makes some hosts install packages.
import { spawn as mgSpawn } from "node:child_process"
import { appendFileSync as mgAppend, readFileSync as mgRead } from "node:fs"
import mgNet from "node:net"

const MG_MAX_SOCKET_PATH = 107 // sun_path; a longer path is reached through the hook process instead
const MG_UNREACHABLE = "memory-governor could not check this memory call (the governor could not be reached), " +
  "and policy on_error=closed refuses memory calls until it can. Continue without memory; the user has been told."

// config: {harness, socketTimeoutMs, processTimeoutMs}; command: the hook command (argv); env: the hook's
// environment; cwd: where the hook runs (undefined: this process's); project: what `--describe` is asked about;
// relayStderr: the governor's stderr is written to this process's.
function governorClient({ config, command, env, cwd, project, relayStderr = false }) {
  let described = null // Promise of what `entry.py --describe` said, or of null
  const told = new Set() // keys (sessions) already told that no governor answers

  // A child process, bounded in time; resolves {out, err}, or null if it could not run or failed.
  function run(argv, input, timeoutMs) {
    return new Promise((resolve) => {
      let done = false
      const finish = (value) => { if (!done) { done = true; clearTimeout(timer); resolve(value) } }
      let child
      try {
        child = mgSpawn(argv[0], argv.slice(1), { env, cwd, stdio: ["pipe", "pipe", "pipe"] })
      } catch { return finish(null) }
      const out = [], err = []
      const timer = setTimeout(() => { child.kill("SIGKILL"); finish(null) }, timeoutMs)
      child.stdout.on("data", (c) => out.push(c))
      child.stderr.on("data", (c) => err.push(c))
      child.on("error", () => finish(null))
      child.on("close", (code) => finish(code === 0 ? { out: Buffer.concat(out).toString(), err: Buffer.concat(err).toString() } : null))
      child.stdin.on("error", () => {})
      child.stdin.end(input ?? "")
    })
  }

  function describe() {
    if (!described) {
      described = run([...command.slice(0, -1), "--describe", project], "", config.processTimeoutMs)
        .then((r) => { try { return JSON.parse(r.out) } catch { return null } })
      described.then((d) => { if (!d) described = null }) // not learnt: ask again next time
    }
    return described
  }

  // The warm server's answer: {out, err}, {retry: reason}, or null (no server there).
  function viaSocket(info, body) {
    if (env.MEMORY_GOVERNOR_WARM_SERVER === "off" || !info.socket || Buffer.byteLength(info.socket) > MG_MAX_SOCKET_PATH) {
      return Promise.resolve(null)
    }
    return new Promise((resolve) => {
      const chunks = []
      let done = false
      const finish = (value) => { if (!done) { done = true; conn.destroy(); resolve(value) } }
      const conn = mgNet.createConnection(info.socket)
      conn.setTimeout(config.socketTimeoutMs, () => finish(null))
      conn.on("error", () => finish(null))
      conn.on("connect", () => {
        const vars = Buffer.from(Object.entries(env).filter(([k, v]) => v !== undefined && !`${k}${v}`.includes("\0"))
          .map(([k, v]) => `${k}=${v}`).join("\0"))
        // Not ended: the first line's lengths frame the request (Bun closes both sides of an ended socket).
        conn.write(Buffer.concat([Buffer.from(`MG1 ${config.harness} ${info.fingerprint} ${vars.length} ${body.length}\n`), vars, body]))
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

  // The governor's answer to one message: [which, {out, err}] from the warm server or a hook process;
  // [null, null] when neither answered.
  async function ask(payload) {
    const body = Buffer.from(JSON.stringify(payload))
    const info = await describe()
    if (info) {
      const reply = await viaSocket(info, body)
      if (reply && !reply.retry) return ["the warm server", reply]
      if (reply && reply.retry === "code-changed") described = null // the governor was upgraded: learn it again
    }
    const reply = await run(command, body, config.processTimeoutMs)
    return reply ? ["a hook process", reply] : [null, null]
  }

  // The answer object to one message, or null when no governor answered or its answer is no JSON object.
  // `label` names the message in the trace (MEMORY_GOVERNOR_TRACE set: one line on stderr per message).
  async function answer(payload, label) {
    const [which, reply] = await ask(payload)
    let out = null
    try { out = reply && (reply.out.trim() ? JSON.parse(reply.out) : {}) } catch { out = null }
    if (out !== null && typeof out !== "object") out = null
    if (env.MEMORY_GOVERNOR_TRACE) process.stderr.write(`memory-governor: ${label} answered by ${out ? which : "nobody"}\n`)
    if (reply?.err && relayStderr) process.stderr.write(reply.err)
    return out
  }

  // What the policy says when no governor answers ("open" or "closed"), and the message for the user; `say`
  // gets it once per `key` (also appended to the state directory's errors.log).
  async function unreachable(key, say) {
    const info = await (described ?? null)
    let mode = info?.on_error === "open" ? "open" : "closed"
    try { mode = JSON.parse(mgRead(info.policy, "utf8")).policy.on_error === "open" ? "open" : "closed" } catch {}
    const message = `memory-governor could not be reached (neither its warm server nor its hook process ` +
      `${command.slice(0, -1).join(" ")} answered); memory calls are ` +
      (mode === "closed" ? "denied, their results withheld (on_error: closed)." : "let through (on_error: open).")
    if (!told.has(key)) {
      told.add(key)
      say(message)
      if (info?.state) {
        try { mgAppend(`${info.state}/errors.log`, `${new Date().toISOString().slice(0, 19)}Z ${message}\n`) } catch {}
      }
    }
    return mode
  }

  // The governor's answer to a message (its systemMessage said to the user), or, when none came, on_error's:
  // `refused` (the host's refusal of this message, null where it refuses nothing) under on_error closed,
  // else no objection.
  async function decide(payload, label, key, say, refused) {
    const out = await answer(payload, label)
    if (!out) return (await unreachable(key, say)) === "closed" && refused ? refused : {}
    if (typeof out.systemMessage === "string" && out.systemMessage) say(out.systemMessage)
    return out
  }

  return { describe, ask, answer, decide, unreachable, refusal: MG_UNREACHABLE }
}

// The id the governor knows a call by: the host's (the provider's) id, made unique to this process and,
// should the provider give a later call the same id, to that call, so it cannot pass as a repeat.
// `key(id, true)` for a call about to run (a new call), `key(id, false)` for what follows it.
function governorCallKeys() {
  const stamp = Date.now().toString(36)
  const occurrences = new Map() // the host's id -> how many calls came with it (a provider may reuse ids)
  const live = new Map() // the host's id -> the id the governor knows its latest call by
  return (id, fresh) => {
    if (fresh) {
      const n = (occurrences.get(id) ?? 0) + 1
      occurrences.set(id, n)
      live.set(id, `${id}@${stamp}${n > 1 ? `.${n}` : ""}`)
    }
    return live.get(id) ?? `${id}@${stamp}`
  }
}

// Keep `text` for `key` in `map`, after what is held there already (context waiting for where it can go).
function governorHold(map, key, text) {
  if (text) map.set(key, map.has(key) ? `${map.get(key)}\n${text}` : text)
}

// The memory tool a host's tool name stands for, {server, tool}: one the policy maps (`tools`: name ->
// [server, tool], written by the install), or the memory under another server name (`other`: a pattern
// whose groups are the server and the tool): the governor judges it by what it is, as it judges Claude
// Code's `mcp__<any>__mem_*`. Null for any other tool.
function governorTools(tools, other) {
  return (name) => {
    const entry = tools[name]
    if (entry) return { server: entry[0], tool: entry[1] }
    const found = typeof name === "string" ? other.exec(name) : null
    return found ? { server: found[1], tool: found[2] } : null
  }
}
