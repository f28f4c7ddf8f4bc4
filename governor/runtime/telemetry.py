"""Team telemetry's entry: is it on, and start sending from this process.

Opt-in: MEMORY_GOVERNOR_ENABLE_TELEMETRY=1 plus the standard OTEL_* variables (docs/telemetry.md).
Only long-lived processes send (the warm server, the MCP proxy, an SDK integration): each calls
`start` once; a hook never imports this module or the OpenTelemetry SDK. What is sent, and how
an audit row maps onto it: governor.runtime.signals; the SDK's side: governor.runtime.otel.

Standard library only; `start` imports the SDK.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import TextIO

    from governor.runtime.otel import Exporter

ENABLE = "MEMORY_GOVERNOR_ENABLE_TELEMETRY"


def enabled(env: Mapping[str, str]) -> bool:
    return env.get(ENABLE, "").strip().lower() in ("1", "true", "yes", "on")


def start(env: Mapping[str, str], state: str | None = None, console: TextIO | None = None,
          quiet: bool = False) -> Exporter | None:  # fmt: skip
    """The in-process entry: send this state directory's audit trail from this process, as long as
    it lives. None when telemetry is off, sends nothing, or the extra is not installed (`doctor`
    says which). `console`: where the console exporter writes (default stderr); `quiet`: keep the
    SDK's own warnings off stderr (the proxy's stderr is its client's log), in the status file only.
    Call `stop()` on the result before the process ends; it never waits longer than it is told."""
    from governor.runtime import signals

    if not enabled(env) or not signals.Settings(env).sends:
        return None
    from governor import with_site_packages

    with_site_packages()
    try:
        from governor.runtime.otel import Exporter
    except ImportError as err:
        signals.note(env_state(env, state), problem=f"the telemetry extra is not installed ({err})")
        return None
    exporter = Exporter(env, env_state(env, state), console=console, quiet=quiet)
    exporter.start()
    return exporter


def env_state(env: Mapping[str, str], state: str | None) -> str:
    from governor.state import state_dir

    return state or state_dir(env)
