"""A probe hook for test_harness_facts.py: logs what Claude Code sends, answers what a test chose.

Appends {"start", "end", "payload"} per call to $PROBE_LOG. $PROBE_RULES (JSON) maps
"<event>:<tool_name>" or "<event>" to {"sleep": seconds, "out": <answer object>}.
"""

import json
import os
import sys
import time

start = time.time()
payload = json.loads(sys.stdin.read())
rules_path = os.environ.get("PROBE_RULES")
rules = {}
if rules_path and os.path.exists(rules_path):
    with open(rules_path, encoding="utf-8") as handle:
        rules = json.load(handle)
event = payload.get("hook_event_name", "")
rule = rules.get(f"{event}:{payload.get('tool_name', '')}") or rules.get(event) or {}
if rule.get("sleep"):
    time.sleep(rule["sleep"])
with open(os.environ["PROBE_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps({"start": start, "end": time.time(), "payload": payload}) + "\n")
if rule.get("out") is not None:
    sys.stdout.write(json.dumps(rule["out"]) + "\n")
