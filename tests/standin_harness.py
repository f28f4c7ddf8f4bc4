"""A stand-in for a harness process, for tests about processes (governor.engine.nesting): it runs the
installed hook for each event of one session, as Claude Code runs hooks (`/bin/sh -c <command>`,
CLAUDE_ENV_FILE given to SessionStart), and starts other agents as its Bash tool would (`bash -c`,
the env file's exports sourced first), waiting for them.

    python tests/standin_harness.py PLAN.json

PLAN: {"session": id, "hook": [argv], "env": {...}, "out": path, "home": path, "steps": [...]}; a step
is an event ({"event": "SessionStart", ...fields}; `prompt_id` is carried on as Claude Code does) or
another agent ({"start": PLAN, "how": "plain" | "unset" | "setsid" | "setsid-scrubbed"}): `unset`
runs it with `env -u MEMORY_GOVERNOR_PARENT`; `setsid` detaches it (`setsid -f`: it is reparented
away from this process) and waits for it; `setsid-scrubbed` also empties its environment but for
PATH, HOME and the state directory (`env -i`). Each answer is appended to `out` as a JSON line
{"session", "event", "tool", "answer"}.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time


def main(path: str) -> None:
    with open(path, encoding="utf-8") as handle:
        plan = json.load(handle)
    env = {**os.environ, **plan.get("env", {})}
    command = shlex.join(plan["hook"])
    prompt_id: str | None = None
    env_file = os.path.join(plan["home"], ".claude", "session-env", plan["session"], "sessionstart-hook-0.sh")
    for index, step in enumerate(plan["steps"]):
        if "start" in step:
            start(step, env, env_file, f"{path}.{index}.json")
            continue
        payload = {"session_id": plan["session"], "transcript_path": "/dev/null", "cwd": plan.get("cwd", os.getcwd()),
                   "permission_mode": "default", "hook_event_name": step["event"], **step}  # fmt: skip
        payload.pop("event")
        if step["event"] == "UserPromptSubmit":
            prompt_id = payload.setdefault("prompt_id", f"{plan['session']}-p{index}")
        elif prompt_id and step["event"] != "SessionStart":
            payload.setdefault("prompt_id", prompt_id)
        hook_env = dict(env)
        if step["event"] == "SessionStart":
            os.makedirs(os.path.dirname(env_file), exist_ok=True)
            hook_env["CLAUDE_ENV_FILE"] = env_file
        proc = subprocess.run(["/bin/sh", "-c", command], input=json.dumps(payload).encode(), capture_output=True,
                              env=hook_env, timeout=60)  # fmt: skip
        text = proc.stdout.decode().strip()
        with open(plan["out"], "a", encoding="utf-8") as out:
            out.write(json.dumps({"session": plan["session"], "event": step["event"], "tool": step.get("tool_name"),
                                  "answer": json.loads(text) if text else None,
                                  "stderr": proc.stderr.decode()[-2000:]}) + "\n")  # fmt: skip


def start(step: dict, env: dict[str, str], env_file: str, path: str) -> None:
    """Another agent, started as the Bash tool starts commands: `bash -c` with the env file sourced."""
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(step["start"], handle)
    done = path + ".done"
    this = shlex.join([sys.executable, os.path.abspath(__file__), path]) + f"; touch {shlex.quote(done)}"
    how = step.get("how", "plain")
    if how == "unset":
        line = f"env -u MEMORY_GOVERNOR_PARENT sh -c {shlex.quote(this)}"
    elif how == "setsid":
        line = f"setsid -f sh -c {shlex.quote(this)}"
    elif how == "setsid-scrubbed":
        keep = " ".join(f"{k}={shlex.quote(env[k])}" for k in ("PATH", "HOME", "MEMORY_GOVERNOR_STATE_DIR",
                                                                 "MEMORY_GOVERNOR_WARM_SERVER") if k in env)  # fmt: skip
        line = f"setsid -f env -i {keep} sh -c {shlex.quote(this)}"
    else:
        line = this
    sourced = f". {shlex.quote(env_file)}; " if os.path.exists(env_file) else ""
    subprocess.run(["bash", "-c", sourced + line], env=env, timeout=120, check=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(done) and time.monotonic() < deadline:  # a detached agent: wait for it
        time.sleep(0.05)


if __name__ == "__main__":
    main(sys.argv[1])
