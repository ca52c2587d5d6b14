"""AgentGym's env servers (WebArena, TextCraft, BabyAI, ...): an Env kind for text agents.

One server per env; `env.agentgym.env` names its preset (agentgym_presets.py).
An episode creates an env instance, resets it to the task's number, then
alternates observe / step; its reward is the last step's (AgentGym's rule).

Whose fault: connection errors, 5xx, 429, FastAPI's 422, an `{"error": ...}`
answer and WebArena's "TimeoutError" observation are the env's (EnvError,
retried by the queue). An action the env does not understand is part of the
episode: the env says so in its next observation.
"""

import math
import time

from .._util.budget import Budget
from .._util.httpclient import Client
from .._util.retry import with_retries
from .._util.text import clip
from ..errors import EnvError, TaskRefused
from ..tasks import Task
from . import Evaluation, Observation, StepResult
from .agentgym_presets import IDX, PRESETS, Preset, wire_action

MAX_OBSERVATION_CHARS = 1_000_000  # a web page's accessibility tree is tens of KB; more is not an observation


class AgentGymEnv:
    def __init__(self, url: str, env: str, token: str | None = None, timeout_s: float = 60.0, retries: int = 3):
        self.name = env
        self.preset: Preset = PRESETS[env]
        self.base = url.rstrip("/") + self.preset.base
        self.http = Client(token)
        self.timeout_s = timeout_s
        self.retries = retries

    @classmethod
    def from_config(cls, cfg, url: str, secrets: dict) -> "AgentGymEnv":
        e = cfg.env
        return cls(url, e.agentgym.env, secrets.get("env"), e.timeout_s, e.retries)

    def call(self, what: str, method: str, route: str, budget: Budget, body=None, params=None,
             idempotent: bool = True):
        """One request, retried while that is safe; the answer's JSON, checked for an `error`."""
        def once():
            r = self.http.request(method, f"{self.base}/{route}", budget.timeout(self.timeout_s), json=body,
                                  params=params)
            r.raise_for_status()
            return r

        r = with_retries(once, self.retries, f"{self.name} {what}", budget.should_stop, idempotent=idempotent,
                         error=EnvError, deadline=budget.deadline)
        try:
            data = r.json()
        except (ValueError, RecursionError):
            raise EnvError(f"{self.name} {what}: answer is not JSON: {clip(r.text, 500)!r}") from None
        if isinstance(data, dict) and "error" in data:
            raise EnvError(f"{self.name} {what}: {clip(str(data['error']), 500)}")
        return data

    def allocate(self, task: Task, budget: Budget, leases=None) -> "AgentGymSession":
        spec = task.config.get("agentgym")
        idx = spec.get("idx") if isinstance(spec, dict) else None
        if not isinstance(spec, dict) or spec.get("env") != self.name or type(idx) is not int or idx < 0:
            raise TaskRefused(f"task {task.task_id!r} is not a task of the {self.name} server "
                              f"(its config needs {{\"agentgym\": {{\"env\": \"{self.name}\", \"idx\": N}}}})")
        # Not repeated on a lost answer: a second /create would leave the first instance behind.
        data = self.call("create", "POST", "create", budget, self.preset.create_body, idempotent=False)
        env_id = data if self.preset.create_answers_int else (data.get(self.preset.id_field)
                                                              if isinstance(data, dict) else None)
        if type(env_id) is not int:
            raise EnvError(f"{self.name} create: no env id in the answer: {clip(str(data), 200)}")
        session = AgentGymSession(self, env_id)
        t = time.monotonic()
        try:
            session.reset(idx, budget)
        except BaseException:
            session.release(budget.unhurried())
            raise
        session.setup_s = time.monotonic() - t
        return session


class AgentGymSession:
    instruction = None  # the task statement is in the first observation
    setup_s = 0.0

    def __init__(self, env: AgentGymEnv, env_id: int):
        self.env = env
        self.id = env_id
        self.latest: str | None = None   # the observation the last step answered
        self.reward = 0.0
        self.done = False

    def _body(self, **extra) -> dict:
        return {self.env.preset.id_field: self.id, **extra}

    def reset(self, idx: int, budget: Budget) -> None:
        body = self._body(**{k: idx if v == IDX else v for k, v in self.env.preset.reset_body.items()})
        data = self.env.call("reset", "POST", "reset", budget, body)
        if isinstance(data, dict) and data.get("observation") == "TimeoutError":  # WebArena's failed reset
            raise EnvError(f"{self.env.name} reset: the env answered TimeoutError")
        keys = self.env.preset.reset_observation
        if keys:  # e.g. SciWorld states the task beside the first observation, not in it
            if not isinstance(data, dict):
                raise EnvError(f"{self.env.name} reset: expected an object, got {clip(str(data), 200)}")
            self.latest = self._with_actions("\n".join(_text(data.get(k), self.env.name, "reset") for k in keys),
                                             data)

    def _with_actions(self, text: str, data: dict) -> str:
        """The observation, with the actions the env lists beside it (ALFWorld) appended."""
        actions = data.get(self.env.preset.actions_key) if self.env.preset.actions_key else None
        if isinstance(actions, list) and all(isinstance(a, str) for a in actions):
            return f"{text}\nAvailable actions: {', '.join(actions)}"
        return text

    def observe(self, budget: Budget) -> Observation:
        if self.latest is None:
            p = self.env.preset
            data = self.env.call("observation", "GET", "observation", budget, params={p.id_field: self.id})
            value = data.get(p.observation_key) if p.observation_key and isinstance(data, dict) else data
            self.latest = _text(value, self.env.name, "observation")
        return Observation(text=self.latest)

    def act(self, actions: list, budget: Budget, sent: list) -> StepResult:
        """One step per action (text agents give one); the episode's reward is the last step's."""
        p = self.env.preset
        for action in actions:
            sent.append(wire_action(p, action))
            data = self.env.call("step", "POST", "step", budget, self._body(action=sent[-1]), idempotent=False)
            if not isinstance(data, dict):
                raise EnvError(f"{self.env.name} step: expected an object, got {clip(str(data), 200)}")
            self.latest = self._with_actions(_text(data.get(p.step_observation), self.env.name, "step"), data)
            reward = data.get(p.reward_key)
            reward = 0.0 if reward is None else reward
            if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
                raise EnvError(f"{self.env.name} step: {p.reward_key} is not a finite number: {clip(str(reward), 100)}")
            self.done = any(data.get(k) is True for k in p.done_keys)
            self.reward = float(reward) if self.done or not p.reward_when_done else 0.0
            if self.done:
                break
        info = data.get("info")
        return StepResult(self.done, self.reward, info if isinstance(info, dict) else {})

    def evaluate(self, budget: Budget, ended: str | None = None) -> Evaluation:
        """The last step's reward, as the preset scores it; nothing to ask the server."""
        p = self.env.preset
        score = (1.0 if self.reward > 0 else 0.0) if p.binary else min(max(self.reward / p.reward_scale, 0.0), 1.0)
        return Evaluation(self.reward, score)

    def release(self, budget: Budget) -> None:
        self.latest = None  # a released env has nothing more to show
        if self.env.preset.has_close:
            self.env.call("close", "POST", "close", budget, self._body())


def _text(value, env: str, what: str) -> str:
    if not isinstance(value, str):
        raise EnvError(f"{env} {what}: the observation is not text: {clip(str(value), 200)}")
    if len(value) > MAX_OBSERVATION_CHARS:
        raise EnvError(f"{env} {what}: an observation of {len(value)} characters")
    return value
