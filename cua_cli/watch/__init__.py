"""`cua watch`: a running episode's desktop live in the browser, beside its task and its last step.

Modules: episodes (what the run folder says is running, and how far it got), page (the HTML),
server (the pages, noVNC's files, and the screen streams through the rollout's relay).
"""
