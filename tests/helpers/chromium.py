"""A real Chromium with its remote debugging port open, as OSWorld's VMs run Chrome (Debian's
`chromium`, headless), and OSWorld's own Chrome getters (desktop-env 1.0.2's getters/chrome.py)
to compare cua's against, given a tiny stand-in of its DesktopEnv pointing at the same Chromium."""

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from helpers.osworld_reference import reference_apart
from helpers.processes import kill_group


def selenium_browser(profile: Path, size: str = "1200,800"):
    """A headless Chromium driven by Selenium (Debian's chromium and chromium-driver) on a profile of
    its own: a person's browser in the tests of the pages cua serves. The caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("Debian's chromium and chromium-driver are not installed (scripts/setup_env.sh installs them)")
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", f"--window-size={size}", f"--user-data-dir={profile}"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


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
    """OSWorld's `desktop_env.evaluators.getters.chrome`, with stand-ins for its Google Drive imports
    (pydrive, which no getter compared here uses) while it loads, where this host lacks them."""
    return reference_apart("getters.chrome", ("pydrive.auth", "pydrive.drive"))


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
