"""A finished cua trajectory written the way DART-GUI's rollouter leaves one, for DART-GUI's trainer.

Facts from github.com/Computer-use-agents/dart_rollouter (src/services/storage_actor.py,
src/core/trajectory_runner.py) and the trainer in github.com/Computer-use-agents/dart-gui
(verl/trainer/ppo/trajectory_splitter.py, verl/utils/dataset/osworld_dataset.py):

    <root>/<task>_<trace>/
      image_0000.png ...       the screenshot the model saw at step k (image_0000: the first), byte for byte
      data_for_step_{k}.pt     k = 1..steps, the k-th answer: torch dict of logp float32[T] and token_ids
                               int64[T] (vLLM's sampled tokens, stop token included, one logprob each) and
                               prompt_token_ids int64[P]; a list not recorded is DART's empty float32 tensor
      final_messages.json      the whole dialogue: system, user [instruction text, image_0000.png], then
                               assistant answer k and user [image_k] in turn; images by file name
      reward.txt               str(float score); -2 when the model failed, -1 when the evaluation failed
      reward_from_env.txt      the same
      task_config.json         the task plus raw {task_type: domain, task_id}

The trainer pairs the k-th assistant message with data_for_step_{k}.pt and windows the
images itself, so final_messages.json is the whole dialogue rebuilt from every step, not
the last prompt (whose older screenshots the agent dropped). Every step gets its .pt, with
DART's empty tensors when it recorded no tokens, so that pairing never shifts. An attempt
that ended before its evaluation (an env error, a timeout) is left as DART leaves one that
raised: task_config.json, images and .pt files, no reward.txt, no final_messages.json.
"""

import hashlib
import json
import math
import os
import shutil
import tempfile
from pathlib import Path

from ..errors import CuaError
from ..runfolder.confined import Refused, open_in
from ..runfolder.finished import Finished
from ..runfolder.names import encode_task_id
from ..runfolder.reader import show_path

# DART's system message; Qwen2-VL's chat template inserts the same one when a prompt has none.
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
ERROR_REWARDS = {"model_error": "-2", "eval_error": "-1"}  # DART's codes, as its ints print
TMP_DIR = ".cua-tmp"   # where folders are built: a folder in root holds no task_config.json until it is whole
_MAX_PART = 120
_MAX_ID = 2 ** 63 - 1  # int64


def folder_part(s: str) -> str:
    """encode_task_id with `_` encoded too: DART's trainer reads the task id as the name up to its first `_`."""
    out = encode_task_id(s).replace("_", "%5F")  # injective: encode_task_id never emits %5F itself
    if len(out) > _MAX_PART:
        out = out[:_MAX_PART - 17] + "~" + hashlib.sha256(out.encode()).hexdigest()[:16]
    return out


def _torch():
    try:
        import torch
    except ImportError as e:
        raise CuaError(f"writing DART's .pt files needs torch ({e}): pip install -e .[dart]") from None
    return torch


class DartFolderSink:
    """Writes each trajectory once into `root`, as <task>_<trace>/ (see the module docstring)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def write(self, t: Finished) -> str:
        """The folder name written for `t`, or found already written: a trajectory is never written twice."""
        torch = _torch()
        name = f"{folder_part(t.record['task_id'])}_{folder_part(t.trace_id)}"
        final = self.root / name
        if os.path.lexists(final):
            return name
        tmp_parent = self.root / TMP_DIR
        try:
            tmp_parent.mkdir(parents=True, exist_ok=True)
            if tmp_parent.is_symlink():
                raise CuaError(f"{tmp_parent}: a link; cua builds folders only inside {self.root}")
            tmp = Path(tempfile.mkdtemp(dir=tmp_parent))
        except OSError as e:
            raise CuaError(f"{tmp_parent}: cannot make the folder: {e.strerror or e}") from None
        try:
            _fill(tmp, t, torch)
            try:
                os.rename(tmp, final)  # atomic: the folder appears whole or not at all
            except OSError:
                if not os.path.lexists(final):
                    raise
                # another writer of the same trajectory got there first: its folder stands
        except OSError as e:
            raise CuaError(f"{final}: cannot write: {e.strerror or e}") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return name


def _fill(out: Path, t, torch) -> None:
    rec, steps = t.record, t.steps()
    where = str(t.traj_dir / "traj.jsonl")
    if [s.get("step") for s in steps] != list(range(len(steps))):
        raise CuaError(f"{where}: steps are not 0..{len(steps) - 1} in order; DART pairs answer k with "
                       "data_for_step_k.pt")
    reward = str(float(rec["score"])) if rec["outcome"] != "error" else ERROR_REWARDS.get(rec.get("stop_reason"))
    for i, step in enumerate(steps):
        with _screenshot(t.traj_dir, step, f"{where} step {i}") as src, open(out / f"image_{i:04d}.png", "xb") as dst:
            shutil.copyfileobj(src, dst)
        torch.save(_tensors(step, torch, f"{where} step {i}"), out / f"data_for_step_{i + 1}.pt")
    if reward is not None:  # DART writes these once the episode reached its end
        _dump(out / "final_messages.json", _dialogue(steps, where))
        (out / "reward.txt").write_text(reward)
        (out / "reward_from_env.txt").write_text(reward)
    _dump(out / "task_config.json", _task_config(t))


def _screenshot(traj_dir: Path, step: dict, where: str):
    """The step's screenshot, open: a regular file in the trajectory folder (confined.py)."""
    name = step.get("screenshot")
    if name is None:
        raise CuaError(f"{where}: no screenshot file; DART's layout has one at every step")
    try:
        return open_in(str(traj_dir), name)
    except Refused as e:
        raise CuaError(f"{where}: screenshot {show_path(name)} {e}; not read") from None
    except OSError as e:
        raise CuaError(f"{where}: screenshot {show_path(name)} cannot be read: {e.strerror or e}") from None


