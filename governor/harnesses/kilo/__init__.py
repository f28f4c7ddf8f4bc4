"""Kilo Code CLI: OpenCode's plugin messages, from Kilo's process (the hot path).

Kilo Code's CLI (`@kilocode/cli`, the `kilo` binary) is built on OpenCode and loads OpenCode's
plugins with OpenCode's hooks and arguments. `install kilo` writes OpenCode's plugin
(governor/harnesses/opencode/plugin.js) into Kilo's folders, naming this harness; it forwards the
same messages, which OpenCode's adapter reads and answers unchanged. What is Kilo's own is where
it looks for plugins, config and agents (kilo/setup.py), and this module's NAME.

Harness facts this relies on (seen on the real binary, 7.7.7; see docs/kilo.md):
- Plugins load from the project's `.kilo/plugin/` and `$XDG_CONFIG_HOME/kilo/plugin/`, not
  OpenCode's folders; the project folder is taken from $PWD, as OpenCode does.
- `tool.execute.before` / `.after`, `chat.message` and the `event` hook fire as in OpenCode
  1.18.33: a throw refuses a call (the model gets the message), `output.args` changed in place
  reaches the MCP server, `output.content` replaced is what the model gets. MCP tools are named
  `<server>_<tool>`; a subagent is a child session with `parentID`.
"""

from __future__ import annotations

from governor.harnesses.opencode import ANSWERS as ANSWERS
from governor.harnesses.opencode import CAPABILITIES as _OPENCODE
from governor.harnesses.opencode import EVENTS as EVENTS
from governor.harnesses.opencode import PLUGIN_FILE as PLUGIN_FILE
from governor.harnesses.opencode import BadPayload as BadPayload  # the adapters' one error
from governor.harnesses.opencode import event_name as event_name
from governor.harnesses.opencode import parse as parse
from governor.harnesses.opencode import refusal as refusal
from governor.harnesses.opencode import render as render
from governor.harnesses.opencode import sniff_event as sniff_event
from governor.harnesses.opencode import tool_name as tool_name

NAME = "kilo"
TITLE = "Kilo Code CLI"
# Subagent definitions, under the project and under HOME (`{name}` is the agent's name).
AGENT_DIRS = (".kilo/agent/{name}.md", ".kilo/agents/{name}.md", ".config/kilo/agent/{name}.md",
              ".config/kilo/agents/{name}.md")  # fmt: skip
# Its row in docs/harnesses.md: OpenCode's plugin, run by Kilo.
CAPABILITIES = {**_OPENCODE, "deny": "yes: OpenCode's plugin throws; the model gets the error's message as the result"}
