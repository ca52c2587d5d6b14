"""OSWorld's gimp getters (being written)."""

GETTERS: dict = {}
EXTRA = None
