"""OSWorld's thunderbird metrics (being written)."""

METRICS: dict = {}
EXTRA = None
