"""OSWorld's accessibility metrics (being written)."""

METRICS: dict = {}
EXTRA = None
