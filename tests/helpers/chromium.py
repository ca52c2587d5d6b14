"""A real Chromium with its remote debugging port open, as OSWorld's VMs run Chrome (Debian's
`chromium`, headless), and OSWorld's own Chrome getters (desktop-env 1.0.2's getters/chrome.py)
to compare cua's against, given a tiny stand-in of its DesktopEnv pointing at the same Chromium."""

import importlib
import importlib.metadata
import importlib.util
import logging
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from helpers.processes import kill_group

GETTER_PACKAGES = ("desktop_env", "desktop_env.evaluators", "desktop_env.evaluators.getters")


class Chromium:
    """`chromium --headless=new --remote-debugging-port=0` on a profile of its own; `url` is its
    debugging port's base URL (the port read from the profile's DevToolsActivePort)."""

    def __init__(self, profile: Path, timeout: float = 60):
        exe = shutil.which("chromium")
        if exe is None:
            pytest.skip("Debian's chromium is not installed (scripts/setup_env.sh installs it)")
        self.profile = profile
        self.log = open(profile.parent / f"{profile.name}.log", "wb")
        # --no-sandbox: the tests may run as root, where Chromium's sandbox refuses to start
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--remote-debugging-port=0", f"--user-data-dir={profile}",
             "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        active = profile / "DevToolsActivePort"
        end = time.monotonic() + timeout
        while not (active.is_file() and active.read_text().count("\n") >= 1):
            if self.proc.poll() is not None or time.monotonic() > end:
                self.close()
                raise AssertionError(f"Chromium did not open its debugging port: see {self.log.name}")
            time.sleep(0.1)
        self.port = int(active.read_text().splitlines()[0])
        self.url = f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        kill_group(self.proc)
        self.proc.wait(timeout=30)
        self.log.close()


def osworld_chrome_getters():
    """OSWorld's `desktop_env.evaluators.getters.chrome`, loaded on its own under empty stand-ins of
    its parent packages (their __init__ files import every app's client). Its Google Drive imports
    (pydrive, not installed: no getter compared here uses it) get empty stand-ins when missing."""
    try:
        dist = importlib.metadata.distribution("desktop-env")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("OSWorld's evaluator code (desktop-env) is not installed: run scripts/setup_env.sh")
    for name in GETTER_PACKAGES:
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [str(dist.locate_file(name.replace(".", "/")))]
            sys.modules[name] = package
    if importlib.util.find_spec("pydrive") is None and "pydrive" not in sys.modules:
        stand_ins = {"pydrive": {}, "pydrive.auth": {"GoogleAuth": object},
                     "pydrive.drive": {"GoogleDrive": object, "GoogleDriveFileList": object,
                                       "GoogleDriveFile": object}}
        for name, attrs in stand_ins.items():
            module = types.ModuleType(name)
            module.__dict__.update(attrs)
            sys.modules[name] = module
    logging.getLogger("desktopenv").setLevel(logging.CRITICAL)
    return importlib.import_module("desktop_env.evaluators.getters.chrome")


class OSWorldEnv:
    """What OSWorld's Chrome getters read of its DesktopEnv: the VM's address and ports, the cache
    folder, the proxy flag, and the controller's accessibility tree (here a fixed text)."""

    def __init__(self, chromium_port: int, server_port: int, cache_dir: Path, tree=None):
        self.vm_ip = "127.0.0.1"
        self.chromium_port = chromium_port
        self.server_port = server_port
        self.cache_dir = str(cache_dir)
        self.current_use_proxy = False
        self.tree = tree
        env = self

        class Controller:
            def get_accessibility_tree(self):
                return env.tree

        self.controller = Controller()
