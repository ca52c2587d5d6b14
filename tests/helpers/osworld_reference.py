"""OSWorld's own evaluator code, as a reference to check cua's re-implementations against: the
metric modules of `desktop-env` 1.0.2 from PyPI (the code behind OSWorld-Verified), installed by
scripts/setup_env.sh without its dependencies. Its package `__init__` files import every app's
client (Playwright, cloud SDKs), so the metric modules are loaded on their own, under empty
stand-ins of their parent packages."""

import importlib
import importlib.metadata
import importlib.util
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


def reference_with_stand_ins(module: str, lacking: tuple[str, ...] = (), kind: str = "metrics"):
    """OSWorld's `desktop_env.evaluators.<kind>.<module>` ("metrics" or "getters") where its module
    imports libraries this host lacks only for functions a test never calls (OSWorld's vlc metrics
    import librosa and acoustid for compare_audios): each of `lacking` that cannot be imported is an
    empty stand-in while the module loads, and is gone again after (a later real import still fails)."""
    reference("utils")  # the parent packages' stand-ins
    parent = f"desktop_env.evaluators.{kind}"
    if parent not in sys.modules:
        dist = importlib.metadata.distribution("desktop-env")
        package = types.ModuleType(parent)
        package.__path__ = [str(dist.locate_file(parent.replace(".", "/")))]
        sys.modules[parent] = package
    name = f"{parent}.{module}"
    if name in sys.modules:
        return sys.modules[name]
    placed = []
    for lib in lacking:
        try:
            found = importlib.util.find_spec(lib) is not None
        except ModuleNotFoundError:  # its parent package is missing too
            found = False
        if not found and lib not in sys.modules:
            stand_in = types.ModuleType(lib)
            stand_in.__path__ = []
            stand_in.__getattr__ = lambda attr, lib=lib: _unavailable(f"{lib}.{attr}")
            sys.modules[lib] = stand_in
            placed.append(lib)
    try:
        return importlib.import_module(name)
    finally:
        for lib in placed:
            sys.modules.pop(lib, None)


def _unavailable(what: str):
    def call(*args, **kwargs):
        raise RuntimeError(f"{what} is a stand-in: this host lacks it")
    return call

