#!/usr/bin/env bash
# Set up on a fresh machine and run every test (end-to-end ones included).
# Installs: the project and its test tools into .venv; Debian's chromium (for the HTML report
# test) when missing and this user may install packages. The end-to-end tests install the
# pinned harness binaries from npm into a cache outside the checkout
# (~/.cache/memory-governor-e2e, see tests/e2e/npm.py) on first use.
set -euo pipefail
. "$(dirname "$0")/venv.sh" test,dev
cd "$ROOT"
if ! command -v chromium >/dev/null 2>&1; then
  apt="apt-get"
  [ "$(id -u)" = 0 ] || apt="sudo -n apt-get"
  if command -v apt-get >/dev/null 2>&1; then
    echo "installing chromium (for the HTML report test)..." >&2
    { $apt install -y -q chromium || { $apt update -q && $apt install -y -q chromium; }; } >/dev/null 2>&1 \
      || echo "could not install chromium; the HTML report test will skip (or fail under CI=true)" >&2
  fi
fi
exec python -m pytest "$@"
