"""One MiniWoB++ browser: a private headless Chromium showing one task page.

Commands are performed with W3C input actions at viewport pixels; the task area
(the screenshot the agent sees) sits at the page's top-left corner, so screenshot
pixels and page coordinates coincide.
"""

import base64
import os
import shutil
import tempfile
import time

import gymnasium
import miniwob
from miniwob.constants import TASK_HEIGHT, TASK_WIDTH
from miniwob.selenium_instance import HTML_DIR
from selenium import webdriver
from selenium.common.exceptions import JavascriptException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.actions import interaction
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.actions.key_input import KeyInput
from selenium.webdriver.common.actions.mouse_button import MouseButton
from selenium.webdriver.common.actions.pointer_input import PointerInput
from selenium.webdriver.common.actions.wheel_input import WheelInput
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.wait import WebDriverWait

from cua_cli._util.text import clip
from cua_cli.envserver.pyautogui_subset import Command

gymnasium.register_envs(miniwob)  # importing miniwob registers its ids; this says the import is used

DEFAULT_EPISODE_MAX_TIME = 10.0  # seconds; MiniWoB's own default
CHROME_ARGS = (
    "--headless",
    "--no-sandbox",  # required when running as root
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--force-device-scale-factor=1",  # screenshot pixels == CSS pixels
    # The task area must lie inside the viewport: pointer actions outside it fail.
    "--window-size=800,600",
    # A horizontal scroll at the page edge would otherwise navigate back, off the task.
    "--disable-features=OverscrollHistoryNavigation",
)
SCROLL_PIXELS = 50  # per wheel click
DRAG_STEPS = 5  # intermediate moves, so drag handlers see mousemove events
BUTTONS = {"left": MouseButton.LEFT, "middle": MouseButton.MIDDLE, "right": MouseButton.RIGHT}
KEYS = {
    "enter": Keys.ENTER, "tab": Keys.TAB, "backspace": Keys.BACKSPACE,
    "delete": Keys.DELETE, "escape": Keys.ESCAPE, "space": Keys.SPACE,
    "up": Keys.ARROW_UP, "down": Keys.ARROW_DOWN, "left": Keys.ARROW_LEFT,
    "right": Keys.ARROW_RIGHT, "home": Keys.HOME, "end": Keys.END,
    "pageup": Keys.PAGE_UP, "pagedown": Keys.PAGE_DOWN, "insert": Keys.INSERT,
    "shift": Keys.SHIFT, "ctrl": Keys.CONTROL, "alt": Keys.ALT, "win": Keys.META,
    **{f"f{i}": getattr(Keys, f"F{i}") for i in range(1, 13)},
}
TEXT_KEYS = {"\n": Keys.ENTER, "\t": Keys.TAB}

# Starts a fresh episode. Clicking the end-of-episode cover would start a new
# one and wipe the reward, so that click handler is removed. Nothing stays
# focused from the last episode: keys typed first go nowhere, as on a new page.
START_EPISODE_JS = """
core.endEpisode(0);
if (document.activeElement) document.activeElement.blur();
Math.seedrandom(arguments[0]);
core.setDataMode('train');
core.EPISODE_MAX_TIME = arguments[1];
core.startEpisodeReal();
core.cover_div.onclick = null;
"""
UTTERANCE_JS = "var u = core.getUtterance(); return typeof u === 'string' ? u : u.utterance;"


def check_task(task: str) -> None:
    """Raise ValueError unless `task` names a MiniWoB task (e.g. "click-test-2")."""
    if task.startswith("flight."):
        raise ValueError(f"FlightWoB task {clip(task, 100)!r} is not supported")
    if f"miniwob/{task}-v1" not in gymnasium.registry:
        raise ValueError(f"unknown MiniWoB task {clip(task, 100)!r}")


