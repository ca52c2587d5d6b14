"""OSWorld's chrome getters (being written)."""

GETTERS: dict = {}
EXTRA = None
