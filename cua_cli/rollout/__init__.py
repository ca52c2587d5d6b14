"""The rollout core: the driver, the runner-backend seam, runners and the episode loop."""
