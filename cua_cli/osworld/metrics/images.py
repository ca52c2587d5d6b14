"""OSWorld's images metrics (being written)."""

METRICS: dict = {}
EXTRA = None
