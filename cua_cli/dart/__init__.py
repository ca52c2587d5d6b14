"""DART-GUI in one place: adaptive rounds, checkpoint-driven reloads, its MySQL tables,
its trajectory folders, and the layout of its result folders."""
