"""The episode loop: allocate, (screenshot -> model -> parse -> act)*, evaluate, release.

Agent failures (bad answers, actions the env refuses, running out of steps)
and infrastructure errors (env, model server, evaluator) are kept apart:
only the latter give outcome "error", and the queue retries those. Every
step that got a screenshot has its traj.jsonl line, however it ended.
"""

import io
import time
import traceback
from dataclasses import dataclass

from PIL import Image

from .actions import TERMINAL, to_command
from .agents.uitars import ParseError, UITarsAgent
from .episodes import error_line
from .errors import ActionRefused, InfraError, ModelError, Stopped
from .models import Request
from .rundir import RunDir, TrajWriter
from .tasks import task_from_dict

MAX_ERROR_CHARS = 2000  # error text kept in records, cut only after secrets are masked


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

    def _error_text(self, text: str) -> str:
        """Masked first, then cut: a cut must never leave part of a secret behind."""
        text = self.redact(text)
        return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + " [...]"

    def run_episode(self) -> dict:
        """Play one attempt; always returns its episode record (see README)."""
        t, item = self.task, self.item
        rel = self.run.traj_rel(t.task_id, item["sample"], item["attempt"])
        rec = error_line(item, "env_error", traj=rel)
        rec.update(domain=t.domain, instruction=t.instruction,
                   evaluator_func=t.evaluator.get("func") if isinstance(t.evaluator.get("func"), str) else None)
        start = time.monotonic()
        self.deadline = start + self.limits.episode_timeout_s
        session, evaluating = None, False
        try:
            session = self.env.allocate(t.task_id, t.config, self.should_stop, self._timeout())
            rec["instruction"] = t.instruction or session.instruction or ""
            stop = self._loop(session, rec["instruction"], TrajWriter(self.run, rel), rec)
            rec["stop_reason"], evaluating = stop, True
            # The episode has ended: neither a Ctrl-C nor the episode deadline may throw it away now.
            result, reward = session.evaluate(t.evaluator, self.limits.step_timeout_s, lambda: False)
            rec["reward"] = reward
            rec["score"] = min(max(result, 0.0), 1.0)
            rec["outcome"] = "success" if rec["score"] == 1.0 else "failure"
        except Stopped:
            rec["stop_reason"], rec["error"] = "interrupted", "the run was stopped"
        except TimeoutError:
            # The episode deadline hit inside the loop or evaluation: no score to report.
            rec["stop_reason"], rec["error"] = "timeout", f"episode exceeded {self.limits.episode_timeout_s} s"
        except InfraError as e:
            rec["stop_reason"] = "eval_error" if evaluating else e.stop_reason
            rec["error"] = str(e)
        except Exception as e:  # a bug must not lose the record or the claim
            rec["stop_reason"] = "runner_error"
            rec["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()
        finally:
            if session is not None:
                try:
                    session.release(self.limits.step_timeout_s)
                except InfraError as e:
                    rec["release_error"] = self._error_text(str(e))
            rec["duration_s"] = round(time.monotonic() - start, 3)
            if rec["error"]:
                rec["error"] = self._error_text(rec["error"])
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
            width, height = _image_size(png)
            shot = traj.screenshot(step, png)
            timings = {"env_s": round(time.monotonic() - t0, 4), "model_s": 0.0, "act_s": 0.0}
            record = {"step": step, "time": round(t_wall, 3), "screenshot": shot, "response": None,
                      "thought": None, "action": None, "commands": [], "endpoint": None, "model_version": None,
                      "parse_retries": 0, "width": width, "height": height, "timings": timings}
            rec["steps"] = step + 1
            try:
                stop = self._step(session, instruction, history, png, shot, record, model)
            except BaseException as e:
                record["error"] = self._error_text(_describe(e))
                raise
            finally:
                # Written however the step ended: a trainer sees every answer the model gave.
                timings.update((k, round(v, 4)) for k, v in timings.items())
                traj.step(record)
            history.append([png, record["response"], shot])
            for old in history[:-max(keep - 1, 0)] if keep > 1 else history:
                old[0] = None  # the next prompt shows only the last `keep` screenshots
            if stop:
                return stop
        return "max_steps"

    def _step(self, session, instruction: str, history: list, png: bytes, shot: str, record: dict,
              model) -> str | None:
        """Ask, parse and act; re-ask after an answer that does not parse or that the
        env refuses. Fills `record`; returns a stop reason, or None to go on."""
        messages = self.agent.build_messages(instruction, [(h[0], h[1]) for h in history], png)
        if self.record_prompt:
            record["prompt"] = _images_by_name(messages, [h[2] for h in history if h[0] is not None] + [shot])
        timings, failed, stop = record["timings"], [], None
        for tries in range(self.limits.parse_retries + 1):
            t = time.monotonic()
            try:
                reply = model.complete(Request(messages, record["step"], record["width"], record["height"],
                                               self.should_stop, self._timeout()))
            except ModelError:
                raise
            except InfraError as e:  # e.g. a provider that only knows the generic kind
                raise ModelError(str(e)) from e
            finally:
                timings["model_s"] += time.monotonic() - t
            answer = {"response": reply.text}
            if reply.token_ids is not None:
                answer.update(token_ids=reply.token_ids, logprobs=reply.logprobs)
            record.update(answer, endpoint=reply.endpoint, model_version=reply.model_version,
                          parse_retries=tries, thought=None, action=None, commands=[])
            try:
                parsed = self.agent.parse(reply.text, record["width"], record["height"])
            except ParseError as e:
                failed.append({**answer, "error": f"parse: {e}", "stop": "parse_error"})
                continue
            record.update(thought=parsed.thought, action=[a.to_dict() for a in parsed.actions])
            t = time.monotonic()
            try:
                stop = self._act(session, parsed.actions, record["commands"])
            except ActionRefused as e:
                failed.append({**answer, "error": self._error_text(f"env refused the action: {e}"),
                               "stop": "action_refused", "commands": list(record["commands"])})
                continue
            finally:
                timings["act_s"] += time.monotonic() - t
            break
        else:  # every try failed: the last one is the step's own, the earlier ones are kept beside it
            last = failed.pop()
            record["error"], stop = last["error"], last["stop"]
        if failed:
            record["failed_tries"] = [{k: v for k, v in f.items() if k != "stop"} for f in failed]
        return stop

    def _act(self, session, actions: list, commands: list) -> str | None:
        """Send the actions to the env (each command is listed before it is sent);
        the stop reason when the agent or the env ended the episode."""
        env_done = False
        for action in actions:
            if action.type in TERMINAL:
                return "finished" if action.type == "finished" else "call_user"
            commands.append(to_command(action))
            data = session.execute(commands[-1], self._timeout(), self.should_stop)
            env_done = env_done or bool(isinstance(data, dict) and data.get("done"))
        return "env_done" if env_done else None


def _image_size(png: bytes) -> tuple[int, int]:
    """Width and height from the image header; bytes that are no image are the env's fault."""
    try:
        return Image.open(io.BytesIO(png)).size
    except Exception as e:  # PIL raises many kinds for foreign bytes, decompression bombs included
        raise InfraError(f"screenshot: not a readable image ({type(e).__name__}: {e})") from None


def _describe(e: BaseException) -> str:
    """The error text a step records for the exception that ended it."""
    if isinstance(e, Stopped):
        return "the run was stopped"
    if isinstance(e, TimeoutError):
        return "the episode deadline was reached"
    if isinstance(e, InfraError):
        return str(e)
    return "".join(traceback.format_exception_only(type(e), e)).strip()


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


def bad_task_record(item: dict, error: Exception) -> dict:
    """The episode line of a task that could not even start."""
    return error_line(item, "bad_task", f"bad task: {error}")
