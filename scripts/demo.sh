#!/usr/bin/env bash
# Set up on a fresh machine and run the demo on the embedded default policy.
set -euo pipefail
. "$(dirname "$0")/venv.sh"
exec memory-governor demo "$@"
