#!/usr/bin/env bash
# Set up on a fresh machine and run every test (end-to-end ones included).
# Installs: the project and its test tools into .venv; Debian's chromium (for the HTML report
# test), redis-server (the Redis ledger's tests start their own on a free loopback port and
# never use a service the package may start) and pipx (the journeys install memory-governor as the
# README does), when missing and this user may install packages.
# The end-to-end tests install the pinned harness binaries from npm (and the Claude Agent SDK's wheel
# from PyPI, with pip) into a cache outside the checkout
# (~/.cache/memory-governor-e2e, see tests/e2e/npm.py) on first use.
# `--newest [PYTEST ARGS]`: the e2e tests at each harness's newest release instead (below).
set -euo pipefail
. "$(dirname "$0")/venv.sh" test,dev
cd "$ROOT"
# The test processes (pytest's workers, the CLI and scripts they start) import the same modules again
# and again: they keep their bytecode (in .venv and the checkout's __pycache__, which git ignores)
# whatever the caller's PYTHONDONTWRITEBYTECODE says. The hooks (`python -I`) keep theirs anyway.
unset PYTHONDONTWRITEBYTECODE
apt="apt-get"
[ "$(id -u)" = 0 ] || apt="sudo -n apt-get"
install_missing() {  # install_missing COMMAND PACKAGE WHY
  if command -v "$1" >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then return 0; fi
  echo "installing $2 ($3)..." >&2
  { $apt install -y -q "$2" || { $apt update -q && $apt install -y -q "$2"; }; } >/dev/null 2>&1 \
    || echo "could not install $2; $3 will skip (or fail under CI=true)" >&2
}
install_missing chromium chromium "the HTML report test"
install_missing redis-server redis-server "the Redis ledger's tests"
install_missing pipx pipx "the newcomers' journeys (scripts/journeys.py install memory-governor as the README does)"
# Side by side on every core (pytest-xdist); under loadgroup tests/conftest.py keeps each e2e
# module, per Claude Code pin, in one worker. MEMORY_GOVERNOR_TEST_WORKERS=0 runs in one process.
pytest=(python -m pytest -n "${MEMORY_GOVERNOR_TEST_WORKERS:-auto}" --dist loadgroup)
if [ "${1:-}" != "--newest" ]; then
  exec "${pytest[@]}" "$@"  # the pins: what CI runs
fi
# --newest [PYTEST ARGS]: the e2e tests (or those named) against the newest version of each harness
# the registries serve instead of the pins (scripts/newest.py; each version gets its own folder in
# the e2e cache), then which pins differ and what failed.
shift
pins="$(python scripts/newest.py resolve)"
export MEMORY_GOVERNOR_E2E_PINS="$pins"
[ $# -gt 0 ] || set -- tests/e2e
report="$(mktemp "${TMPDIR:-/tmp}/memory-governor-newest-XXXXXX.xml")"
status=0
"${pytest[@]}" --junitxml="$report" "$@" || status=$?
python scripts/newest.py summary "$report"
rm -f "$report"
exit "$status"
