"""The JavaScript files an install writes into a host that loads code rather than running hook
commands (an OpenCode plugin, a Pi extension, the Claude Agent SDK module): one template per
harness, filled in here, once.

A template starts with its MARK (the line that says the file is memory-governor's), holds one
CONFIG line (`const CONFIG = {} // memory-governor: the install writes this line`, which the install
fills with the harness's settings as JSON) and one CLIENT line, which the install replaces with
governor/harnesses/client.js (how a JavaScript host reaches the governor: the warm server's
socket, the hook process, on_error when neither answers). A file of that name that is not
memory-governor's is never overwritten; a second install writes the same text.

Cold path.
"""

from __future__ import annotations

import json
import os
from typing import Any

from governor.harnesses.settings import Change, SettingsError, read_text

CONFIG_LINE = "const CONFIG = {} // memory-governor: the install writes this line"
CLIENT_LINE = "// memory-governor: the shared client (client.js) is written here by the install"
CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "client.js")
SOCKET_TIMEOUT_MS = 5_000  # the thin client's own (governor.runtime.client.TIMEOUT)
PROCESS_TIMEOUT_MS = 10_000  # what the other installers give a hook process


class Script:
    """One harness's template (the file `name` beside the module `beside`) and the MARK it starts with."""

    def __init__(self, beside: str, name: str, mark: str) -> None:
        self.template, self.mark = os.path.join(os.path.dirname(os.path.abspath(beside)), name), mark

    def text(self, config: dict[str, Any]) -> str:
        """The file an install writes: the template with its CONFIG line filled and the client in."""
        with open(self.template, encoding="utf-8") as handle:
            template = handle.read()
        assert template.startswith(self.mark) and template.count(CONFIG_LINE) == 1, f"{self.template} lost its marks"
        assert template.count(CLIENT_LINE) == 1, f"{self.template} has no place for the client"
        with open(CLIENT, encoding="utf-8") as handle:
            client = handle.read().rstrip("\n")
        filled = json.dumps(config, ensure_ascii=False, sort_keys=True)
        return template.replace(CONFIG_LINE, CONFIG_LINE.replace("{}", filled, 1)).replace(CLIENT_LINE, client)

    def ours(self, text: str | None) -> bool:
        return text is not None and text.startswith(self.mark)

    def config(self, text: str) -> dict[str, Any] | None:
        """The CONFIG an installed file carries, or None if it is not one of ours or is damaged."""
        if not self.ours(text):
            return None
        head, tail = CONFIG_LINE.split("{}")
        for line in text.splitlines():
            if line.startswith(head) and line.endswith(tail):
                try:
                    value = json.loads(line[len(head) : -len(tail)])
                except ValueError:
                    return None
                return value if isinstance(value, dict) else None
        return None

    def install(self, path: str, config: dict[str, Any], done: str) -> Change:
        """The change that writes the file at `path` (SettingsError where another file of that name is)."""
        before = read_text(path)
        if before is not None and not self.ours(before):
            raise SettingsError(f"{path}: a file of that name that is not memory-governor's is there; move it aside "
                                "(nothing was changed)")  # fmt: skip
        return Change(path, before, self.text(config), done, "already installed", str)

    def uninstall(self, path: str, done: str) -> Change:
        """The change that removes the file at `path` if it is ours (another file there is kept)."""
        before = read_text(path)
        return Change(path, before, None if self.ours(before) else before, done, "not installed", str)


def timeouts() -> dict[str, int]:
    """The waits every script's CONFIG carries."""
    return {"socketTimeoutMs": SOCKET_TIMEOUT_MS, "processTimeoutMs": PROCESS_TIMEOUT_MS}
