"""cua: run computer-use agents at scale."""

__version__ = "0.1.0"
