"""memory-governor: per-turn limits on what a coding agent's memory server injects."""

__version__ = "0.1.0"
