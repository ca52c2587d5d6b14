"""`cua view`: a static, self-contained HTML report of what the agent did."""
