"""Looking inside what a call carries, before the ledger's write lock is taken.

What a save breaks (its every free-text field against the never-save rules, its size, its
topic key against the namespace contract), whether a dispatch prompt pastes a raw L3 body,
and the line fingerprints by which an earlier full fetch is recognised later. (What a shell
command or file tool does is judged in governor.engine.routes.) Each check is
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
