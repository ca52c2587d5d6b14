"""The episode loop: allocate, (observe -> agent -> act)*, evaluate, release.

It speaks only the Env, Agent and Model seams. Agent mistakes end a step
inside the agent (the turn's `stop`); errors of the error tree end the
episode with their own stop reason; a run file or folder the attempt would
write through (a link planted in the run folder), or a screenshot it reads
back changed, is `runner_error` naming it;
anything else is a bug in cua, logged with its traceback and recorded as
`runner_error`. Every step that got an
observation has its traj.jsonl line, however it ended.

An episode is a coroutine on its runner's event loop: it waits on the env, the
model and the run folder's writes (writes.py).
"""

import asyncio
import dataclasses
import sys
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass

from .._util.budget import Budget
from .._util.diag import warn
from .._util.interrupt import Interrupt
from ..agents import Agent, Turn
from ..envs import AttemptFiles, Env
from ..errors import Abandoned, ActionRefused, DesktopLimit, EpisodeEnd, Stopped, UnreadableRun, UnwritableRun
from ..models import Model, by_file
from ..runfolder import takeover
from ..runfolder.records import PHASES, attempt_line, step_line, turn_fields
from ..runfolder.writer import traj_rel
from ..tasks import Task
from .writes import AttemptWriter

MAX_ERROR_CHARS = 2000  # error text kept in records, cut only after secrets are masked
HOLD_POLL_S = 0.25      # while a person holds the desktop: how often their wish is read again
HUMAN_ENDS = {"finished": "human_finished", "fail": "human_fail"}  # a person's verdict, as a stop reason


@dataclass
class Limits:
    max_steps: int
    step_timeout_s: float
    episode_timeout_s: float


class Phases:
    """Seconds per phase of one attempt (records.PHASES), counted however a phase ends."""

    def __init__(self):
        self.s = dict.fromkeys(PHASES, 0.0)

    @contextmanager
    def timed(self, phase: str):
        t = time.monotonic()
        try:
            yield
        finally:
            self.s[phase] += time.monotonic() - t

    def record(self, duration_s: float) -> dict:
        self.s["other_s"] = max(0.0, duration_s - sum(v for k, v in self.s.items() if k != "other_s"))
        return {k: round(v, 4) for k, v in self.s.items()}


@dataclass
class Episode:
    item: dict           # the queue item: task, sample, attempt
    task: Task
    traj: AttemptWriter  # where the attempt's steps go: its folder, or a stream to the run's owner
    env: Env
    model: Model
    agent: Agent
    limits: Limits
    interrupt: Interrupt  # set when the run stops: wakes the episode's waits
    redact: object       # str -> str: masks secrets
    record_prompt: bool = False

    async def run_episode(self) -> dict:
        """Play one attempt; always returns its episode line."""
        budget = Budget(self.limits.step_timeout_s, time.monotonic() + self.limits.episode_timeout_s,
                        self.interrupt.is_set, self.interrupt)
        self.phases = Phases()
        return await run_attempt(self.item, self.task, self.traj, self.env, budget, self.phases, self.redact,
                                 lambda session, rec: self._play(session, rec, self.traj, budget))

    async def _play(self, session, rec: dict, traj: AttemptWriter, budget: Budget) -> str:
        """Steps until the agent stops or a limit hits; returns the stop reason."""
        model = self.model.session(self.task.task_id, self.item["sample"])
        line = 0  # traj.jsonl's lines: the agent's steps and the spans a person held the desktop
        try:
            agent = self.agent.start(rec["instruction"], model)
            for _ in range(self.limits.max_steps):
                if budget.should_stop():
                    raise Stopped()
                if traj.takeover() == takeover.HOLD:  # a file read: a person asked for the desktop
                    stop, budget = await self._hold(line, session, traj, budget, rec)
                    line += 1
                    if stop:
                        return stop
                stop = await self._step(line, session, agent, traj, budget, rec)
                line += 1
                if stop:
                    return stop
            return "max_steps"
        finally:
            model.close()

    async def _hold(self, step: int, session, traj: AttemptWriter, budget: Budget,
                    rec: dict) -> tuple[str | None, Budget]:
        """A person holds the desktop: the model is not asked and no deadline runs until they give it
        back (None) or end the episode (its stop reason). One traj.jsonl line, `actor: human`, with the
        screen they took over, stands for what they did; the budget goes on with the held time added."""
        t0, wall = time.monotonic(), time.time()
        obs = await session.observe(budget)
        if obs.screenshot is not None:
            obs.file = traj.screenshot(step, obs.screenshot)
            obs.reread = traj.rereader(obs.file)
        line = step_line(step, wall, obs, actor="human")
        line["timings"]["env_s"] = round(time.monotonic() - t0, 4)
        rec["steps"] = step + 1
        traj.holding(True)
        wish = takeover.HOLD
        try:
            while wish == takeover.HOLD:
                if budget.should_stop():
                    raise Stopped()
                await asyncio.sleep(HOLD_POLL_S)
                wish = traj.takeover()
        finally:
            traj.holding(False)
            held = time.monotonic() - t0
            rec["held_s"] = round(rec.get("held_s", 0.0) + held, 3)
            rec["human_steps"] = rec.get("human_steps", 0) + 1
            line["action"] = [{"type": "takeover", "held_s": round(held, 3), "ended": wish}]
            await traj.step(line)
        if wish == "abandon":
            raise Abandoned("a person who took the episode over abandoned it")
        return HUMAN_ENDS.get(wish), dataclasses.replace(budget, deadline=budget.deadline + held)

    async def _step(self, step: int, session, agent, traj: AttemptWriter, budget: Budget, rec: dict) -> str | None:
        """Observe, ask, act (asking again while the env refuses); the stop reason, or None to go on."""
        t0, wall = time.monotonic(), time.time()
        obs = await session.observe(budget)
        if obs.screenshot is not None:
            obs.file = traj.screenshot(step, obs.screenshot)
            obs.reread = traj.rereader(obs.file)
        if obs.a11y_tree is not None:
            obs.a11y_file = traj.a11y_tree(step, obs.a11y_tree)
        line = step_line(step, wall, obs)
        timings = line["timings"]
        timings["env_s"] = time.monotonic() - t0
        rec["steps"] = step + 1
        turn, error = Turn(), None
        try:
            await agent.ask(obs, turn, budget)
            while turn.error is None and turn.send:
                t = time.monotonic()
                try:
                    result = await session.act(turn.send, budget, turn.sent)
                except ActionRefused as e:
                    refusal = self._masked(str(e))
                else:
                    return turn.stop or ("env_done" if result.done else None)
                finally:
                    timings["act_s"] += time.monotonic() - t
                await agent.refused(turn, refusal, budget)
            return turn.stop
        except BaseException as e:
            error = self._masked(str(e) if isinstance(e, EpisodeEnd) else _last_line(e))
            raise
        finally:
            # Written however the step ended: a trainer sees every answer the model gave.
            line.update(turn_fields(turn))
            if error is not None:  # what ended the step, not the answer it was re-asking after
                line["error"] = error
            timings["model_s"] = turn.model_s
            for phase, key in (("observe_s", "env_s"), ("model_s", "model_s"), ("act_s", "act_s")):
                self.phases.s[phase] += timings[key]
            timings.update((k, round(v, 4)) for k, v in timings.items())
            if self.record_prompt and turn.prompt is not None:
                line["prompt"] = by_file(turn.prompt)
            await traj.step(line)

    def _masked(self, text: str) -> str:
        return masked(self.redact, text)


