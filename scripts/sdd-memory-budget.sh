#!/usr/bin/env bash
# The seed's hook name: a shell entry that runs memory-governor's Claude Code hook.
# Reads one hook event on stdin, answers on stdout, always exits 0.
# MEMORY_GOVERNOR_PYTHON picks the interpreter (default: the project's .venv, else python3).
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${MEMORY_GOVERNOR_PYTHON:-$root/.venv/bin/python}"
[ -x "$py" ] || py="$(command -v python3)"
exec "$py" -I -S "$root/governor/runtime/entry.py" claude-code
