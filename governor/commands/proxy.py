"""`memory-governor proxy [--name SERVER] -- COMMAND [ARGS...]`: govern an MCP client with no hooks.

The process itself is governor.runtime.proxy; `install mcp-proxy --client CLIENT` writes it into
a client's MCP configuration in front of the memory server.
"""

from __future__ import annotations

import click

from governor.runtime import proxy


@click.command("proxy", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--name", "server", default=proxy.DEFAULT_SERVER, show_default=True,
              help="The memory server's name in the policy's tools[].servers.")  # fmt: skip
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def command(server: str, command: tuple[str, ...]) -> int:
    """Run the memory server COMMAND behind a governing MCP proxy (stdio)."""
    raise SystemExit(proxy.main(["--name", server, "--", *command]))