async def run_attempt(item: dict, task: Task, files: AttemptFiles, env: Env, budget: Budget, phases: Phases, redact,
                      play) -> dict:
    """An attempt's life: allocate an env, `await play(session, rec) -> stop reason`, evaluate, release; its
    episode line, however it ends. The budget's deadline runs from its allocation on."""
    rec = attempt_line(item, task, traj_rel(task.task_id, item["sample"], item["attempt"]))
    start = time.monotonic()
    rec["started_at"] = round(time.time(), 3)
    session = None
    try:
        with phases.timed("allocate_s"):
            session = await env.allocate(task, budget, files)  # its leases go to the run folder
        setup = min(getattr(session, "setup_s", 0.0), phases.s["allocate_s"])
        phases.s["allocate_s"] -= setup
        phases.s["setup_s"] += setup
        rec["instruction"] = task.instruction or session.instruction or ""
        rec["stop_reason"] = await play(session, rec)
        # The episode has ended: neither a Ctrl-C nor the deadline may throw its score away now.
        with phases.timed("evaluate_s"):
            result = await session.evaluate(budget.unhurried(), rec["stop_reason"])
        rec.update(reward=result.reward, score=result.score, outcome="success" if result.score == 1.0 else "failure")
    except EpisodeEnd as e:
        rec["stop_reason"], rec["error"] = e.stop_reason, str(e)
        if isinstance(e, DesktopLimit):  # what ran on the desktop took it over: the agent's doing
            rec.update(outcome="failure", reward=0.0, score=0.0, desktop_limit=e.kind)
    except (UnwritableRun, UnreadableRun) as e:  # a link planted, a file changed in the run folder; the queue retries
        warn(redact(f"task {task.task_id!r}: {e}"))
        rec["stop_reason"], rec["error"] = "runner_error", str(e)
    except Exception as e:  # a bug in cua: keep its traceback, the record and the claim
        sys.stderr.write(redact(f"cua bug in task {task.task_id!r}:\n{traceback.format_exc()}"))
        rec["stop_reason"], rec["error"] = "runner_error", _last_line(e)
    finally:
        if session is not None:
            try:
                with phases.timed("release_s"):
                    await session.release(budget.unhurried())
            except (EpisodeEnd, UnwritableRun) as e:  # the latter: its lease's line, refused; the play stands
                rec["release_error"] = masked(redact, str(e))
        rec["duration_s"] = round(time.monotonic() - start, 3)
        rec["phases"] = phases.record(rec["duration_s"])
        if rec["error"]:
            rec["error"] = masked(redact, rec["error"])
    return rec


def masked(redact, text: str) -> str:
    """Masked first, then cut: a cut must never leave part of a secret behind."""
    text = redact(text)
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + " [...]"


def _last_line(e: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(e), e)).strip()
