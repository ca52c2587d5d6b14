"""The records of a run folder, defined once (docs/reference/run-folder.md): `run.json`'s format
version, the lines of `scheduled.jsonl` and `episodes.jsonl`, a trajectory's
step line, and which attempt is a pair's final result.

The writers build lines here; every reader (the live progress, stats, view,
replay, the queue) checks the lines it reads here.
"""

import json
import sys

# Bumped when a reader of an older cua could misread the folder. 2: steps of text envs
# carry their `observation` text and no screenshot.
FORMAT_VERSION = 2
# Tasks of a run that cua cannot play (a setup step, getter or metric it lacks): never scheduled.
UNSUPPORTED = "unsupported.jsonl"
# The rollout's samples of its model servers' load and its host's GPUs.
METRICS = "metrics.jsonl"
# The local env server (`env.url: local`) of the rollout: where it listens and its process; its log.
LOCAL_SERVER = "env-server.json"
ENV_SERVER_LOG = "env-server.log"

OUTCOMES = ("success", "failure", "error")
# Where an attempt's wall time went (its episode line's `phases`, in seconds): they add up to its
# duration_s; other_s is what no phase claims (the agent's own work, writing the trajectory).
PHASES = ("allocate_s", "setup_s", "observe_s", "model_s", "act_s", "evaluate_s", "release_s", "other_s")
_TEXT_FIELDS = ("domain", "stop_reason", "error", "traj", "instruction")
_MAX_INDEX = 2 ** 53      # samples, attempts and steps beyond this are not counts but noise
_MAX_DURATION = 1e9       # seconds (30 years): more is noise, and sums of it overflow
_MAX_NUMBER = sys.float_info.max  # NaN and the infinities fail a range test too
_TEXT_OR_NULL = (str, type(None))
# A model answer is stored cut to this many characters: twice the longest answer any agent parses
# (64 KiB), so a cut answer still fails to parse, as the whole one did (a replay of it too).
MAX_RESPONSE_CHARS = 128 * 1024


def _show(v) -> str:
    """A field's value for a warning: short, ASCII, in JSON's words."""
    if isinstance(v, (dict, list)):
        return "an object" if isinstance(v, dict) else "an array"
    if isinstance(v, str) and len(v) > 40:
        v = v[:40] + "..."
    return json.dumps(v)[:60]


def is_index(v) -> bool:
    """A sample, attempt or step count: an int (not a bool) in [0, 2**53]."""
    return type(v) is int and 0 <= v <= _MAX_INDEX


# The types a traj.jsonl line's fields have when present and not null. A field of another type (a
# crafted or damaged line) is read as null, named, so that no reader fails on it later.
_STEP_FIELDS = {"screenshot": str, "response": str, "thought": str, "action": list, "commands": list,
                "failed_tries": list, "prompt": list, "images": list, "timings": dict, "sampling": dict,
                "prompt_token_ids": list, "response_token_ids": list, "response_logprobs": list}
_TYPE_NAMES = {str: "a string", list: "a list", dict: "an object", bool: "a boolean", int: "a number",
               float: "a number"}


def step_record(obj: dict) -> tuple[dict | None, str | None]:
    """A traj.jsonl line as a step record, and what was wrong with it: None for a line without a
    step index; a field of the wrong type is left out (null)."""
    if not is_index(obj.get("step")):
        return None, "skipped a step line whose step is not an integer >= 0"
    bad = [k for k, want in _STEP_FIELDS.items() if obj.get(k) is not None and type(obj[k]) is not want]
    if not bad:
        return obj, None
    why = "; ".join(f"{k} is {_TYPE_NAMES[type(obj[k])]}, not {_TYPE_NAMES[_STEP_FIELDS[k]]}" for k in bad)
    return {**obj, **dict.fromkeys(bad)}, f"step {obj['step']}: read without what is malformed: {why}"


def in_range(v, low=-_MAX_NUMBER, high=_MAX_NUMBER) -> bool:
    """A JSON number (not a bool) in [low, high]: by default any a float holds (not NaN, not an
    infinity, not an integer too large to convert)."""
    return type(v) in (int, float) and low <= v <= high


_PLACES = (("task_id", lambda v: type(v) is str, "a string"), ("sample", is_index, "an integer >= 0"),
           ("attempt", is_index, "an integer >= 0"), ("outcome", lambda v: v in OUTCOMES, " or ".join(OUTCOMES)))


