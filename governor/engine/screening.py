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

from governor.engine.fields import judged, text_fields

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
    from governor.engine import saves  # the detectors' patterns: compiled for a save only

    texts = list(text_fields(tool_input))
    found: list[str] = []
    limit = save["max_chars"]
    if limit["enforce"] != "off" and any(len(text) > limit["value"] for text in texts):
        found.append("oversize")
    for text in texts:
        for rule in saves.violations(text, save["speakers"]):
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
    when long), as written and as the shell would run it (`shell.read`: quotes removed,
    variables expanded, wrappers dropped, paths made absolute after `cd`, globs matched; `cwd`
    is where the call starts); or whose `writes` a file the command may write could be, or
    whose `runs` a command it runs could be, however undecided a part of it is. `{state}` in a
    pattern is the state directory `state`, in each spelling; `{ledger}` the Redis the ledger
    is on (`ledger`, Ledger.where()), by its address."""
    from governor.engine.shell import read

    readings: dict[str, Any] = {}

    def taken(values: Any) -> tuple[list[str], list[Any]]:
        texts, reads = [], []
        for text in text_fields(values):
            texts.append(judged(text))
            if text not in readings:
                readings[text] = read(text, cwd=cwd)
            reads.append(readings[text])
            texts.extend(readings[text].forms)
        return texts, reads

    every = taken(tool_input)
    places = _places(state, cwd)
    for route in routes:
        fields = route.get("fields")
        if not fields or not isinstance(tool_input, dict):
            texts, reads = every
        else:
            texts, reads = [], []
            for name in fields:
                more = taken(tool_input.get(name))
                texts += more[0]
                reads += more[1]
        pattern = re.compile(
            route["pattern"].replace("{state}", _spellings(state)).replace("{ledger}", _address(ledger))
        )
        if any(pattern.search(text) for text in texts):
            return route
        targeted = _targeted(route, reads, places)
        if targeted:
            return route if targeted == "decided" else {**route, "undecided": UNSURE}
    return None


UNSURE = (
    "(Part of this command is known only when it runs, and it could name one of those files or commands: "
    "write it out plainly.)"
)


def _targeted(route: dict[str, Any], reads: list[Any], places: dict[str, str]) -> str:
    """Could a file one of `reads` writes be one of the route's `writes` (or, removed or moved,
    hold one), or a command it runs be one of its `runs`? "decided" when it is one, "undecided"
    when a part decided only at run time could make it one, "" when neither."""
    from governor.engine.words import GLOB, UNDECIDED, could_be

    writes = [one for t in route.get("writes") or () for one in _placed(t, places)]
    runs = route.get("runs") or ()

    def found(text: str) -> str:
        return "undecided" if UNDECIDED in text or GLOB in text else "decided"

    for reading in reads:
        for path in reading.writes:
            if any(could_be(path, target) for target in writes):
                return found(path)
        for path in reading.removes:  # a folder above a target named: the target goes with it
            if any(not t.startswith("*") and could_be(path.rstrip("/") + "/" + UNDECIDED, t) for t in writes):
                return found(path)
        for command in reading.runs:
            if any(could_be(command, target) for target in runs):
                return found(command)
    return ""


def _places(state: str, cwd: str) -> dict[str, str]:
    """What a target's placeholders stand for: the state directory, the home folder, the
    governor's installed package and the environment (sys.prefix) its interpreter runs in."""
    import os
    import sys

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    prefix = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))  # a venv: even under -S
    prefix = prefix if os.path.isfile(os.path.join(prefix, "pyvenv.cfg")) else sys.prefix
    return {"{state}": os.path.abspath(state) if state else "/nonexistent-state-directory",
            "{home}": os.path.expanduser("~").rstrip("/") or "/nonexistent-home", "{package}": package,
            "{prefix}": prefix, "{cwd}": cwd or os.getcwd()}  # fmt: skip


def _placed(target: str, places: dict[str, str]) -> list[str]:
    """`target` with its placeholders filled, as spelled and through any symbolic link."""
    import os

    spelled = real = target
    for name, value in places.items():
        if name in target:
            spelled = spelled.replace(name, value)
            real = real.replace(name, os.path.realpath(value))
    return [spelled] if real == spelled else [spelled, real]


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
    seen = judged(text)
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
