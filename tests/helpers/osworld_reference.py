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
