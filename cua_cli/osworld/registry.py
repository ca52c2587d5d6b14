"""How getters and metrics are registered: one module per family of apps, as OSWorld groups them,
each with its parts by name (`METRICS` or `GETTERS`) and the `EXTRA` of cua's (`office`, `web`,
`media`) its libraries come from, or None. A rollout host installs only the extras its tasks use;
a task it cannot score names what to install."""

import importlib.util
from types import ModuleType
from typing import Any, NamedTuple, Optional


class Extra(NamedTuple):
    name: str                 # pip install 'cua[<name>]'
    modules: dict[str, str]   # import name -> pip name

    def missing(self) -> list[str]:
        """The pip names of the modules this host lacks."""
        return [pip for module, pip in self.modules.items() if importlib.util.find_spec(module) is None]


def collect(families: tuple[ModuleType, ...], kind: str) -> tuple[dict[str, Any], dict[str, Extra]]:
    """(every family's parts of `kind` by name, the extra each part needs); a name in two families is a
    mistake of cua's, raised at import."""
    parts: dict[str, Any] = {}
    extras: dict[str, Extra] = {}
    for family in families:
        extra: Optional[Extra] = family.EXTRA
        for name, part in getattr(family, kind).items():
            if name in parts:
                raise RuntimeError(f"{kind[:-1].lower()} {name!r} is in two families")
            parts[name] = part
            if extra:
                extras[name] = extra
    return parts, extras


def install_hint(extras: list[Extra]) -> str:
    return "pip install 'cua[" + ",".join(sorted({e.name for e in extras})) + "]'"
