"""`cua stats` and `cua compare`: honest numbers from cua, OSWorld and DART result folders."""
