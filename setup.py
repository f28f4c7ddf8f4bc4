"""The build's one step of its own (the rest is pyproject.toml): a wheel built in a git checkout
records the commit it was built from (governor/COMMIT), so `memory-governor --version`, `doctor`
and telemetry's `service.version` tell one build from another."""

from __future__ import annotations

import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithCommit(build_py):
    def run(self) -> None:
        super().run()
        sys.path.insert(0, HERE)
        try:
            from governor import COMMIT_FILE, checkout_commit
        finally:
            sys.path.remove(HERE)
        found = checkout_commit(HERE)
        if found and not self.dry_run:
            with open(os.path.join(self.build_lib, "governor", COMMIT_FILE), "w", encoding="ascii") as handle:
                handle.write(found + "\n")


setup(cmdclass={"build_py": BuildWithCommit})
