"""OSWorld's vscode getters (being written)."""

GETTERS: dict = {}
EXTRA = None
