"""OSWorld's evaluator getters, rewritten for cua: one module per family of apps, each with its
`GETTERS` by name (OSWorld's `type` without `get_`) and the `EXTRA` its libraries come from.

    context    what every getter is given (EvalContext) and the helpers they share
    general    commands, terminal, accessibility tree, files on the desktop and the web, rules
"""

from ..registry import collect
from . import general
from .context import EvalContext

GETTERS, EXTRAS = collect((general,), "GETTERS")

__all__ = ["GETTERS", "EXTRAS", "EvalContext"]
