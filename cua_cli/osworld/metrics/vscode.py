"""OSWorld's vscode metrics (being written)."""

METRICS: dict = {}
EXTRA = None
