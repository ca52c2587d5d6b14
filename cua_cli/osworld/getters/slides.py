"""OSWorld's slides getters (being written)."""

GETTERS: dict = {}
EXTRA = None
