"""memory-governor: per-turn limits on what a coding agent's memory server injects."""

__version__ = "0.1.0"


def with_site_packages() -> None:
    """A hook runs with `python -S` for speed; code needing third-party packages calls this first."""
    import sys

    if "site" not in sys.modules:
        import site

        site.main()
