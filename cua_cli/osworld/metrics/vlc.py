"""OSWorld's vlc metrics (being written)."""

METRICS: dict = {}
EXTRA = None