def _chrome_paths() -> tuple[str, str]:
    """Chromium and chromedriver paths, given explicitly so Selenium Manager never
    goes to the network. MINIWOB_CHROME_BINARY / MINIWOB_CHROMEDRIVER override."""
    candidates = ["/usr/lib/chromium/chromium"] + [
        shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
    ]
    binary = os.environ.get("MINIWOB_CHROME_BINARY") or next(
        (path for path in candidates if path and os.path.isfile(path)), None
    )
    driver = os.environ.get("MINIWOB_CHROMEDRIVER") or shutil.which("chromedriver")
    if not binary or not driver:
        raise RuntimeError(
            "Chromium or chromedriver not found; install them or set "
            "MINIWOB_CHROME_BINARY and MINIWOB_CHROMEDRIVER"
        )
    return binary, driver


class MiniWobBrowser:
    """A headless Chromium that can run any MiniWoB task, one episode at a time.
    Not thread-safe: callers serialize access."""

    width, height = TASK_WIDTH, TASK_HEIGHT

    def __init__(self):
        binary, driver = _chrome_paths()
        self._profile = tempfile.mkdtemp(prefix="cua-miniwob-")
        options = webdriver.ChromeOptions()
        options.binary_location = binary
        for arg in CHROME_ARGS + (f"--user-data-dir={self._profile}",):
            options.add_argument(arg)
        try:
            self.driver = webdriver.Chrome(service=Service(driver), options=options)
        except Exception:
            shutil.rmtree(self._profile, ignore_errors=True)
            raise
        self.task: str | None = None
        self._mouse = (0, 0)

    def reset(self, task: str, seed: int, episode_max_time: float = DEFAULT_EPISODE_MAX_TIME) -> str:
        """Start a new episode of `task` with `seed`; return its instruction."""
        check_task(task)
        if task != self.task:
            self.task = None
            self.driver.get(f"file://{HTML_DIR}/miniwob/{task}.html")
            WebDriverWait(self.driver, 5).until(
                lambda d: d.execute_script("return window.core && core.cover_div !== null")
            )
            self.task = task
        ActionBuilder(self.driver).clear_actions()  # release keys/buttons still held
        self.driver.execute_script(START_EPISODE_JS, seed, int(episode_max_time * 1000))
        WebDriverWait(self.driver, 2, poll_frequency=0.02).until(
            lambda d: d.execute_script("return WOB_TASK_READY")
        )
        self._mouse = (0, 0)
        return self.driver.execute_script(UTTERANCE_JS)

    def status(self) -> tuple[bool, float]:
        """(episode done, raw reward): reward is 0 until done, then in [-1, 1]."""
        try:
            done, reward = self.driver.execute_script(
                "return [WOB_DONE_GLOBAL, WOB_RAW_REWARD_GLOBAL]"
            )
        except JavascriptException:
            # The agent navigated off the task page (a key or gesture went "back"):
            # the episode is over and failed; the next reset reloads the task.
            self.task = None
            return True, -1.0
        return bool(done), float(reward)

    def screenshot_png(self) -> bytes:
        """PNG of the task area, width x height."""
        shot = self.driver.execute_cdp_cmd(
            "Page.captureScreenshot",
            {"format": "png", "clip": {"x": 0, "y": 0, "width": self.width,
                                       "height": self.height, "scale": 1}},
        )
        return base64.b64decode(shot["data"])

    def perform(self, commands: list[Command]) -> None:
        """Perform commands in order, stopping once the episode is over."""
        for command in commands:
            if command.name == "sleep":
                time.sleep(command.duration)
            elif not self.status()[0]:
                self._perform(command)

    def point(self, x: float, y: float, click: bool) -> None:
        """Move the pointer to viewport pixel (x, y), anywhere in the window (an element's
        centre may lie outside the task area), and click there if asked."""
        mouse = PointerInput(interaction.POINTER_MOUSE, "mouse")
        mouse.create_pointer_move(duration=0, x=round(x), y=round(y), origin="viewport")
        if click:
            mouse.create_pointer_down(button=MouseButton.LEFT)
            mouse.create_pointer_up(MouseButton.LEFT)
        ActionBuilder(self.driver, mouse=mouse).perform()
        # The pyautogui-side pointer stays on its screen, the task area.
        self._mouse = (min(max(round(x), 0), self.width - 1), min(max(round(y), 0), self.height - 1))

    def stop(self) -> None:
        """End the current episode so an idle browser does no work."""
        if not self.status()[0]:
            self.driver.execute_script("core.endEpisode(0);")

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self._profile, ignore_errors=True)

    def _perform(self, c: Command) -> None:
        # Points off the screen go to its nearest pixel, as with pyautogui on a real
        # display (the OS keeps the pointer on screen); the task area is the screen
        # here. Unclamped, Selenium would raise MoveTargetOutOfBounds. No x/y means "here".
        if c.x is not None:
            target = (min(max(round(c.x), 0), self.width - 1),
                      min(max(round(c.y), 0), self.height - 1))
        else:
            target = self._mouse
        mouse = PointerInput(interaction.POINTER_MOUSE, "mouse")
        button = BUTTONS[c.button]
        if c.name == "click":
            mouse.create_pointer_move(duration=0, x=target[0], y=target[1], origin="viewport")
            for _ in range(c.clicks):
                mouse.create_pointer_down(button=button)
                mouse.create_pointer_up(button)
        elif c.name == "moveTo":
            mouse.create_pointer_move(
                duration=int(c.duration * 1000), x=target[0], y=target[1], origin="viewport"
            )
        elif c.name == "dragTo":
            (x0, y0), (x1, y1) = self._mouse, target
            mouse.create_pointer_move(duration=0, x=x0, y=y0, origin="viewport")
            mouse.create_pointer_down(button=button)
            for i in range(1, DRAG_STEPS + 1):
                mouse.create_pointer_move(
                    duration=int(c.duration * 1000 / DRAG_STEPS),
                    x=round(x0 + (x1 - x0) * i / DRAG_STEPS),
                    y=round(y0 + (y1 - y0) * i / DRAG_STEPS),
                    origin="viewport",
                )
            mouse.create_pointer_up(button)
        elif c.name in ("scroll", "hscroll"):
            mouse.create_pointer_move(duration=0, x=target[0], y=target[1], origin="viewport")
            ActionBuilder(self.driver, mouse=mouse).perform()
            wheel = WheelInput("wheel")
            delta = c.clicks * SCROLL_PIXELS  # pyautogui: + scrolls up / right
            dx, dy = (delta, 0) if c.name == "hscroll" else (0, -delta)
            wheel.create_scroll(target[0], target[1], dx, dy, 0, "viewport")
            ActionBuilder(self.driver, wheel=wheel).perform()
            self._mouse = target
            return
        else:
            self._type(c)
            return
        ActionBuilder(self.driver, mouse=mouse).perform()
        self._mouse = target

    def _type(self, c: Command) -> None:
        keyboard = KeyInput(interaction.KEY)
        if c.name == "write":
            keys = [TEXT_KEYS.get(ch, ch) for ch in c.text]
        else:
            keys = [KEYS.get(k, k) for k in c.keys]
        if c.name in ("write", "press"):
            for key in keys:
                keyboard.create_key_down(key)
                keyboard.create_key_up(key)
        elif c.name == "hotkey":
            for key in keys:
                keyboard.create_key_down(key)
            for key in reversed(keys):
                keyboard.create_key_up(key)
        elif c.name == "keyDown":
            keyboard.create_key_down(keys[0])
        elif c.name == "keyUp":
            keyboard.create_key_up(keys[0])
        else:
            raise ValueError(f"unknown command {c.name!r}")
        if keys:
            ActionBuilder(self.driver, keyboard=keyboard).perform()
