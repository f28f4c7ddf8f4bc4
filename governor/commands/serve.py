"""`memory-governor serve`: the warm server (normally started by the first hook, in the background)."""

from __future__ import annotations

import os
import signal
import time

import click

from governor.policy import compiled
from governor.runtime.client import WARM_PROJECT, server_command
from governor.runtime.server import EXPORTER_START_SECONDS, EXPORTER_STOP_SECONDS, running_pid
from governor.state import state_dir


@click.command("serve")
@click.option("--idle-exit", type=float, help="Exit after this many idle seconds (default: the policy's).")
@click.option("--background", is_flag=True, help="Started by a hook: exit quietly if a server already runs.")
@click.option("--stop", is_flag=True, help="Stop the server answering for this state directory.")
@click.option("--status", "show", is_flag=True, help="Say whether a server is running.")
def command(idle_exit: float | None, background: bool, stop: bool, show: bool) -> int:
    """Answer hooks from one warm process (the tokenizer loads once, not per hook)."""
    env = dict(os.environ)
    pid = running_pid(env)
    if show:
        click.echo(f"running (pid {pid})" if pid else "not running")
        return 0 if pid else 1
    if stop:
        if not pid or pid < 0:
            click.echo("not running")
            return 0
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + EXPORTER_START_SECONDS + EXPORTER_STOP_SECONDS + 2  # it sends what it read
        while running_pid(env) is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        click.echo(f"stopped (pid {pid})")
        return 0
    if idle_exit is None:
        policy, _ = compiled.load(env, os.getcwd(), state_dir(env))
        idle_exit = float(policy.data["runtime"]["idle_exit_seconds"])
    if pid and not background:
        click.echo(f"a server is already running (pid {pid})", err=True)
        return 1
    # As a hook starts it: hooks answer only to a server that runs exactly this command (runtime.client).
    command = [*server_command(), f"{max(float(idle_exit), 0.0):.3f}"]
    os.execve(command[0], command, {**env, WARM_PROJECT: os.getcwd()})
