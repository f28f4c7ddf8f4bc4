#!/usr/bin/env bash
# Run the benchmarks from a regular (non-editable) install, as users have it: an editable
# install adds an import finder to every interpreter start, which would inflate the bare
# interpreter we compare against. Arguments go to scripts/bench.py.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.cache/bench-venv"
PY="${PYTHON:-python3}"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$ROOT[redis,telemetry]"  # redis, telemetry: their --only rows
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$ROOT"
# The MCP Python SDK, for the row that times its stdio transports beside the proxy (not a dependency).
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "mcp>=2.3,<3"
cd "$ROOT"
exec "$VENV/bin/python" scripts/bench.py "$@"
