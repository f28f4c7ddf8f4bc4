"""`memory-governor service`: the decision service a managed install's wall runs (runtime.service)."""

from __future__ import annotations

import click

from governor.policy.managed import CONFIG_DIR
from governor.runtime import service as decision_service


@click.group("service")
def group() -> None:
    """The decision service: every user's managed hooks ask it (install --scope managed, the wall by default)."""


@group.command("run")
@click.option("--config", default=CONFIG_DIR, show_default=True, help="The managed folder (its policy).")
@click.option("--state", default=decision_service.STATE, show_default=True,
              help="The service's own state: its ledger and notices (0700, the service user's).")  # fmt: skip
@click.option("--run-dir", default=decision_service.RUN, show_default=True,
              help="The socket's folder (root-owned, writable by the service's group alone).")  # fmt: skip
@click.option("--user", default=decision_service.USER, show_default=True,
              help="Started as root: the system user it becomes once its folders are made.")  # fmt: skip
def run(config: str, state: str, run_dir: str, user: str) -> int:
    """Serve every user's managed hooks until stopped (SIGTERM). A systemd unit, a container's init,
    or an administrator starts it as root (it then becomes --user) or as that user."""
    return decision_service.run(config, state, run_dir, user)
