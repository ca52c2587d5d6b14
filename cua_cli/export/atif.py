"""`cua export --format atif`: one Harbor ATIF v1.8 trajectory per attempt, its images copied next to it
(docs/reference/export-schema.md#the-atif-format).

    OUT/<run_id>/<task_id>/<sample>_<attempt>/trajectory.json
    OUT/<run_id>/<task_id>/<sample>_<attempt>/step_0000.png ...     paths in the JSON are relative to it

(run and task ids encoded as the run folder encodes task ids). The steps: a user step with the
instruction and the first observation, then one agent step per cua step with the model's answer as
its message, the parsed actions as tool calls, the observation that followed them (the next step's
screenshot or text), and the token ids and logprobs in its metrics. What ATIF has no field for is in
`extra`: per step the images the model was sent at that call, what resized them, the env commands,
timings, errors and (with --failed-tries) the answers asked again after; per trajectory the outcome,
rewards and the GRPO group.

Written as plain JSON; the tests check every file against the `atif` package's models.
"""

import hashlib
import json
import os
import posixpath
import re
import shutil
from datetime import UTC, datetime

from .._util.diag import warn, warn_problems
from ..runfolder.confined import Refused, read_in
from ..runfolder.names import encode_task_id
from ..runfolder.reader import show_path
from .groups import Group
from .rows import plain
from .runs import Run

SCHEMA_VERSION = "ATIF-v1.8"
TRAJECTORY_FILE = "trajectory.json"
NOTES = ("Exported by cua. Step 1 is the task and the first observation; each later step is one cua step: the "
         "model's raw answer, its parsed actions as tool calls, and the observation taken after them. The images "
         "the model was sent at a step (its history window) are in the step's extra.images with their sha256, and "
         "what resized them in extra.image_processor.")
_MEDIA = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
          (b"GIF89a", "image/gif"))
_MAX_TIME = 1e11  # Unix seconds in year 5138: beyond it a step's time is noise
_SURROGATE = re.compile("[\ud800-\udfff]")


def _media_type(data: bytes) -> str | None:
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((t for magic, t in _MEDIA if data.startswith(magic)), None)


def _timestamp(v) -> str | None:
    if type(v) not in (int, float) or not 0 <= v <= _MAX_TIME:
        return None
    return datetime.fromtimestamp(v, UTC).isoformat().replace("+00:00", "Z")


def _text(v) -> str | None:
    return v if type(v) is str else None


class _Images:
    """One attempt's image files, each copied once into its ATIF folder under a path-safe name."""

    def __init__(self, traj_real: str, dest: str, where: str):
        self.traj_real, self.dest, self.where = traj_real, dest, where
        self.copied: dict[str, dict | None] = {}

    def get(self, name, sent: str | None = None) -> dict | None:
        """`{"path", "sha256", "media_type"}` of the trajectory's file `name` as copied; None (with a
        warning) when it cannot be read, is refused or is not an image ATIF takes. `sent`: the sha256
        the step recorded for it, which the file must have."""
        if type(name) is not str or not name or "\0" in name:
            return None
        if name not in self.copied:
            self.copied[name] = self._copy(name)
        image = self.copied[name]
        if image is not None and sent is not None and sent != image["sha256"]:
            warn(f"{self.where}: image {show_path(name)} is not the one the model was sent "
                 "(its sha256 differs from the step's images)")
        return image

    def _copy(self, name: str) -> dict | None:
        try:
            data = read_in(self.traj_real, name)
        except Refused as e:
            warn(f"{self.where}: image {show_path(name)} {e}; not exported")
            return None
        except OSError as e:
            warn(f"{self.where}: image {show_path(name)} cannot be read: {e.strerror or e}; not exported")
            return None
        media, path = _media_type(data), encode_task_id(name)
        if media is None:
            warn(f"{self.where}: image {show_path(name)} is not a PNG, JPEG, GIF or WebP file; not exported")
            return None
        if path == TRAJECTORY_FILE:
            warn(f"{self.where}: image {show_path(name)} has the trajectory file's name; not exported")
            return None
        with open(os.path.join(self.dest, path), "xb") as f:
            f.write(data)
        return {"path": path, "sha256": hashlib.sha256(data).hexdigest(), "media_type": media}


def _part(image: dict) -> dict:
    return {"type": "image", "source": {"media_type": image["media_type"], "path": image["path"]}}


def _observation(st: dict, images: _Images) -> list[dict] | None:
    """A step's observation as ATIF content parts: its screenshot, or its text (text envs)."""
    image = images.get(st.get("screenshot")) if st.get("screenshot") is not None else None
    if image is not None:
        return [_part(image)]
    text = _text(st.get("observation"))
    return [{"type": "text", "text": text}] if text is not None else None


