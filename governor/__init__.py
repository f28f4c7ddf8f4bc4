"""memory-governor: per-turn limits on what a coding agent's memory server injects."""

__version__ = "0.1.0"


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
