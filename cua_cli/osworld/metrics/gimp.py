"""OSWorld's gimp metrics (being written)."""

METRICS: dict = {}
EXTRA = None
