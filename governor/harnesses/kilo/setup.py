"""Kilo Code CLI: where it loads plugins, installing OpenCode's plugin there, and checking it.

`install kilo` writes OpenCode's plugin (governor/harnesses/opencode/plugin.js, filled in for this
harness) as `memory-governor.js` into the project's `.kilo/plugin/` (`--scope user`: Kilo's own
config folder, `$XDG_CONFIG_HOME/kilo/plugin/`), which Kilo loads at start. Everything else is
OpenCode's install (governor.harnesses.opencode.setup.Host): the same file, marks, doctor and
uninstall, with Kilo's folders and config files (`kilo.json(c)`, and OpenCode's names, which it
reads too, in the project, `.kilo/`, `.kilocode/` and its config folder).

Cold path.
"""

from __future__ import annotations

from governor.harnesses.kilo import NAME, TITLE
from governor.harnesses.opencode.setup import Host

SCOPES = ("project", "user")
HOST = Host(NAME, TITLE, ".kilo", "kilo", ("kilo.json", "kilo.jsonc", "opencode.json", "opencode.jsonc", "config.json"),
            also=(".kilocode",))  # fmt: skip
plugin_path = HOST.plugin_path
governed_tools = HOST.setup.governed_tools
plan_install = HOST.setup.plan_install
project_files = HOST.setup.project_files
plan_uninstall = HOST.setup.plan_uninstall
doctor = HOST.doctor
