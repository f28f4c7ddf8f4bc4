"""A probe hook for test_copilot_facts.py: logs what Copilot sends, answers what a test chose.

Run as `python probe_copilot.py <label>` (the label names the hook entry, e.g. `G:preToolUse`).
Appends {"label", "start", "end", "payload", "env"} per call to $PROBE_LOG. $PROBE_RULES (JSON)
maps "<label>:<query>" or "<label>" to {"sleep": s, "out": <answer>, "raw": <text>, "exit": n}.
"""

import json
import os
import sys
import time

start = time.time()
raw = sys.stdin.read()
payload = json.loads(raw) if raw.strip() else {}
label = sys.argv[1]
rules = {}
if os.path.exists(os.environ.get("PROBE_RULES", "")):
    with open(os.environ["PROBE_RULES"], encoding="utf-8") as handle:
        rules = json.load(handle)
args = payload.get("toolArgs") or payload.get("tool_input") or {}
query = args.get("query") if isinstance(args, dict) else None
rule = rules.get(f"{label}:{query}") or rules.get(label) or {}
if rule.get("sleep"):
    time.sleep(rule["sleep"])
seen = {k: v for k, v in os.environ.items() if k.startswith(("COPILOT_CLI", "COPILOT_HOOK_DIR", "COPILOT_PROJECT_DIR"))}
with open(os.environ["PROBE_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps({"label": label, "start": start, "end": time.time(), "payload": payload, "env": seen}) + "\n")
if rule.get("raw") is not None:
    sys.stdout.write(rule["raw"])
if rule.get("out") is not None:
    sys.stdout.write(json.dumps(rule["out"]) + "\n")
sys.exit(rule.get("exit", 0))
