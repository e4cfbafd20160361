"""gpureplace's version (also in pyproject.toml); part of every disk cache key."""

__version__ = "0.1.0"