def _tool_calls(st: dict, k: int, problems: list, n: int) -> list[dict] | None:
    actions = st.get("action")
    if actions is None or actions == []:
        return None
    if type(actions) is not list or not all(type(a) is dict and type(a.get("type")) is str and plain(a)
                                            for a in actions):
        problems.append((n, "action is not a list of objects with a type; no tool calls"))
        return None
    return [{"tool_call_id": f"call_{k}_{i}", "function_name": a["type"],
             "arguments": {key: v for key, v in a.items() if key != "type"}} for i, a in enumerate(actions)]


def _metrics(row: dict | None) -> dict | None:
    if row is None:
        return None
    prompt, ids, logprobs = row["prompt_token_ids"], row["response_token_ids"], row["response_logprobs"]
    out = {"prompt_tokens": None if prompt is None else len(prompt),
           "completion_tokens": None if ids is None else len(ids),
           "prompt_token_ids": prompt, "completion_token_ids": ids, "logprobs": logprobs,
           "extra": {"finish_reason": row["finish_reason"]} if row["finish_reason"] is not None else None}
    out = {k: v for k, v in out.items() if v is not None}
    return out or None


def _shown(st: dict, row: dict | None, traj_rel: str, images: _Images) -> list[dict] | None:
    """The images the model was sent at this step, in order: from the step's own `images`
    (with the sha256 taken when it was sent), else from its recorded prompt."""
    recorded = st.get("images")
    if type(recorded) is list and all(type(i) is dict for i in recorded):
        pairs = [(i.get("file"), _text(i.get("sha256"))) for i in recorded]
    elif row is not None and row["images"]:
        pairs = [(None if i["path"] is None else posixpath.relpath(i["path"], traj_rel), None) for i in row["images"]]
    else:
        return None
    out = []
    for name, sent in pairs:
        image = images.get(name, sent)
        out.append({"path": None if image is None else image["path"], "sha256": sent or (image and image["sha256"])})
    return out


def _failed(row: dict) -> dict:
    fields = {"response": row["response_text"], "error": row["error"], "prompt_token_ids": row["prompt_token_ids"],
              "completion_token_ids": row["response_token_ids"], "logprobs": row["response_logprobs"],
              "finish_reason": row["finish_reason"], "model_version": row["model_version"],
              "policy_version": row["policy_version"], "image_processor": row["image_processor"]}
    return {k: v for k, v in fields.items() if v is not None}


def _agent_step(step_id: int, n: int, st: dict, next_st: dict | None, own: dict | None, tries: list,
                traj_rel: str, images: _Images, problems: list) -> dict:
    """The ATIF step of cua step line `st` (line `n` of its file); ATIF's ids run on without gaps."""
    k = st["step"]
    observed = _observation(next_st, images) if next_st is not None else None
    timings = st.get("timings")
    extra = {"step": k, "thought": _text(st.get("thought")), "error": _text(st.get("error")),
             "commands": st["commands"] if type(st.get("commands")) is list and plain(st["commands"], 1) else None,
             "endpoint": _text(st.get("endpoint")),
             "policy_version": own["policy_version"] if own else None,
             "sampling": own["sampling"] if own else None,
             "timings": timings if type(timings) is dict and plain(timings, 1) else None,
             "images": _shown(st, own, traj_rel, images),
             "image_processor": own["image_processor"] if own else None,
             "failed_tries": [_failed(t) for t in tries] or None}
    if st.get("actor") == "human":  # a person who took the desktop over: the user's turn, no tool calls
        action = st.get("action")
        extra["takeover"] = action if type(action) is list and plain(action, 2) else None
        step = {"step_id": step_id, "timestamp": _timestamp(st.get("time")), "source": "user",
                "message": "(a person held the desktop)",
                "extra": {key: v for key, v in extra.items() if v is not None}}
        return {key: v for key, v in step.items() if v is not None}
    step = {"step_id": step_id, "timestamp": _timestamp(st.get("time")), "source": "agent",
            "model_name": own["model_version"] if own else None,
            "message": own["response_text"] if own and own["response_text"] is not None else "",
            "tool_calls": _tool_calls(st, k, problems, n),
            "observation": {"results": [{"content": observed}]} if observed else None,
            "metrics": _metrics(own), "extra": {key: v for key, v in extra.items() if v is not None}}
    return {key: v for key, v in step.items() if v is not None}


