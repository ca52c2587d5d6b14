"""OSWorld's chrome metrics (being written)."""

METRICS: dict = {}
EXTRA = None
