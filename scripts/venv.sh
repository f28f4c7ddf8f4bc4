# Sourced by the entry scripts: make .venv (once) and install the project into it.
# Usage: . scripts/venv.sh [extras]   e.g. ". scripts/venv.sh test,dev"
set -eu
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
extras="${1:-}"
spec="$ROOT"
[ -n "$extras" ] && spec="$ROOT[$extras]"
# Reinstall only when the project's metadata changed since the last install with these extras.
hash="$(cksum < "$ROOT/pyproject.toml" | cut -d' ' -f1)"
stamp="$VENV/.installed-$hash-${extras:-none}"
# --no-compile: a module's bytecode is written when it is first imported, so the ones never
# imported (most of mypy's, grpc's) are not compiled at install (~10 s of a fresh install).
# An install with extras holds the plain one (the demo run after the tests' install reinstalls nothing).
installed=""
[ -f "$stamp" ] && installed=1
if [ -z "$extras" ] && compgen -G "$VENV/.installed-$hash-*" >/dev/null; then installed=1; fi
if [ -z "$installed" ]; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile -e "$spec"
  find "$VENV" -maxdepth 1 -name '.installed-*' ! -name ".installed-$hash-*" -delete
  touch "$stamp"
fi
export PATH="$VENV/bin:$PATH"