def _unplaced(obj, keys) -> str | None:
    """Why `obj` cannot be placed: the first of `keys` missing or mistyped."""
    if type(obj) is not dict:
        return "skipped a line that is not an object"
    for key, ok, want in _PLACES:
        if key in keys and not ok(obj.get(key)):
            return f"skipped a line whose {key} is {_show(obj.get(key))}, not {want}"
    return None


def scheduled_record(obj) -> tuple[dict | None, str | None]:
    """A scheduled.jsonl line as a record with a string task_id, a sample index and
    a string or null domain; or None. And what was wrong with the line."""
    get = obj.get if type(obj) is dict else None
    if not (get and type(get("task_id")) is str and is_index(get("sample"))):
        return None, _unplaced(obj, ("task_id", "sample"))
    if type(get("domain")) not in _TEXT_OR_NULL:
        return {**obj, "domain": None}, f"domain is {_show(get('domain'))}, not a string; read as null"
    return obj, None


def episode_record(obj) -> tuple[dict | None, str | None]:
    """An episodes.jsonl line as a record every reader can trust, and what was wrong with it.

    The record is None when the line cannot be placed: task_id, sample,
    attempt or outcome missing or mistyped. A score that is not a number in
    [0, 1], or a reward that is not a finite number, is no result at all: the
    record becomes an error (stop_reason `eval_error`), never a success. An
    outcome that disagrees with the score follows the score. Other fields are
    absent, null or of their type: a mistyped one becomes null. Extra fields
    are kept. A line that needs no repair is returned as it is: this runs
    once per line of large runs.
    """
    get = obj.get if type(obj) is dict else None
    if not (get and type(get("task_id")) is str and is_index(get("sample")) and is_index(get("attempt"))
            and get("outcome") in OUTCOMES):
        return None, _unplaced(obj, ("task_id", "sample", "attempt", "outcome"))
    fixes, problems = {}, []
    for key in _TEXT_FIELDS:
        if type(get(key)) not in _TEXT_OR_NULL:
            fixes[key] = None
            problems.append(f"{key} is {_show(get(key))}, not a string; read as null")
    steps, duration = get("steps"), get("duration_s")
    if steps is not None and not is_index(steps):
        fixes["steps"] = None
        problems.append(f"steps is {_show(steps)}, not an integer >= 0; read as null")
    if duration is not None and not in_range(duration, 0, _MAX_DURATION):
        fixes["duration_s"] = None
        problems.append(f"duration_s is {_show(duration)}, not a number of seconds; read as null")
    outcome, score, reward = get("outcome"), get("score"), get("reward")
    bad = None
    if reward is not None and not in_range(reward):
        fixes["reward"] = None
        bad = f"reward is {_show(reward)}, not a finite number"
    elif outcome != "error" and not in_range(score, 0, 1):
        bad = f"score is {_show(score)}, not a number in [0, 1]"
    if bad and outcome != "error":
        problems.append(bad + "; counted as an error")
        outcome = "error"
        fixes.update(outcome=outcome, stop_reason="eval_error", error=fixes.get("error", get("error")) or bad)
    elif bad:
        problems.append(bad + "; read as null")
    if outcome == "error":
        if score is not None:
            fixes["score"] = None
    elif (score == 1) != (outcome == "success"):
        fixes["outcome"] = "success" if score == 1 else "failure"
        problems.append(f"outcome {outcome!r} disagrees with score {score}; read as {fixes['outcome']!r}")
    return ({**obj, **fixes} if fixes else obj), "; ".join(problems) or None


def phases_of(rec: dict) -> dict | None:
    """An episode line's phases (PHASES, seconds) when it has them all as numbers of seconds; else None
    (a line written before cua timed phases, or a hand-edited one)."""
    phases = rec.get("phases")
    if type(phases) is not dict or not all(in_range(phases.get(k), 0, _MAX_DURATION) for k in PHASES):
        return None
    return phases


# A metrics.jsonl line's fields besides "t": a model server's sample (fleet/metrics.py LOAD) or a GPU's.
SERVER_SAMPLE = ("running", "waiting", "kv_usage", "prefix_hits", "prefix_queries", "prompt_tokens",
                 "generation_tokens", "queue_s_sum", "queue_count")