def _sum(values: list) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def trajectory(run: Run, rec: dict, gid: str, group: Group, traj_rel: str, steps: list, rows: list,
               images: _Images, problems: list) -> dict:
    """The ATIF document of one attempt, its images copied by `images`."""
    own = {r["step"]: r for r in rows if not r["is_failed_try"]}
    tries = {}
    for r in rows:
        if r["is_failed_try"]:
            tries.setdefault(r["step"], []).append(r)
    first = _observation(steps[0][1], images) if steps else None
    instruction = _text(rec.get("instruction")) or ""
    out = [{"step_id": 1, "source": "user", "timestamp": _timestamp(steps[0][1].get("time")) if steps else None,
            "message": [{"type": "text", "text": instruction}, *first] if first else instruction}]
    for i, (n, st) in enumerate(steps):
        next_st = steps[i + 1][1] if i + 1 < len(steps) else None
        out.append(_agent_step(i + 2, n, st, next_st, own.get(st["step"]), tries.get(st["step"], []), traj_rel,
                               images, problems))
    if out[0]["timestamp"] is None:
        del out[0]["timestamp"]
    metrics = [s.get("metrics") or {} for s in out[1:]]
    config = run.meta.get("config") if isinstance(run.meta.get("config"), dict) else {}
    model = config.get("model") if isinstance(config.get("model"), dict) else {}
    agent = config.get("agent") if isinstance(config.get("agent"), dict) else {}
    provider = _text(model.get("provider"))
    error = rec["outcome"] == "error"
    final = {"total_prompt_tokens": _sum([m.get("prompt_tokens") for m in metrics]),
             "total_completion_tokens": _sum([m.get("completion_tokens") for m in metrics]),
             "total_steps": len(out)}
    extra = {"run_id": run.run_id, "traj": traj_rel, "run_dir": run.real, "task_id": rec["task_id"],
             "domain": rec.get("domain"), "sample": rec["sample"], "attempt": rec["attempt"],
             "outcome": rec["outcome"], "score": None if error else rec.get("score"),
             "reward": None if error else rec.get("reward"), "stop_reason": rec.get("stop_reason"),
             "error": rec.get("error"), "duration_s": rec.get("duration_s"), "group_id": gid,
             "group_mean": group.mean, "group_std": group.std, "group_size": group.size}
    return {"schema_version": SCHEMA_VERSION, "session_id": run.run_id, "trajectory_id": f"{run.run_id}/{traj_rel}",
            "agent": {k: v for k, v in {
                "name": "cua", "version": _text(run.meta.get("cua_version")) or "unknown",
                "model_name": _text(model.get("name")) if provider == "openai" else provider,
                "extra": {k: v for k, v in {"agent": _text(agent.get("kind")), "provider": provider}.items()
                          if v is not None} or None}.items() if v is not None},
            "steps": out, "notes": NOTES,
            "final_metrics": {k: v for k, v in final.items() if v is not None},
            "extra": {k: v for k, v in extra.items() if v is not None}}


class AtifFolders:
    """The atif writer: under `root`, one folder per attempt with its trajectory.json and images."""

    def __init__(self, root: str):
        self.root = root
        self.warned = False
        os.mkdir(root)

    def add_attempt(self, run: Run, rec: dict, gid: str, group: Group, found: tuple[str, str] | None,
                    steps: list, rows: list) -> int:
        """Write the attempt of episode record `rec`; 1 when written, 0 when it has no trajectory."""
        if found is None:
            return 0
        traj_rel, traj_real = found
        dest = os.path.join(self.root, encode_task_id(run.run_id), encode_task_id(rec["task_id"]),
                            f"{rec['sample']}_{rec['attempt']}")
        os.makedirs(dest)
        where = f"{run.path}/{traj_rel}/traj.jsonl"
        problems = []
        doc = trajectory(run, rec, gid, group, traj_rel, steps, rows, _Images(traj_real, dest, where), problems)
        warn_problems(where, sorted(problems))
        try:
            text = json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except ValueError as e:  # a number nothing checked: never write JSON that is not JSON
            warn(f"{where}: {e}; not exported")
            shutil.rmtree(dest)
            return 0
        if _SURROGATE.search(text):  # task ids and answers may hold any character; strict JSON parsers refuse these
            text = _SURROGATE.sub("\ufffd", text)
            if not self.warned:
                warn("lone surrogates in text are written as U+FFFD in atif files")
                self.warned = True
        with open(os.path.join(dest, TRAJECTORY_FILE), "wb") as f:
            f.write(text.encode())
        return 1

    def close(self) -> None:
        pass

    def abort(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

