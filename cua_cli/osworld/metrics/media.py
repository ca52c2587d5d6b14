"""OSWorld's media metrics (being written)."""

METRICS: dict = {}
EXTRA = None
