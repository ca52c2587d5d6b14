"""One attempt's rows: one per model call, read from its traj.jsonl (fields: docs/reference/export-schema.md).

A step line is data, possibly crafted: every field a row takes is checked, and
a mistyped one becomes null with a warning naming the file and line. Token
lists must be integers >= 0, logprobs finite numbers, as many as the response's
token ids: a trainer's importance weights need them one to one.
"""

import math
import os

from .._util.diag import warn, warn_problems
from ..runfolder.reader import read_steps, show_path
from ..runfolder.records import is_index
from .groups import Group
from .images import TrajImages
from .runs import Run

_MAX_ID = 2 ** 63 - 1  # int64, the parquet type
_SCALARS = (str, int, float, bool, type(None))


def _ids(v) -> bool:
    # set(map(type)) and min/max run in C: a 1,500-token prompt costs microseconds.
    return type(v) is list and (not v or set(map(type, v)) == {int} and min(v) >= 0 and max(v) <= _MAX_ID)


def _text(v) -> bool:
    return type(v) is str


def _logprobs(v) -> bool:
    try:
        return type(v) is list and set(map(type, v)) <= {float, int} and all(map(math.isfinite, v))
    except OverflowError:  # an integer no float holds
        return False


def _sampling(v) -> bool:
    return type(v) is dict and all(type(x) in _SCALARS and (type(x) is not float or math.isfinite(x))
                                   for x in v.values())


def plain(v, depth: int = 3) -> bool:
    """JSON a writer can copy as it is: strings, booleans, null, finite numbers, and lists and
    objects (string keys) of them, nested at most `depth` deep."""
    if type(v) in _SCALARS:
        return type(v) is not float or math.isfinite(v)
    if depth == 0:
        return False
    if type(v) is list:
        return all(plain(x, depth - 1) for x in v)
    return type(v) is dict and all(type(k) is str and plain(x, depth - 1) for k, x in v.items())


def _object(v) -> bool:
    return type(v) is dict and plain(v)


def _sent(v) -> dict:
    """The step's `images` as {file: sha256}; {} when absent or not a list of such objects."""
    if type(v) is not list:
        return {}
    return {i["file"]: i["sha256"] for i in v
            if type(i) is dict and type(i.get("file")) is str and type(i.get("sha256")) is str}


class _Checked:
    """Reads the fields of one step line (or one of its failed tries), noting each bad one."""

    def __init__(self, obj: dict, n: int, problems: list, label: str = ""):
        self.obj, self.n, self.problems, self.label = obj, n, problems, label

    def get(self, key: str, ok, want: str, default=None, old: str | None = None):
        """obj[key] if `ok`, else null with a problem; `old`: the key older runs used, read alike."""
        if key not in self.obj and old is not None:
            key = old
        if key not in self.obj:
            return default
        v = self.obj[key]
        if v is None or ok(v):
            return v
        self.problems.append((self.n, f"{self.label}{key} is not {want}; read as null"))
        return None

    def answer(self, versions: tuple) -> dict | None:
        """The fields of one model call; None when there was none (no response, no tokens).

        `versions`: the step's (model_version, policy_version, image_processor), which a
        failed try recording none of its own was asked under.
        """
        text = self.get("response", _text, "a string")
        ids = self.get("response_token_ids", _ids, "a list of token ids", old="token_ids")
        if text is None and ids is None:
            return None
        logprobs = self.get("response_logprobs", _logprobs, "a list of finite numbers", old="logprobs")
        if logprobs is not None and (ids is None or len(logprobs) != len(ids)):
            self.problems.append((self.n, f"{self.label}{len(logprobs)} logprobs for "
                                          f"{0 if ids is None else len(ids)} response token ids; read as null"))
            logprobs = None
        elif logprobs and int in set(map(type, logprobs)):
            logprobs = [float(x) for x in logprobs]  # `0` is a logprob too; every format then reads floats
        if self.label:  # a failed try: its own versions when it recorded them
            versions = (self.get("model_version", _text, "a string", versions[0]),
                        self.get("policy_version", is_index, "an integer >= 0", versions[1]),
                        self.get("image_processor", _object, "an object", versions[2]))
        return {"prompt_token_ids": self.get("prompt_token_ids", _ids, "a list of token ids"),
                "response_token_ids": ids, "response_logprobs": logprobs, "response_text": text,
                "error": self.get("error", _text, "a string"),
                "model_version": versions[0], "policy_version": versions[1], "image_processor": versions[2],
                "finish_reason": self.get("finish_reason", _text, "a string")}


