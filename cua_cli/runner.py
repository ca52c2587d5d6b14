"""The episode loop: allocate, (screenshot -> model -> parse -> act)*, evaluate, release.

Agent failures (bad answers, running out of steps) and infrastructure
errors (env, model server, evaluator) are kept apart: only the latter give
outcome "error", and the queue retries those.
"""

import io
import time
import traceback
from dataclasses import dataclass

from PIL import Image

from .actions import TERMINAL, to_command
from .agents.uitars import ParseError, UITarsAgent
from .episodes import error_line
from .models import Request
from .retry import InfraError, Stopped
from .rundir import RunDir, TrajWriter
from .tasks import task_from_dict


@dataclass
class Limits:
    max_steps: int
    step_timeout_s: float
    episode_timeout_s: float
    parse_retries: int


class Episode:
    def __init__(self, item: dict, run: RunDir, env, provider, agent: UITarsAgent, limits: Limits,
                 should_stop, redact, record_prompt: bool = False):
        self.item = item
        self.task = task_from_dict(item)
        self.run = run
        self.env = env
        self.provider = provider
        self.agent = agent
        self.limits = limits
        self.should_stop = should_stop
        self.redact = redact
        self.record_prompt = record_prompt
        self.deadline = 0.0

    def _timeout(self) -> float:
        """Per-request timeout: the step limit, cut short by the episode deadline."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError()
        return min(self.limits.step_timeout_s, left)

    def run_episode(self) -> dict:
        """Play one attempt; always returns its episode record (see README)."""
        t, item = self.task, self.item
        rel = self.run.traj_rel(t.task_id, item["sample"], item["attempt"])
        rec = error_line(item, "env_error", traj=rel)
        rec.update(domain=t.domain, instruction=t.instruction,
                   evaluator_func=t.evaluator.get("func") if isinstance(t.evaluator.get("func"), str) else None)
        start = time.monotonic()
        self.deadline = start + self.limits.episode_timeout_s
        session = None
        phase = "env_error"
        try:
            session = self.env.allocate(t.task_id, t.config, self.should_stop, self._timeout())
            rec["instruction"] = t.instruction or session.instruction or ""
            stop = self._loop(session, rec["instruction"], TrajWriter(self.run, rel), rec)
            rec["stop_reason"] = stop
            phase = "eval_error"
            # A Ctrl-C now must not throw away an episode that has already ended.
            result = session.evaluate(t.evaluator, self._timeout(), lambda: False)
            reward = float(result["result"])
            rec["reward"] = float(result.get("reward", reward))
            rec["score"] = min(max(reward, 0.0), 1.0)
            rec["outcome"] = "success" if rec["score"] == 1.0 else "failure"
        except Stopped:
            rec["stop_reason"], rec["error"] = "interrupted", "the run was stopped"
        except TimeoutError:
            # The episode deadline hit inside the loop or evaluation: no score to report.
            rec["stop_reason"], rec["error"] = "timeout", f"episode exceeded {self.limits.episode_timeout_s} s"
        except InfraError as e:
            rec["stop_reason"] = getattr(e, "phase", None) or phase
            rec["error"] = str(e)
        except (KeyError, TypeError, ValueError) as e:
            rec["stop_reason"] = phase
            rec["error"] = f"bad answer from the env: {type(e).__name__}: {e}"
        except Exception as e:  # a bug must not lose the record or the claim
            rec["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()
        finally:
            if session is not None:
                try:
                    session.release(self.limits.step_timeout_s)
                except InfraError as e:
                    rec["release_error"] = self.redact(str(e))
            rec["duration_s"] = round(time.monotonic() - start, 3)
            if rec["error"]:
                rec["error"] = self.redact(rec["error"])
        return rec

    def _loop(self, session, instruction: str, traj: TrajWriter, rec: dict) -> str:
        """Steps until the agent stops or a limit hits; returns the stop reason."""
        model = self.provider.episode(self.task.task_id, self.item["sample"])
        try:
            return self._steps(session, instruction, traj, rec, model)
        finally:
            model.close()

    def _steps(self, session, instruction: str, traj: TrajWriter, rec: dict, model) -> str:
        history: list[list] = []  # [png or None, response, file name]; old pngs are dropped
        keep = self.agent.history_images
        for step in range(self.limits.max_steps):
            if self.should_stop():
                raise Stopped()
            t0, t_wall = time.monotonic(), time.time()
            png = session.screenshot(self._timeout(), self.should_stop)
            width, height = Image.open(io.BytesIO(png)).size  # reads the header only
            shot = traj.screenshot(step, png)
            t1 = time.monotonic()
            messages = self.agent.build_messages(instruction, [(h[0], h[1]) for h in history], png)
            text, parsed, tries, endpoint, reply = "", None, 0, None, None
            for tries in range(self.limits.parse_retries + 1):
                try:
                    reply = model.complete(Request(messages, step, width, height, self.should_stop,
                                                   self._timeout()))
                except InfraError as e:
                    e.phase = "model_error"
                    raise
                text, endpoint = reply.text, reply.endpoint
                try:
                    parsed = self.agent.parse(text, width, height)
                    break
                except ParseError as e:
                    parse_error = str(e)
            t2 = time.monotonic()
            record = {"step": step, "time": round(t_wall, 3), "screenshot": shot, "response": text,
                      "endpoint": endpoint, "model_version": reply.model_version, "parse_retries": tries,
                      "width": width, "height": height}
            if self.record_prompt:
                record["prompt"] = _images_by_name(messages, [h[2] for h in history if h[0] is not None] + [shot])
            if reply.token_ids is not None:
                record.update(token_ids=reply.token_ids, logprobs=reply.logprobs)
            rec["steps"] = step + 1
            if parsed is None:
                record.update(action=None, error=parse_error, timings=_timings(t0, t1, t2, t2))
                traj.step(record)
                return "parse_error"
            commands = []
            stop, env_done = None, False
            for action in parsed.actions:
                if action.type in TERMINAL:
                    stop = "finished" if action.type == "finished" else "call_user"
                    break
                command = to_command(action)
                commands.append(command)
                data = session.execute(command, self._timeout(), self.should_stop)
                env_done = env_done or bool(isinstance(data, dict) and data.get("done"))
            t3 = time.monotonic()
            record.update(thought=parsed.thought, action=[a.to_dict() for a in parsed.actions],
                          commands=commands, timings=_timings(t0, t1, t2, t3))
            traj.step(record)
            history.append([png, text, shot])
            for old in history[:-max(keep - 1, 0)] if keep > 1 else history:
                old[0] = None  # the next prompt shows only the last `keep` screenshots
            if stop:
                return stop
            if env_done:
                return "env_done"
        return "max_steps"


def _images_by_name(messages: list[dict], names: list[str]) -> list[dict]:
    """The messages as sent, with each inlined image replaced by its screenshot's file name."""
    names = iter(names)
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, list):
            content = [{"type": "image_file", "file": next(names)} if part.get("type") == "image_url" else part
                       for part in content]
        out.append({"role": m["role"], "content": content})
    return out


def _timings(t0, t1, t2, t3) -> dict:
    return {"env_s": round(t1 - t0, 4), "model_s": round(t2 - t1, 4), "act_s": round(t3 - t2, 4)}


def bad_task_record(item: dict, error: Exception) -> dict:
    """The episode line of a task that could not even start."""
    return error_line(item, "bad_task", f"bad task: {error}")
