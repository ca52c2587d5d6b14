"""OSWorld's vlc getters (being written)."""

GETTERS: dict = {}
EXTRA = None
