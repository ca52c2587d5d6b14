"""`cua top`: a live terminal view of a run, read from its run folder alone (so from any host that sees it)."""
