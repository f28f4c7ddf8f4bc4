#!/usr/bin/env bash
# The longer fuzz run of the hook's input (CI runs a bounded one): FUZZ_EXAMPLES per property.
# Usage: scripts/fuzz.sh [examples]   (default 20000)
set -euo pipefail
. "$(dirname "$0")/venv.sh" test,dev
cd "$ROOT"
FUZZ_EXAMPLES="${1:-20000}" exec python -m pytest -q tests/test_hardening.py -k fuzzed_payloads -p no:cacheprovider