def _prompt(prompt, images: TrajImages, where: str) -> tuple[list | None, list, str | None]:
    """The recorded prompt with image files relative to the run folder, its images in order,
    and what was wrong with it (then the prompt is null)."""
    if prompt is None:
        return None, [], None
    if type(prompt) is not list:
        return None, [], "prompt is not a list of messages; read as null"
    messages, shown = [], []
    for m in prompt:
        content = m.get("content") if type(m) is dict else None
        if type(m) is not dict or type(m.get("role")) is not str or type(content) not in (str, list):
            return None, [], "prompt holds a message without a string role and content; read as null"
        if type(content) is str:
            messages.append({"role": m["role"], "content": content})
            continue
        parts = []
        for p in content:
            kind = p.get("type") if type(p) is dict else None
            if kind == "text" and type(p.get("text")) is str:
                parts.append({"type": "text", "text": p["text"]})
            elif kind == "image_file" and _file_name(p.get("file")):
                image = images.entry(p["file"], where)
                shown.append(image)
                parts.append({"type": "image_file", "file": image["path"]})
            else:
                return None, [], "prompt holds a part that is neither text nor an image file; read as null"
        messages.append({"role": m["role"], "content": parts})
    return messages, shown, None


def _file_name(v) -> bool:
    return type(v) is str and v != "" and "\0" not in v and not v.startswith("/")


def trajectory_rows(run: Run, line: int, rec: dict, gid: str, group: Group,
                    failed_tries: bool) -> tuple[list[dict], list, tuple[str, str] | None]:
    """The rows of the attempt of episode record `rec` (episodes.jsonl line `line`), its step
    lines as (line number, object), and its trajectory folder (relative to the run, real path).
    Rows come in the order the model was asked: a step's failed tries (with `failed_tries`),
    then its own answer."""
    found = run.traj_dir(rec, f"{run.path}/episodes.jsonl:{line}")
    if found is None:
        return [], [], None
    traj_rel, traj_real = found
    shown = f"{run.path}/{traj_rel}/traj.jsonl"
    if not os.path.lexists(os.path.join(traj_real, "traj.jsonl")):
        if rec["outcome"] != "error":  # an error may well come before the first step
            warn(f"{shown}: missing; the attempt has no rows")
        return [], [], found
    steps, problems, _ = read_steps(traj_real)

    error = rec["outcome"] == "error"
    score = None if error else rec.get("score")
    raw = None if error or rec.get("reward") is None else float(rec["reward"])  # 2**64 is a number, and no int64
    head = {"run_id": run.run_id, "group_id": gid, "trajectory_id": f"{run.run_id}/{traj_rel}",
            "task_id": rec["task_id"], "domain": rec.get("domain"), "sample": rec["sample"],
            "attempt": rec["attempt"]}
    tail = {"step_reward": None if error else 0.0, "traj_reward": score,
            "traj_raw_reward": raw, "outcome": rec["outcome"],
            "stop_reason": rec.get("stop_reason"), "group_mean": group.mean, "group_std": group.std,
            "group_size": group.size, "run_dir": run.real}
    images = TrajImages(traj_rel, traj_real)
    rows, last = [], None
    for n, st in steps:
        s = st["step"]
        prompt, shown_images, problem = _prompt(st.get("prompt"), images, f"{shown}:{n}")
        if problem:
            problems.append((n, problem))
        for name, sha in _sent(st.get("images")).items():
            if images.differs(name, sha):
                problems.append((n, f"image {show_path(name)}: its file is not the one the model was sent "
                                    "(its sha256 differs from the step's images)"))
        step = _Checked(st, n, problems)
        versions = (step.get("model_version", _text, "a string"),
                    step.get("policy_version", is_index, "an integer >= 0"),
                    step.get("image_processor", _object, "an object"))
        sampling = step.get("sampling", _sampling, "an object of numbers, strings and booleans")
        call = {"prompt_messages": prompt, "images": shown_images}
        tries = st.get("failed_tries")
        if type(tries) is not list:
            if tries is not None:
                problems.append((n, "failed_tries is not a list; ignored"))
            tries = []
        for i, t in enumerate(tries if failed_tries else ()):
            fields = _Checked(t, n, problems, f"failed_tries[{i}].").answer(versions) if type(t) is dict else None
            if fields is None:
                problems.append((n, f"failed_tries[{i}] holds no answer; skipped"))
                continue
            rows.append({**head, "step": s, "try": i, "is_failed_try": True, "is_last_step": False, **call,
                         **fields, "sampling": sampling, **tail})
        fields = step.answer(versions)
        if fields is not None:
            last = {**head, "step": s, "try": len(tries), "is_failed_try": False, "is_last_step": False, **call,
                    **fields, "sampling": sampling, **tail}
            rows.append(last)
    if last is not None:
        last["is_last_step"] = True
        if not error:
            last["step_reward"] = score
    warn_problems(shown, sorted(problems))
    return rows, steps, found