GPU_SAMPLE = ("util", "mem_used", "mem_total")


def metric_record(obj) -> dict | None:
    """A metrics.jsonl line: a model server's sample {"t", "server", "up", SERVER_SAMPLE...} or a GPU's
    {"t", "gpu", GPU_SAMPLE...}, with those fields only; None for anything else. A field that is not a
    number is read as null, so one bad value never drops a curve."""
    if type(obj) is not dict or not in_range(obj.get("t"), 0, _MAX_DURATION * 10):
        return None
    if type(obj.get("server")) is str and type(obj.get("up")) is bool:
        head, fields = {"server": obj["server"], "up": obj["up"]}, SERVER_SAMPLE
    elif is_index(obj.get("gpu")):
        head, fields = {"gpu": obj["gpu"]}, GPU_SAMPLE
    else:
        return None
    values = {k: obj[k] if in_range(obj.get(k), 0) else None for k in fields}
    return {"t": obj["t"], **head, **values}


def supersedes(new: dict, old: dict | None) -> bool:
    """The final result of a pair is its line with the highest attempt (the later line on a tie)."""
    return old is None or new["attempt"] >= old["attempt"]


def error_line(item: dict, stop_reason: str, error: str | None = None, traj: str | None = None) -> dict:
    """The episode line of an attempt of the queue item `item` that ended without a score."""
    domain = item.get("domain") if isinstance(item.get("domain"), str) else None  # a bad task's may be anything
    return {"task_id": item["task_id"], "domain": domain, "sample": item["sample"],
            "attempt": item["attempt"], "outcome": "error", "reward": None, "score": None, "steps": 0,
            "stop_reason": stop_reason, "duration_s": 0.0, "error": error, "traj": traj}


def attempt_line(item: dict, task, traj: str) -> dict:
    """The episode line of an attempt of `task` as it starts: an env error until it gets further."""
    rec = error_line(item, "env_error", traj=traj)
    func = task.evaluator.get("func")
    rec.update(domain=task.domain, instruction=task.instruction, evaluator_func=func if isinstance(func, str) else None)
    return rec


def step_line(step: int, time: float, observation, actor: str = "agent") -> dict:
    """A traj.jsonl line for a step that has its observation and nothing else yet; `actor` says who
    acted in it: the agent, or a person who took the episode over (`human`)."""
    line = {"step": step, "actor": actor, "time": round(time, 3), "screenshot": observation.file, "response": None,
            "thought": None, "action": None, "commands": [], "endpoint": None, "model_version": None,
            "parse_retries": 0, "width": observation.width, "height": observation.height,
            "timings": {"env_s": 0.0, "model_s": 0.0, "act_s": 0.0}}
    if observation.text is not None:
        line["observation"] = observation.text
    if observation.a11y_file is not None:
        line["a11y_tree"] = observation.a11y_file
    return line


def _response(text: str | None) -> dict:
    """A model answer as a record stores it: cut at MAX_RESPONSE_CHARS, and then marked (docs/reference/run-folder.md)."""
    if text is None or len(text) <= MAX_RESPONSE_CHARS:
        return {"response": text}
    return {"response": text[:MAX_RESPONSE_CHARS], "response_truncated": True, "response_chars": len(text)}


def turn_fields(turn) -> dict:
    """What an agent's turn (agents.Turn) adds to its step's line: each answer once, cut to its limit."""
    reply = turn.reply
    out = {"thought": turn.thought, "action": turn.actions, "commands": turn.sent,
           "parse_retries": max(turn.tries - 1, 0)}
    if reply is not None:
        out.update(_response(reply.text), endpoint=reply.endpoint, model_version=reply.model_version,
                   **reply.token_fields())
        if reply.policy_version is not None:
            out["policy_version"] = reply.policy_version
        if reply.sampling is not None:
            out["sampling"] = reply.sampling
        if reply.image_processor is not None:
            out["image_processor"] = reply.image_processor
    shown = turn.images()  # every try of the step was sent the same prompt
    if shown:
        out["images"] = shown
    if turn.error is not None:
        out["error"] = turn.error
    if turn.failed_tries:
        out["failed_tries"] = [{**t, **_response(t["response"])} for t in turn.failed_tries]
    return out
