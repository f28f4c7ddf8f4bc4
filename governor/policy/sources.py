"""Which policy files apply, where the project is, and the files shipped with the package.

Discovery (the first that exists is the team policy; each layers over the shipped default):
  1. $MEMORY_GOVERNOR_POLICY
  2. <project>/.memory-governor/policy.yaml     (project = nearest ancestor with .memory-governor/,
     not above the git work tree it is in; a hook's project is fixed by governor.policy.projects)
  3. $XDG_CONFIG_HOME/memory-governor/policy.yaml (else ~/.config/...)
  4. the shipped default, rules/memory-budget.yaml
A local override, <project>/.memory-governor/policy.local.yaml, layers over the team policy
and may only tighten it (except the keys the team lists under loosen_allowed).

Hot path: standard library only.
"""

from __future__ import annotations

import os

from governor import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

SHIPPED_NAME = "memory-budget.yaml"
DIGEST_NAME = "memory-budget.sha256"
MAX_SHIPPED = 4 * 1024 * 1024  # read no more of the shipped default than this to hash it
MAX_BYTES = 256 * 1024  # a policy file larger than this is not read (the shipped one is about 30 KB)
PROJECT_DIR_NAME = ".memory-governor"
TEAM_NAME = "policy.yaml"
LOCAL_NAME = "policy.local.yaml"

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = os.path.dirname(_HERE)  # governor/: rules/ and schemas/ are packaged beside it


def shipped_file(folder: str, name: str) -> str:
    """A shipped data file: packaged under governor/<folder>, or <folder>/ beside a source checkout."""
    for candidate in (
        os.path.join(_PACKAGE, folder, name),
        os.path.join(os.path.dirname(_PACKAGE), folder, name),
    ):
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(f"{folder}/{name} is missing from this installation")


def shipped_policy_path() -> str:
    return shipped_file("rules", SHIPPED_NAME)


def built_digest() -> str | None:
    """The sha256 of the shipped default as this version was built (rules/memory-budget.sha256,
    `sha256sum` format; a test holds it to the source tree's file), or None when it is missing."""
    try:
        with open(shipped_file("rules", DIGEST_NAME), encoding="ascii") as handle:
            word = handle.read(200).split(maxsplit=1)
    except (OSError, UnicodeDecodeError):
        return None
    return word[0].lower() if word and len(word[0]) == 64 else None


def file_digest(path: str) -> str | None:
    """The sha256 of a file's bytes, or None when it cannot be read."""
    from hashlib import sha256

    from governor.state import read_regular

    try:
        return sha256(read_regular(path, MAX_SHIPPED, follow=True)).hexdigest()
    except OSError:
        return None


def project_root(cwd: str | None) -> str:
    """The nearest ancestor of `cwd` with a .memory-governor/ folder, else `cwd` itself. The search
    stops at the top of the git work tree `cwd` is in: a folder above it is no part of the project."""
    start = cwd or os.getcwd()
    start = os.path.abspath(start)
    here = start
    while True:
        if os.path.isdir(os.path.join(here, PROJECT_DIR_NAME)):
            return here
        parent = os.path.dirname(here)
        if os.path.exists(os.path.join(here, ".git")):
            return start
        if parent == here:
            return start
        here = parent


class Sources:
    """The files that make up the effective policy, in layering order."""

    __slots__ = ("anchor", "ledger_url", "local", "project", "shipped", "team", "team_origin", "watched")

    def __init__(self, env: Mapping[str, str], cwd: str | None, project: str | None = None,
                 managed: str | None = None) -> None:  # fmt: skip
        """`managed`: the administrator's policy file (governor.policy.managed), the only layer
        over the shipped default: no project or user file, no local override, no variable."""
        from governor.state import default_state_dir

        self.project = project or project_root(cwd)  # `project`: the root pinned for a session
        self.anchor = default_state_dir(env)  # acceptance is kept here too (governor.policy.acceptance)
        # The ledger's Redis, when there is one: where the project's acceptance is kept for every host.
        self.ledger_url: str | None = env.get("MEMORY_GOVERNOR_LEDGER_URL") or None
        self.shipped = shipped_policy_path()
        config_home = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
        explicit = env.get("MEMORY_GOVERNOR_POLICY")
        project_team = os.path.join(self.project, PROJECT_DIR_NAME, TEAM_NAME)
        user_team = os.path.join(config_home, "memory-governor", TEAM_NAME)
        local = os.path.join(self.project, PROJECT_DIR_NAME, LOCAL_NAME)
        self.team: str | None = None
        self.local: str | None = None
        self.team_origin = "shipped default"
        if managed is not None:
            self.team, self.team_origin, self.local = managed, "managed", None
            self.ledger_url = None
            self.watched = [self.shipped, managed, _MODEL_FILE]
            return
        if explicit:
            self.team, self.team_origin = os.path.abspath(explicit), "MEMORY_GOVERNOR_POLICY"
        elif os.path.isfile(project_team):
            self.team, self.team_origin = project_team, "project"
        elif os.path.isfile(user_team):
            self.team, self.team_origin = user_team, "user"
        self.local = local if os.path.isfile(local) else None
        # Everything whose appearance, change or removal changes the effective policy.
        self.watched = [self.shipped, explicit or project_team, user_team, local, _MODEL_FILE]

    def layers(self) -> list[tuple[str, str]]:
        out = [("default", self.shipped)]
        if self.team:
            out.append(("managed" if self.team_origin == "managed" else "team", self.team))
        if self.local:
            out.append(("local", self.local))
        return out

    def signature(self) -> list[list[Any]]:
        out: list[list[Any]] = [[__version__]]
        for path in self.watched:
            try:
                st = os.stat(path)
                out.append([path, st.st_mtime_ns, st.st_size])
            except OSError:
                out.append([path, None, None])
        return out

    def cache_key(self) -> str:
        from zlib import crc32

        text = "\0".join([self.project, *self.watched])
        return f"{crc32(text.encode('utf-8', 'surrogatepass')):08x}"


_MODEL_FILE = os.path.join(_HERE, "model.py")
