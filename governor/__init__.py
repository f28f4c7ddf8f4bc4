"""memory-governor: per-turn limits on what a coding agent's memory server injects."""

__version__ = "0.3.0"  # semantic: CHANGELOG.md says what each release changes, and what an upgrade does

COMMIT_FILE = "COMMIT"  # beside this file in a build from a git checkout: the commit it was built from


def commit() -> str | None:
    """The commit this copy was built from (a wheel built in a git checkout records it), or of the
    checkout it runs from (an editable install), with `.dirty` when that has uncommitted changes;
    None for a release installed from its published package. Runs git: cold path only."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(here, COMMIT_FILE), encoding="ascii") as handle:
            recorded = handle.read().strip()
        return recorded or None
    except (OSError, UnicodeDecodeError):
        pass
    return checkout_commit(os.path.dirname(here))


def checkout_commit(folder: str) -> str | None:
    """The commit checked out in `folder` if it is the top of a git work tree (`.dirty` after it when
    it has uncommitted changes), else None. No GIT_* variable, system config or fsmonitor is used."""
    import os
    import subprocess

    if not os.path.exists(os.path.join(folder, ".git")):
        return None
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    try:
        described = subprocess.run(
            ["git", "-C", folder, "-c", "core.fsmonitor=false", "describe", "--always", "--dirty=.dirty",
             "--abbrev=12", "--exclude=*"],
            capture_output=True, text=True, timeout=5, env=env, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    found = described.stdout.strip()
    return found if described.returncode == 0 and found else None


def described_version() -> str:
    """The version as a person and a collector read it: `0.3.0`, or `0.3.0+g<commit>` for a copy
    built from (or running in) a git checkout, so teammates' builds can be told apart."""
    found = commit()
    return f"{__version__}+g{found}" if found else __version__


# Threads of this process that only wait and import nothing while it decides (a hook's watchdog,
# governor.runtime.hook): `alone` leaves them out.
waiting_threads: set[int] = set()


def alone() -> bool:
    """Does this process work on one thread (a hook, a command), threads that only wait aside?"""
    import sys
    import threading

    return threading.active_count() == 1 and len(set(sys._current_frames()) - waiting_threads) == 1


def with_site_packages() -> None:
    """A hook runs with `python -S` for speed; code needing third-party packages calls this first."""
    import sys

    if "site" not in sys.modules:
        import site

        site.main()


def fingerprint() -> bytes:
    """Which code this is: the version and the newest source file of the package. A warm server
    from other code retires (governor.runtime); a policy compiled by other code is compiled again
    (governor.policy.content)."""
    import os

    newest = 0
    folders = [os.path.dirname(os.path.abspath(__file__))]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.endswith(".py"):
                        newest = max(newest, entry.stat().st_mtime_ns)
                    elif (
                        entry.name not in ("__pycache__", "rules", "schemas")
                        and "." not in entry.name
                        and entry.is_dir()
                    ):
                        folders.append(entry.path)
        except OSError:
            continue
    return f"{__version__}+{newest}".encode()


def stamp() -> bytes:
    """Which code a hook runs, as it tells the warm server on every call: the version and the
    change times of the package's folder and of the runtime's (two stats, where `fingerprint`
    reads every folder of the package). Installing, upgrading or reinstalling replaces files,
    which changes the package folder's time; a file edited in place changes neither, and the
    server finds that itself, from `fingerprint`, within seconds (governor.runtime.server)."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        times = (os.stat(here).st_mtime_ns, os.stat(os.path.join(here, "runtime")).st_mtime_ns)
    except OSError:
        times = (0, 0)
    return f"{__version__}+{max(times)}".encode()


def install_extra(extra: str) -> str:
    """How a person adds an optional extra to the environment this copy runs from: memory-governor
    is installed from its clone, isolated, so neither a bare `pip` nor a package name is it."""
    import sys

    return (f"{sys.executable} -m pip install '/path/to/the/clone[{extra}]' (into the environment memory-governor "
            f"runs from; an install by pipx: in the clone, pipx install --force '.[{extra}]', naming every extra you use; "
            f"by uv: uv tool install --force '.[{extra}]')")  # fmt: skip
