"""What the project's hook command costs: one hook through the command a project-scope install
writes (which finds the governor itself and runs the committed launcher only without one) against
the command a per-machine install writes, in the same run, from an installed wheel.

    python scripts/bench_launcher.py [--runs N] [--warm]

Builds the wheel, installs it into a scratch virtual environment (its dependencies from this
one, by a .pth file), installs the hooks into a scratch project, and times a PreToolUse hook for
a memory tool three ways, interleaved, each as Claude Code runs a hook command (`/bin/sh -c`):
the bare interpreter (`python -I -S -c pass`), the direct command, and the project's command.
`--warm`: a warm server answers (the default install); else the hook decides in its own process.
Prints medians, the project command's cost against the direct one, and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warm", action="store_true", help="a warm server answers the hooks")
    args = parser.parse_args()
    runs = args.runs
    with tempfile.TemporaryDirectory(prefix="memory-governor-bench-launcher-") as scratch:
        base = Path(scratch)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "-w", str(base / "wheel"), str(ROOT)], check=True, capture_output=True)  # fmt: skip
        venv = base / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        python = venv / "bin" / "python"
        wheel = next((base / "wheel").glob("*.whl"))
        subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                        "--no-index", str(wheel)], check=True, capture_output=True)  # fmt: skip
        site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
        Path(site, "bench-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        project = base / "project"
        project.mkdir()
        env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(base), "CLAUDE_PROJECT_DIR": str(project),
               "MEMORY_GOVERNOR_STATE_DIR": str(base / "state"),
               "MEMORY_GOVERNOR_WARM_SERVER": "auto" if args.warm else "off"}  # fmt: skip
        subprocess.run([str(venv / "bin" / "memory-governor"), "install", "claude-code"], cwd=project, env=env,
                       check=True, capture_output=True)  # fmt: skip
        settings = json.loads((project / ".claude" / "settings.json").read_text())
        launcher = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        entry = Path(site, "governor", "runtime", "entry.py")
        commands = {
            "bare interpreter": ["/bin/sh", "-c", f"{python} -I -S -c pass"],
            "direct command": ["/bin/sh", "-c", f"{python} -I -S {entry} claude-code"],
            "launcher": ["/bin/sh", "-c", launcher],
        }
        call = {"session_id": "bench", "transcript_path": "/t.jsonl", "cwd": str(project), "tool_input": {},
                "hook_event_name": "PreToolUse", "tool_name": "mcp__engram__mem_context", "tool_use_id": "t"}  # fmt: skip
        payload = json.dumps(call).encode()  # refused each time (no trigger armed): the same decision every run
        times: dict[str, list[float]] = {name: [] for name in commands}
        load = os.getloadavg()[0]
        for run in range(runs + 3):
            for name, command in commands.items():
                started = time.perf_counter()
                subprocess.run(command, input=payload, env=env, cwd=project, capture_output=True, check=True)
                if run >= 3:  # the first runs compile and cache the policy
                    times[name].append((time.perf_counter() - started) * 1000)
        for name, values in times.items():
            print(f"{name:18} median {statistics.median(values):6.2f} ms  ({runs} runs)")
        launched, direct = statistics.median(times["launcher"]), statistics.median(times["direct command"])
        print(f"launcher - direct: {launched - direct:+.2f} ms ({launched / direct:.3f}x); "
              f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}")  # fmt: skip
        if args.warm:
            subprocess.run([str(venv / "bin" / "memory-governor"), "serve", "--stop"], env=env, capture_output=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
