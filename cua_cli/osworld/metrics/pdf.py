"""OSWorld's pdf metrics (being written)."""

METRICS: dict = {}
EXTRA = None
