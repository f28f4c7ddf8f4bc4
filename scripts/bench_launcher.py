"""What the project's hook launcher costs: one hook through `.memory-governor/hook` against the
command a per-machine install writes, in the same run, from an installed wheel.

    python scripts/bench_launcher.py [--runs N]

Builds the wheel, installs it into a scratch virtual environment (its dependencies from this
one, by a .pth file), installs the hooks into a scratch project, and times a UserPromptSubmit
hook (warm server off: decided in the hook process) three ways, interleaved: the bare
interpreter (`python -I -S -c pass`), the direct command, and the launcher as Claude Code runs
it (`/bin/sh -c` on the settings' command). Prints medians and the load average.
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
    runs = parser.parse_args().runs
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
               "MEMORY_GOVERNOR_STATE_DIR": str(base / "state"), "MEMORY_GOVERNOR_WARM_SERVER": "off"}  # fmt: skip
        subprocess.run([str(venv / "bin" / "memory-governor"), "install", "claude-code"], cwd=project, env=env,
                       check=True, capture_output=True)  # fmt: skip
        settings = json.loads((project / ".claude" / "settings.json").read_text())
        launcher = settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
        entry = Path(site, "governor", "runtime", "entry.py")
        commands = {
            "bare interpreter": [str(python), "-I", "-S", "-c", "pass"],
            "direct command": [str(python), "-I", "-S", str(entry), "claude-code"],
            "launcher": ["/bin/sh", "-c", launcher],
        }
        payload = json.dumps(
            {
                "session_id": "bench",
                "transcript_path": "/t.jsonl",
                "cwd": str(project),
                "hook_event_name": "UserPromptSubmit",
                "prompt": "fix the typo in the README",
            }
        ).encode()
        times: dict[str, list[float]] = {name: [] for name in commands}
        load = os.getloadavg()[0]
        for run in range(runs + 3):
            for name, command in commands.items():
                started = time.perf_counter()
                subprocess.run(command, input=payload, env=env, cwd=project, capture_output=True, check=True)
                if run >= 3:  # the first runs compile and cache the policy
                    times[name].append((time.perf_counter() - started) * 1000)
        for name, values in times.items():
            print(f"{name:18} median {statistics.median(values):6.1f} ms  ({runs} runs)")
        print(f"launcher - direct: {statistics.median(times['launcher']) - statistics.median(times['direct command']):+.1f} ms; "
              f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
