// An orchestrator on the TypeScript Claude Agent SDK, as a program of its own: one query() run.
// Run by tests/e2e/claude_agent_sdk_env.py as `node sdk_driver.mjs SPEC.json`; SPEC is sdk_driver.py's, plus
// `sdk` (the installed @anthropic-ai/claude-agent-sdk's sdk.mjs) and `module` (the memory-governor.mjs that
// `install claude-agent-sdk` wrote). Prints one JSON line: the session id and the result's subtype.
import { appendFileSync, readFileSync } from "node:fs"
import { pathToFileURL } from "node:url"

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"))
const { query } = await import(pathToFileURL(spec.sdk).href)

async function ownHook(input, toolUseID) {
  appendFileSync(spec.own_hook_log, JSON.stringify({ event: input.hook_event_name, tool: input.tool_name, tool_use_id: toolUseID }) + "\n")
  return {}
}

let options = {
  cwd: spec.cwd,
  env: spec.env,
  settingSources: spec.setting_sources ?? undefined,
  mcpServers: spec.mcp_servers,
  allowedTools: spec.allowed_tools,
  hooks: { PreToolUse: [{ matcher: "mcp__engram__.*", hooks: [ownHook] }] },
}
if (spec.govern) options = (await import(pathToFileURL(spec.module).href)).govern(options)
let out = { session_id: "", subtype: "" }
for await (const message of query({ prompt: spec.prompt, options })) {
  if (message.type === "result") out = { session_id: message.session_id, subtype: message.subtype }
}
console.log(JSON.stringify(out))
