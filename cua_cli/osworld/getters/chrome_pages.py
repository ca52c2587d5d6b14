"""OSWorld's chrome_pages getters (being written)."""

GETTERS: dict = {}
EXTRA = None