def _ids(v) -> bool:
    return type(v) is list and all(type(x) is int and 0 <= x <= _MAX_ID for x in v)


def _tensors(step: dict, torch, where: str) -> dict:
    """The step's data_for_step_k.pt dict; record_logprobs' `token_ids`/`logprobs` read like record_tokens'."""
    ids = step.get("response_token_ids", step.get("token_ids"))
    logp = step.get("response_logprobs", step.get("logprobs"))
    prompt = step.get("prompt_token_ids")
    if not (ids is None or _ids(ids)) or not (prompt is None or _ids(prompt)):
        raise CuaError(f"{where}: token ids are not a list of integers in [0, 2**63)")
    paired = logp is None if ids is None else (type(logp) is list and len(logp) == len(ids) and all(
        type(x) in (int, float) and math.isfinite(x) for x in logp))
    if not paired:
        raise CuaError(f"{where}: logprobs are not one finite number per response token")

    def tensor(v, dtype):
        # DART stores an absent list as torch.tensor([]): float32, empty
        return torch.tensor([]) if v is None else torch.tensor(v, dtype=dtype)
    return {"logp": tensor(logp, torch.float32), "token_ids": tensor(ids, torch.long),
            "prompt_token_ids": tensor(prompt, torch.long)}


def _image(i: int) -> dict:
    return {"type": "image_url", "image_url": f"image_{i:04d}.png"}


def _instruction(prompt: list, where: str) -> tuple[dict, list[dict]]:
    """The system message and the text parts of the first prompt up to its first screenshot."""
    system, texts = SYSTEM, []
    for m in prompt:
        if not (isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), (str, list))):
            raise CuaError(f"{where}: step 0's prompt holds a message without a string role and content")
        if m["role"] == "system":
            system = {"role": "system", "content": m["content"]}
            continue
        for p in [{"type": "text", "text": m["content"]}] if isinstance(m["content"], str) else m["content"]:
            if not (isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)):
                return system, texts
            texts.append({"type": "text", "text": p["text"]})
    return system, texts


def _dialogue(steps: list[dict], where: str) -> list[dict]:
    """DART's final_messages.json: the instruction from the first prompt, then every answer and screenshot."""
    prompt = steps[0].get("prompt") if steps else None
    if not isinstance(prompt, list):
        raise CuaError(f"{where}: no recorded prompt at step 0; DART's dialogue needs it "
                       "(model.record_tokens: true or model.record_prompt: true)")
    system, texts = _instruction(prompt, where)
    messages = [system, {"role": "user", "content": [*texts, _image(0)]}]
    for i, step in enumerate(steps):
        if i:
            messages.append({"role": "user", "content": [_image(i)]})
        answer = step.get("response")
        if not isinstance(answer, str) and (answer is not None or i < len(steps) - 1):
            raise CuaError(f"{where}: step {i} has no answer text, and DART pairs answers with steps")
        if answer is not None:
            messages.append({"role": "assistant", "content": answer})
    if len(messages) > 2 and messages[-1]["role"] == "user":
        messages.pop()  # DART drops a last screenshot no answer followed
    return messages


def _task_config(t) -> dict:
    """The task (the queue's, or what the episode line tells of it) plus DART's raw {task_type, task_id}."""
    rec = t.record
    task = dict(t.task) or {"task_id": rec["task_id"], "domain": rec.get("domain"),
                            "instruction": rec.get("instruction")}
    if "evaluator" not in task and isinstance(rec.get("evaluator_func"), str):
        task["evaluator"] = {"func": rec["evaluator_func"]}  # DART's reward manager reads evaluator.func
    return {"id": rec["task_id"], **task, "raw": {"task_type": rec.get("domain"), "task_id": rec["task_id"]}}


def _dump(path: Path, obj) -> None:
    """JSON as DART writes it (indent 2, not ASCII-escaped); escaped only where UTF-8 cannot hold a character."""
    try:
        data = json.dumps(obj, ensure_ascii=False, indent=2).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the escaped form reads back the same
        data = json.dumps(obj, indent=2).encode()
    path.write_bytes(data)
