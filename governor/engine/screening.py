"""Looking inside what a call carries, before the ledger's write lock is taken.

What a save breaks (its every free-text field against the never-save rules, its size, its
topic key against the namespace contract), whether a dispatch prompt pastes a raw L3 body,
and the line fingerprints by which an earlier full fetch is recognised later. Each check is
linear in its input and bounded (a long text is judged by its ends), so a decision never
waits on a pathological input while holding the lock, and no one else waits at all.

Hot path: standard library only.
"""

from __future__ import annotations

import re

from governor.engine import saves

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_TOPIC = 200  # a topic key longer than this is outside any namespace
MAX_DIGESTS = 400
SCAN = 1 << 20  # characters of a dispatch prompt looked at for fingerprints (its first MiB)

# A pasted mem_get_observation body: its header line, then its Session: line, then a trailer line.
_OBS_HEADER = re.compile(r"^#\d{1,19} \[[^\]\n]{1,100}\] [^\n]", re.M)
_OBS_SESSION = re.compile(r"^Session: [^\n]", re.M)
_OBS_TRAILER = re.compile(r"^(?:Duplicates|Revisions|Created): ", re.M)


def save_findings(tool_input: dict[str, Any], save: dict[str, Any], topic: Any, namespaces: list[dict[str, str]]
                  ) -> list[str]:  # fmt: skip
    """The rules a save breaks, in the order they are reported: oversize, the never-save
    detectors (over every free-text field, the title too), topic_key."""
    fields = list(saves.text_fields(tool_input))
    found: list[str] = []
    limit = save["max_chars"]
    if limit["enforce"] != "off" and any(len(field) > limit["value"] for field in fields):
        found.append("oversize")
    for field in fields:
        for rule in saves.violations(field, save["speakers"]):
            if rule not in found:
                found.append(rule)
    checked = isinstance(topic, str) and topic and save["topic_keys"] != "off"
    if checked and (len(topic) > MAX_TOPIC or not any(re.fullmatch(n["pattern"], topic) for n in namespaces)):
        found.append("topic_key")
    return found


def route_taken(tool_input: dict[str, Any], routes: list[dict[str, Any]], state: str = "",
                ledger: str = "", cwd: str = "") -> dict[str, Any] | None:  # fmt: skip
    """The first of `routes` whose pattern the call's input text matches (its command, path,
    URL, pattern: every free-text argument, or the route's `fields`, each judged by its ends
    when long), as written and as the shell would run it (`shell.forms`: quotes removed,
    variables expanded, wrappers dropped, paths made absolute after `cd`, globs matched; `cwd`
    is where the call starts). `{state}` in a pattern is the state directory `state`, in each
    spelling; `{ledger}` the Redis the ledger is on (`ledger`, Ledger.where()), by its address."""
    from governor.engine.shell import forms

    def judged(values: Any) -> list[str]:
        out = []
        for text in saves.text_fields(values):
            out.append(saves.judged(text))
            out.extend(forms(text, cwd=cwd))
        return out

    every = judged(tool_input)
    for route in routes:
        fields = route.get("fields")
        texts = every if not fields or not isinstance(tool_input, dict) else [
            text for name in fields for text in judged(tool_input.get(name))]  # fmt: skip
        pattern = re.compile(
            route["pattern"].replace("{state}", _spellings(state)).replace("{ledger}", _address(ledger))
        )
        if any(pattern.search(text) for text in texts):
            return route
    return None


def _spellings(path: str) -> str:
    """A regex for `path` as a command may write it: as it is, or under ~ or $HOME."""
    import os

    path = os.path.abspath(path) if path else "/nonexistent-state-directory"
    forms = [re.escape(path)]
    home = os.path.expanduser("~")
    if home not in ("", "/") and path.startswith(home.rstrip("/") + "/"):
        rest = re.escape(path[len(home.rstrip("/")) :])
        forms += [f"~{rest}", rf"\$HOME{rest}", rf"\$\{{HOME\}}{rest}"]
    return "(?:" + "|".join(forms) + ")"


LOOPBACK = ("localhost", "127.0.0.1", "[::1]", "::1")


def _address(where: str) -> str:
    """A regex for the Redis a ledger URL names, as a command may write it: its host name, or, for
    a Redis on the loopback (whose name a command need not write), its port as a number of its
    own; one that never matches for a ledger that is a file."""
    scheme, _, rest = where.partition("://")
    host, _, port = rest.rpartition("@")[2].split("/", 1)[0].rpartition(":")
    if not scheme.startswith("redis") or not host or not port.isdigit():
        return "(?!)"
    if host in LOOPBACK:
        return rf"(?<![\w.]){port}(?![\w.])"
    return rf"(?<![\w.-]){re.escape(host)}(?![\w.-])"


def raw_observation(text: str) -> bool:
    """Does `text` hold a mem_get_observation body as the server formats it?"""
    seen = saves.judged(text)
    header = _OBS_HEADER.search(seen)
    session = _OBS_SESSION.search(seen, header.end()) if header else None
    return bool(session and _OBS_TRAILER.search(seen, session.end()))


def line_digests(text: str) -> list[str]:
    """Fingerprints of the substantial lines of a text (to recognise it later; not its content)."""
    from zlib import crc32

    out = []
    for line in text[:SCAN].splitlines():
        if len(line) < 40:
            continue
        line = " ".join(line.split())
        if len(line) >= 40:
            out.append(f"{crc32(line.encode('utf-8', 'surrogatepass')):08x}{len(line):04x}")
            if len(out) >= MAX_DIGESTS:
                break
    return out
