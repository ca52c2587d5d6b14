"""One demonstration: a fresh desktop set up for the task, a person's gestures on it recorded as the
attempt's steps, then the task's evaluator.

The attempt is held from its start (runfolder/takeover.py), so the watch page hands the person the
mouse and keyboard at once. The desktop's input log (guest/input_log.py) is read POLL_S apart;
gestures.py turns its events into actions, and each becomes one traj.jsonl line, actor `human`,
with the screen shown when the gesture began. The line is written through the configured agent as
if its model had answered the action (`Agent.answer_for`): the same prompt, history, fields and
parsed action as an agent's step, with `commands` the action in OSWorld's pyautogui code. The
person ends the demonstration on the page: done (`human_finished`, a last step `finished()`),
infeasible (`human_fail`, `call_user()`: FAIL to OSWorld's evaluator), or abandon (unscored).

The attempt's life is the episodes' own coroutine (rollout.episode.run_attempt) on a loop of its own;
with one attempt on it, the desktop's calls are made in place.
"""

import asyncio
import time

from .._util.budget import Budget
from .._util.png import png_size
from ..actions import Action, osworld_command
from ..agents import Turn
from ..envs import Observation
from ..errors import Abandoned, EnvError, EpisodeEnd, Stopped
from ..models import Reply, by_file
from ..rollout.episode import HUMAN_ENDS, Phases, run_attempt
from ..runfolder import takeover
from ..runfolder.records import step_line, turn_fields
from ..runfolder.writer import TrajWriter
from ..tasks import Task
from .gestures import Event, Gestures

POLL_S = 0.25
ENDING = {"finished": Action("finished", text=""), "fail": Action("call_user")}


class _Told:
    """The model session of a demonstration: it answers what the person did."""

    def __init__(self):
        self.answer = ""

    async def complete(self, messages: list[dict], params) -> Reply:
        return Reply(self.answer, "human")

    def close(self) -> None:
        pass


class Demonstration:
    def __init__(self, item: dict, task: Task, traj: TrajWriter, env, agent, step_timeout_s: float,
                 should_stop, redact, hold, heartbeat, heartbeat_s: float):
        self.item, self.task, self.traj, self.env, self.agent = item, task, traj, env, agent
        self.budget = Budget(step_timeout_s, should_stop=should_stop)  # a person has no deadline
        self.redact = redact
        self.hold = hold            # () -> None: take the attempt over (the watch page gets the desktop)
        self.heartbeat = heartbeat  # () -> None: keep the claim's lease fresh, every heartbeat_s
        self.heartbeat_s = heartbeat_s

    def run(self, on_ready) -> dict:
        """Record the demonstration; its episode line, whatever happens. `on_ready()` once the desktop is
        the person's."""
        async def play(session, rec: dict) -> str:
            rec.update(demo=True, human_steps=0)
            return await self._record(session.inner, rec, on_ready)
        return asyncio.run(run_attempt(self.item, self.task, self.traj, self.env, self.budget, Phases(),
                                       self.redact, play))

    async def _record(self, session, rec: dict, on_ready) -> str:
        api = session.api  # an OSWorld desktop's (driver.py allows env.kind osworld only)
        try:
            api.input_start(self.budget)
        except EnvError as e:
            raise EnvError(f"the desktop records no input (a demonstration needs cua's own desktops: "
                           f"env.url local, or a `cua env-server --backend desktop`): {e}") from None
        self.traj.holding(True)
        self.hold()
        on_ready()
        model = _Told()
        play = _Play(self, session, rec, model, self.agent.start(rec["instruction"], model))
        try:
            wish = await self._until_ended(play)
            if wish == "abandon":
                raise Abandoned("the person recording the demonstration abandoned it")
            await play.end(ENDING[wish])
        finally:
            self.traj.holding(False)
            try:
                api.input_stop(self.budget.unhurried())
            except EpisodeEnd:
                pass  # the desktop is released next: its input log goes with it
        return HUMAN_ENDS[wish]

    async def _until_ended(self, play: "_Play") -> str:
        """Read the person's gestures until they end the demonstration: their ending (takeover.ENDINGS)."""
        beat = time.monotonic()
        while True:
            wish = self.traj.takeover()
            await play.read()
            if wish in takeover.ENDINGS:
                return wish
            if wish != takeover.HOLD:  # a hold gone stale (the page's server stalled): the person is still here
                self.hold()
            if self.budget.should_stop():
                play.gestures.flush()
                await play.write()
                raise Stopped()
            if time.monotonic() - beat > self.heartbeat_s:
                self.heartbeat()
                beat = time.monotonic()
            await asyncio.sleep(POLL_S)


class _Play:
    """The input log read so far, the gestures it made, and the steps written from them."""

    def __init__(self, demo: Demonstration, session, rec: dict, model: _Told, agent_episode):
        self.demo, self.session, self.rec, self.model, self.agent = demo, session, rec, model, agent_episode
        self.api = session.api
        self.gestures = Gestures()
        self.after = 0               # the last event seq read
        self.shots: dict[int, bytes] = {}  # frame id -> PNG, for gestures begun
        self.clock = 0.0             # host wall time minus the desktop's monotonic clock
        self.step = 0

    async def read(self) -> None:
        """New events into gestures, the screens they began on fetched, finished gestures written."""
        budget = self.demo.budget.unhurried()
        got = self.api.input_read(self.after, budget)
        self.clock = time.time() - got["now"]
        for raw in got["events"]:
            try:
                ev = Event.from_dict(raw)
                seq = int(raw["seq"])
            except (ValueError, KeyError, TypeError) as e:
                raise EnvError(str(e)) from None
            if seq <= self.after:
                continue
            self.after = seq
            self.gestures.add(ev)
        self.gestures.expire(got["now"])
        for fid in self.gestures.frames() - self.shots.keys():
            # A frame gone (the page's server stalled past the log's keep): the screen as it is now.
            self.shots[fid] = self.api.input_frame(fid, budget) or self.api.screenshot(budget)
        await self.write()

    async def write(self, final: bool = False) -> None:
        for g in self.gestures.take(everything=final):
            await self._line(g.action, self.shots[g.frame], g.t + self.clock, {"human_s": round(g.end - g.t, 4)},
                       {"held_keys": list(g.held)} if g.held else {})
        keep = self.gestures.frames()
        self.shots = {fid: png for fid, png in self.shots.items() if fid in keep}

    async def end(self, action: Action) -> None:
        """The person's verdict as the last step, on the screen they gave it on."""
        await self.read()
        self.gestures.flush()
        await self.write(final=True)
        await self._line(action, self.api.screenshot(self.demo.budget.unhurried()), time.time(), {}, {})

    async def _line(self, action: Action, png: bytes, wall: float, timings: dict, extra: dict) -> None:
        size = png_size(png)
        if size is None:
            raise EnvError("the desktop's screen is not a PNG")
        obs = Observation(png, *size)
        obs.file = self.demo.traj.screenshot(self.step, png)
        line = step_line(self.step, wall, obs, actor="human")
        line["timings"].update(timings)
        turn = Turn()
        self.model.answer = self.demo.agent.answer_for(action, *size)
        await self.agent.ask(obs, turn, self.demo.budget.unhurried())
        line.update(turn_fields(turn))
        line["commands"] = [osworld_command(action)]
        line["prompt"] = by_file(turn.prompt) if turn.prompt is not None else None
        line.update(extra)
        self.demo.traj.step(line)
        self.step += 1
        self.rec["steps"] = self.rec["human_steps"] = self.step

