"""OSWorld's own evaluator code, as a reference to check cua's re-implementations against: the
metric modules of `desktop-env` 1.0.2 from PyPI (the code behind OSWorld-Verified), installed by
scripts/setup_env.sh without its dependencies. Its package `__init__` files import every app's
client (Playwright, cloud SDKs), so the metric modules are loaded on their own, under empty
stand-ins of their parent packages."""

import importlib
import importlib.metadata
import logging
import sys
import types

import pytest

PACKAGES = ("desktop_env", "desktop_env.evaluators", "desktop_env.evaluators.metrics")


def reference(module: str):
    """OSWorld's `desktop_env.evaluators.metrics.<module>` (the test is skipped without desktop-env)."""
    try:
        dist = importlib.metadata.distribution("desktop-env")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("OSWorld's evaluator code (desktop-env) is not installed: run scripts/setup_env.sh")
    for name in PACKAGES:
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [str(dist.locate_file(name.replace(".", "/")))]
            sys.modules[name] = package
    logging.getLogger("desktopenv").setLevel(logging.CRITICAL)  # it logs every mismatch as an error
    return importlib.import_module(f"desktop_env.evaluators.metrics.{module}")


class _StandIn(types.ModuleType):
    """An empty module for one OSWorld's code imports and the compared functions never call: any
    name imported from it is a class of that name that does nothing."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {})


def reference_apart(module: str, stand_ins: tuple = ()):
    """OSWorld's `desktop_env.evaluators.<module>` ("metrics.chrome", "getters.chrome") loaded under
    a name of its own, with empty modules standing in for those of `stand_ins` this host lacks (only
    while it loads: no other test sees them, nor a copy of the module that has them)."""
    import importlib.util

    try:
        dist = importlib.metadata.distribution("desktop-env")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("OSWorld's evaluator code (desktop-env) is not installed: run scripts/setup_env.sh")
    lacking = [name for name in stand_ins if importlib.util.find_spec(name.split(".")[0]) is None]
    if not lacking:
        if module.startswith("metrics."):
            return reference(module.split(".", 1)[1])
    name = f"desktop_env.evaluators.{module}"
    private = f"{name}__apart_{'_'.join(sorted(n.replace('.', '_') for n in lacking)) or 'whole'}"
    if private in sys.modules:
        return sys.modules[private]
    for package in PACKAGES + ("desktop_env.evaluators.getters",):
        if package not in sys.modules:
            stand_in = types.ModuleType(package)
            stand_in.__path__ = [str(dist.locate_file(package.replace(".", "/")))]
            sys.modules[package] = stand_in
    logging.getLogger("desktopenv").setLevel(logging.CRITICAL)
    added = []
    for missing in lacking:
        parts = missing.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix not in sys.modules:
                sys.modules[prefix] = _StandIn(prefix)
                added.append(prefix)
    try:
        spec = importlib.util.spec_from_file_location(private, str(dist.locate_file(name.replace(".", "/") + ".py")))
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
    finally:
        for prefix in added:
            sys.modules.pop(prefix, None)
    sys.modules[private] = loaded
    return loaded

