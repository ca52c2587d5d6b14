"""OSWorld desktops: an Env kind. One fresh desktop per episode, as DART-GUI's rollouter gets them.

Desktops come through DART's allocation protocol (osworld/allocation.py) from the servers the
rollout was given: DART's own, remote `cua env-server --backend desktop` hosts, the local one
(`env.url: local`), or the allocator a rollout runs over a fixed list of desktops. Each
desktop allocated is written to the run's leases.jsonl before it is used. The episode then
runs as OSWorld's DesktopEnv runs it: the task's `config` steps, a screenshot each step (and
the accessibility tree when the agent reads it, `agent.observation`), pyautogui code through
`/execute` with OSWorld's prefix, WAIT/DONE/FAIL, and the evaluator on the client. With
`env.osworld.record` the desktop records its screen from the end of setup to the episode's end
(OSWorld's /start_recording and /end_recording), kept as the attempt's episode.mp4.
"""

import shutil
import tempfile
import time
from pathlib import Path

from .._util.budget import Budget
from .._util.diag import warn
from .._util.png import png_size
from ..actions import Action, to_command
from ..errors import EnvError, EpisodeEnd, EvalError
from ..osworld.a11y_tree import parse
from ..osworld.allocation import Allocation, Allocator
from ..osworld.desktop_api import ApiSettings, DesktopAPI
from ..osworld.evaluator import evaluate
from ..osworld.local_files import Downloads
from ..osworld.setup import SetupContext, run_steps
from ..osworld.support import steps_and_evaluator
from ..runfolder.leases import held_record, released_record
from ..tasks import Task
from . import AttemptFiles, Evaluation, Observation, StepResult

# How the episode's end reads as OSWorld's last action: its infeasible tasks want a FAIL.
LAST_ACTION = {"fail": "FAIL", "call_user": "FAIL", "finished": "DONE", "human_fail": "FAIL", "human_finished": "DONE"}


class _Nowhere:
    """Files of an attempt nobody keeps (a task check's allocation)."""

    def lease(self, record: dict) -> None:
        pass

    def video(self, mp4: bytes) -> str:
        return ""


class OSWorldEnv:
    def __init__(self, allocator: Allocator, settings: ApiSettings, pause_s: float, settle_s: float,
                 cache_dir: Path | None, files_dir: Path | None, a11y_tree: bool = False, record: bool = False):
        self.allocator = allocator
        self.record = record  # keep a video of each episode
        self.a11y_tree = a11y_tree  # the agent reads the accessibility tree: fetch it with each screenshot
        self.settings = settings
        self.pause_s, self.settle_s = pause_s, settle_s
        self.cache_dir = cache_dir or Path(tempfile.mkdtemp(prefix="cua-osworld-cache-"))
        self.downloads = Downloads(self.cache_dir, files_dir)
        self.files_dir = files_dir

    @classmethod
    def from_config(cls, cfg, url: str, secrets: dict) -> "OSWorldEnv":
        e, o = cfg.env, cfg.env.osworld
        servers = ([url] if url else []) + [s for s in o.servers if s != url]
        allocator = Allocator(servers, secrets.get("env"), wait_s=e.allocate_wait_s)
        return cls(allocator, ApiSettings("", e.timeout_s, retries=e.retries), o.pause_s, o.settle_s,
                   cfg.resolve_path(o.cache_dir) if o.cache_dir else None,
                   cfg.resolve_path(o.files_dir) if o.files_dir else None, cfg.agent.observation != "screenshot",
                   o.record)

    def allocate(self, task: Task, budget: Budget, files: AttemptFiles = _Nowhere()) -> "OSWorldSession":
        """A fresh desktop with the task's setup steps run; released again if they fail."""
        steps, _ = steps_and_evaluator(task.to_dict())
        got = self.allocator.allocate(budget)
        files.lease(held_record(got.server, got.desktop_id, api=got.api, task_id=task.task_id))
        session = OSWorldSession(self, got, task, files)
        t = time.monotonic()
        try:
            run_steps(steps, session.setup, budget)
            if self.settle_s:
                time.sleep(min(self.settle_s, max(0.0, budget.deadline - time.monotonic())))
            if self.record:
                session.api.start_recording(budget)
                session.recording = True
        except BaseException:
            session.release(budget.unhurried())
            raise
        session.setup_s = time.monotonic() - t
        return session


class OSWorldSession:
    instruction = None  # OSWorld's tasks always state theirs
    setup_s = 0.0

    def __init__(self, env: OSWorldEnv, got: Allocation, task: Task, files: AttemptFiles):
        self.env, self.got, self.task, self.files = env, got, task, files
        self.recording = False
        s = env.settings
        self.api = DesktopAPI(ApiSettings(got.api, s.timeout_s, s.exec_timeout_s, s.retries, got.apps))
        self.folder = Path(tempfile.mkdtemp(prefix="cua-osworld-episode-"))
        self.setup = SetupContext(self.api, env.downloads, self.folder, env.files_dir)
        self.last_action: str | None = None
        self.released = False

    def observe(self, budget: Budget) -> Observation:
        png = self.api.screenshot(budget)
        size = png_size(png)
        if size is None:
            raise EnvError("screenshot: not a PNG image")
        obs = Observation(png, *size)
        if self.env.a11y_tree:  # as OSWorld's DesktopEnv with require_a11y_tree: the screenshot is still taken
            tree = self.api.accessibility(budget)
            if not isinstance(tree, str):
                raise EnvError(f"accessibility tree: the desktop sent {type(tree).__name__}, not XML")
            try:
                parse(tree)
            except ValueError as e:
                raise EnvError(f"accessibility tree: {e}") from None
            obs.a11y_tree = tree
        return obs

    def act(self, actions: list, budget: Budget, sent: list) -> StepResult:
        """Each action as OSWorld's DesktopEnv.step takes it: code through /execute, WAIT a pause."""
        for action in actions:
            code = to_command(action) if isinstance(action, Action) else action
            if code is None or code == "DONE":
                continue
            sent.append(code)
            self.last_action = code
            if code != "WAIT":  # what the code itself prints or raises is the desktop's, as in OSWorld
                self.api.run_pyautogui(code, budget)
            if self.env.pause_s:
                time.sleep(min(self.env.pause_s, max(0.0, budget.deadline - time.monotonic())))
        return StepResult()

    def evaluate(self, budget: Budget, ended: str | None = None) -> Evaluation:
        last = LAST_ACTION.get(ended, self.last_action)
        try:
            score = evaluate(self.task.evaluator, last, self.setup, budget)
        except EpisodeEnd:  # the desktop's, the task's or a stop: not a metric that broke
            raise
        except Exception as e:  # a metric that raises on what a getter brought back
            raise EvalError(f"evaluate: {type(e).__name__}: {e}") from None
        return Evaluation(score, score)

    def release(self, budget: Budget) -> None:
        if self.released:
            return
        self.released = True
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.recording:
            self._keep_video(budget)
        self.env.allocator.release(self.got.server, self.got.desktop_id, budget)
        self.files.lease(released_record(self.got.server, self.got.desktop_id))

    def _keep_video(self, budget: Budget) -> None:
        """The episode's mp4 into its folder. A video that cannot be had costs the episode nothing."""
        try:
            self.files.video(self.api.end_recording(budget))
        except (EpisodeEnd, OSError) as e:  # the desktop failed or stopped at a limit; a full disk
            warn(f"task {self.task.task_id!r}: no episode video: {e}")
