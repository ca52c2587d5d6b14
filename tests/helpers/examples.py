"""How many examples a property test tries: its own number in the default run (the whole suite must
stay within its minutes on two cores), that many times more under `--hypothesis-profile=deep`."""

from hypothesis import settings

DEFAULT = 150  # conftest's default profile's max_examples


def examples(n: int) -> int:
    return max(1, n * settings.default.max_examples // DEFAULT)
