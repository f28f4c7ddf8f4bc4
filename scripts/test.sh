#!/usr/bin/env bash
# Set up on a fresh machine and run every test (end-to-end ones included).
set -euo pipefail
. "$(dirname "$0")/venv.sh" test,dev
cd "$ROOT"
exec python -m pytest "$@"
