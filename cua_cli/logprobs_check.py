"""`cua check-logprobs`: recompute the logprobs a run recorded with transformers, and compare.

A trainer's importance weights divide its own policy's probabilities by the
ones vLLM reported while sampling; both must come from the same model on the
same input, or every weight is off. This runs the Hugging Face model on each
recorded model call (the prompt's token ids as vLLM tokenized them, the
images the prompt referenced, the response's token ids) and compares its
log-probabilities of the response tokens with the recorded ones.

Answers sampled under guided decoding are not compared: vLLM applies the
grammar's token mask to the logits before it computes logprobs (even in its
default `raw_logprobs` mode), so their logprobs are renormalised over the
tokens the grammar allowed, not the model's own.

torch and transformers are an optional extra (`pip install -e .[check]`):
they are imported inside the functions that need them.
"""

from __future__ import annotations

import math
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from ._util.diag import warn_problems
from .errors import CuaError, InputError
from .runfolder.confined import Refused, open_in, run_root
from .runfolder.reader import RunReader, read_steps, show_path, trajectory_dir
from .runfolder.records import in_range

MAX_ROWS = 20
TOKEN_FIELDS = ("prompt_token_ids", "response_token_ids", "response_logprobs")
WEIGHT_FILES = ("*.safetensors", "*.safetensors.index.json", "*.bin", "*.bin.index.json")


@dataclass
class LogprobReport:
    rows: list[dict]      # one per model call shown: the worst MAX_ROWS when there are more
    summary: str
    max_abs_diff: float   # over every token compared; inf when a call could not be compared
    passed: bool


@dataclass
class _Call:
    trajectory: str       # the trajectory folder, relative to the run's trajectories/
    folder: str           # inside the run folder (runfolder.reader.trajectory_dir)
    step: int
    try_: int             # 0-based, in the order asked; the step's own answer is its last try
    record: dict          # holds the token fields
    prompt: list | None   # the messages sent: every try of a step sends the same
    guided: bool          # sampled under the agent's grammar (the step's `sampling.guided`)
    image_processor: dict | None  # the step's record of what resized its images on the server
    malformed: str | None = None  # what makes its record unusable (`malformed`): it is not compared


def load_policy(model_dir, dtype: str = "float32", device: str = "cpu"):
    """(model, processor) of a Hugging Face vision-language checkpoint, in eval mode on `device`."""
    try:
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor
    except ImportError as e:
        raise CuaError(f"checking logprobs needs torch and transformers ({e}): pip install -e .[check]") from e
    try:
        processor = AutoProcessor.from_pretrained(model_dir)
        model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=getattr(torch, dtype))
    except (OSError, ValueError) as e:
        raise InputError(f"cannot load the model in {model_dir}: {e}") from e
    return model.to(device).eval(), processor


def save_policy(model, base_dir, out_dir) -> None:
    """Save `model` into `out_dir` as a folder `vllm serve` takes, with everything but the weights of `base_dir`.

    The tokenizer, chat template and processor configs are copied as the base
    checkpoint had them, so the new folder formats prompts exactly as before.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for f in Path(base_dir).iterdir():
        if f.is_file() and not any(f.match(p) for p in WEIGHT_FILES):
            shutil.copy2(f, out_dir / f.name)
    model.save_pretrained(out_dir)


def load_image(path):
    """An image as vLLM reads one it is sent: RGB, with any transparency laid over white."""
    from PIL import Image

    image = Image.open(path)
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        image = Image.new("RGB", rgba.size, (255, 255, 255))
        image.paste(rgba, mask=rgba.getchannel("A"))
    return image.convert("RGB")


def response_logprobs(model, processor, prompt_ids, response_ids, images, image_processor: dict | None = None):
    """The model's log-probability of each response token after the prompt: a float32 tensor of len(response_ids).

    `prompt_ids` are the prompt's token ids as vLLM returns them (image
    placeholders already expanded, one token per merged patch); `images`
    are the PIL images the prompt holds, in order; `image_processor` is the
    call's record of what resized them on the server (its pixel limits win
    over the model folder's, as the server's --mm-processor-kwargs did).
    Differentiable when called with grad enabled. Raises ValueError when the
    prompt's image tokens do not fit the images.
    """
    import torch

    ids = torch.tensor([[*prompt_ids, *response_ids]], device=model.device)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    image_token = model.config.image_token_id
    expected = int((ids == image_token).sum())
    if images:
        vision = processor.image_processor(images=list(images), return_tensors="pt", **_size(image_processor))
        inputs.update((k, v.to(model.device)) for k, v in vision.items())
        # Multimodal RoPE: which positions are image tokens (1), the rest text (0).
        inputs["mm_token_type_ids"] = (ids == image_token).int()
        got = int(vision["image_grid_thw"].prod(-1).sum()) // processor.image_processor.merge_size ** 2
    else:
        got = 0
    if got != expected:
        raise ValueError(f"the prompt has {expected} image tokens but its {len(images)} image(s) make {got}")
    # Logits of the last len(response)+1 positions only: a 150k vocabulary over a long prompt is gigabytes.
    logits = model(**inputs, use_cache=False, logits_to_keep=len(response_ids) + 1).logits[0, :-1]
    # float32 log_softmax, as vLLM computes its logprobs from the logits.
    return logits.float().log_softmax(-1).gather(-1, ids[0, len(prompt_ids):, None])[:, 0]


def _size(record) -> dict:
    """The processor's size argument for the pixel limits a call's record names; {} when it names none."""
    if not isinstance(record, dict) or record.get("rule") != "smart_resize":
        return {}
    low, high = record.get("min_pixels"), record.get("max_pixels")
    if not all(type(v) is int and v > 0 for v in (low, high)):
        return {}
    return {"size": {"shortest_edge": low, "longest_edge": high}}


def check_run(run: Path, model_dir: Path, tolerance: float, max_steps: int | None, dtype: str, device: str,
              echo) -> LogprobReport:
    """Compare every recorded logprob of the final attempts in `run` with the model's own."""
    calls = _recorded_calls(run)
    if not calls:
        raise CuaError(f"{run}: no model call has recorded tokens; record the run with `model.record_tokens: true`")
    guided = [c for c in calls if c.guided]
    calls = [c for c in calls if not c.guided]
    if not calls:
        raise CuaError(f"{run}: all {len(guided)} recorded model calls were guided (model.guided: true); vLLM's "
                       "logprobs of guided answers are renormalised over the tokens the grammar allowed, so they "
                       "cannot match the model's: check a run recorded with model.guided: false")
    if all(c.malformed for c in calls):  # named as the run was read: no model need load to say so
        raise CuaError(f"{run}: none of its {len(calls)} recorded model calls can be compared: each is malformed")
    calls = calls[:max_steps]

    echo(f"loading {model_dir} ({dtype}, {device})")
    model, processor = load_policy(model_dir, dtype, device)
    import torch

    results = []
    with torch.no_grad():
        for call in tqdm(calls, unit="call", file=sys.stderr, disable=None, desc="check-logprobs"):
            results.append(_check_call(model, processor, call))
    return _report(results, len(guided), tolerance, model_dir)


def _recorded_calls(run: Path) -> list[_Call]:
    """The model calls with recorded tokens of every final attempt, in (task, sample, step, try) order.
    A call whose record is malformed is named with its file and line, and kept as one that cannot be
    compared: the others are compared all the same."""
    calls = []
    root = run_root(run)
    reader = RunReader(root, strict=True).refresh(warn=True)
    for pair, rec in sorted(reader.final.items()):
        folder = trajectory_dir(root, rec, reader.where(pair))  # a run folder is data: read only inside it
        if folder is None:
            continue
        name = rec["traj"].removeprefix("trajectories/")
        steps, problems, path = read_steps(folder)  # a field of the wrong type is null, and a problem
        found = []
        for n, step in steps:
            sampling = step.get("sampling")
            guided = isinstance(sampling, dict) and sampling.get("guided") is True
            tries = [*(step.get("failed_tries") or []), step]  # a list or null (records.step_record)
            for i, t in enumerate(tries):
                label = f"step {step['step']} try {i}"
                if type(t) is not dict:
                    problems.append((n, f"{label}: malformed: failed_tries[{i}] is not an object; not compared"))
                    continue
                if all(t.get(k) is None for k in TOKEN_FIELDS):
                    continue
                call = _Call(name, folder, step["step"], i, t, step.get("prompt"), guided,
                             step.get("image_processor"), malformed(t))
                if call.malformed:
                    problems.append((n, f"{label}: malformed: {call.malformed}; not compared"))
                found.append(call)
        warn_problems(path, sorted(problems))
        calls += found
    return calls


def malformed(record: dict) -> str | None:
    """What makes a recorded call's token fields unusable, or None: the prompt's and the response's
    token ids must be non-empty lists of integers >= 0, the logprobs finite numbers, one per response
    token. Checked as the run is read, before a model is loaded (its vocabulary: `_token_fields`)."""
    for key in TOKEN_FIELDS[:2]:
        ids = record.get(key)
        if ids is None:
            return f"{key} is missing"
        if not (type(ids) is list and ids and all(type(t) is int and t >= 0 for t in ids)):
            return f"{key} is not a non-empty list of integers >= 0"
    logprobs = record.get("response_logprobs")
    if logprobs is None:
        return "response_logprobs is missing"
    if not (type(logprobs) is list and all(in_range(v) for v in logprobs)):
        return "response_logprobs is not a list of finite numbers"
    if len(logprobs) != len(record["response_token_ids"]):
        return f"{len(record['response_token_ids'])} response tokens but {len(logprobs)} logprobs"
    return None


def _check_call(model, processor, call: _Call) -> dict:
    """One call's row; the per-token differences (None when it could not be compared) under '_diffs'."""
    row = {"trajectory": call.trajectory, "step": call.step, "try": call.try_, "tokens": None,
           "max_abs_diff": None, "mean_abs_diff": None, "problem": None, "_diffs": None, "_skipped": False}
    if call.malformed:
        row["problem"] = f"malformed: {call.malformed}"
        return row
    try:
        prompt_ids, response_ids, recorded = _token_fields(call.record, model.config.get_text_config().vocab_size)
        row["tokens"] = len(response_ids)
        # vLLM reads a sampled image placeholder as text; transformers would take it for an image: not comparable.
        if model.config.image_token_id in response_ids:
            row["_skipped"] = True
            return row
        images = _images(call)
        ours = response_logprobs(model, processor, prompt_ids, response_ids, images, call.image_processor)
    except (ValueError, OSError, RuntimeError, IndexError) as e:
        # Bad or missing records, images or shapes fail this call only; the others are still checked.
        row["problem"] = str(e).splitlines()[0] if str(e) else type(e).__name__
        return row
    import torch

    diffs = (ours.double().cpu() - torch.tensor(recorded, dtype=torch.float64)).abs()
    row.update(max_abs_diff=float(diffs.max()), mean_abs_diff=float(diffs.mean()), _diffs=diffs)
    return row


def _token_fields(record: dict, vocab: int) -> tuple[list[int], list[int], list[float]]:
    """The prompt ids, response ids and logprobs of a call that is not `malformed`; ValueError when an id
    is beyond the model's vocabulary."""
    prompt_ids, response_ids, logprobs = (record[k] for k in TOKEN_FIELDS)
    for key, ids in (("prompt_token_ids", prompt_ids), ("response_token_ids", response_ids)):
        if max(ids) >= vocab:
            raise ValueError(f"{key} holds an id beyond the model's {vocab}-token vocabulary")
    return prompt_ids, response_ids, logprobs


def _images(call: _Call) -> list:
    """The images of the call's prompt, in order, read from its trajectory folder."""
    from PIL import Image

    images = []
    for f in _image_files(call.prompt):
        try:
            with open_in(call.folder, f) as data:
                images.append(load_image(data))
        except Refused as e:
            raise ValueError(f"image {show_path(f)} {e}; not read") from None
        except FileNotFoundError:
            raise ValueError(f"image {show_path(f)} is missing from {call.folder}") from None
        except Image.DecompressionBombError as e:  # a crafted file: this call fails, the others go on
            raise ValueError(f"image {show_path(f)}: {e}") from None
    return images


def _image_files(prompt) -> list[str]:
    """The image files a recorded prompt references, in the order they appear."""
    if prompt is None:
        return []
    if not isinstance(prompt, list):
        raise ValueError("the recorded prompt is not a list of messages")
    files = []
    for m in prompt:
        content = m.get("content") if isinstance(m, dict) else None
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "image_file":
                if not isinstance(part.get("file"), str):
                    raise ValueError(f"an image part of the prompt names no file: {part}")
                files.append(part["file"])
    return files


def _report(results: list[dict], guided: int, tolerance: float, model_dir: Path) -> LogprobReport:
    compared = [r for r in results if r["_diffs"] is not None]
    skipped = sum(r["_skipped"] for r in results)
    failed = len(results) - len(compared) - skipped
    tokens = sum(r["tokens"] for r in compared)
    worst = max(compared, key=lambda r: r["max_abs_diff"], default=None)
    max_diff = math.inf if failed else worst["max_abs_diff"] if worst else 0.0
    passed = not failed and max_diff <= tolerance
    parts = [f"Compared {len(compared)} model calls ({tokens} response tokens) with {model_dir}"]
    if worst:
        mean = sum(float(r["_diffs"].sum()) for r in compared) / tokens
        at = int(worst["_diffs"].argmax())
        parts.append(f"max |logprob difference| {worst['max_abs_diff']:.3g} (at {worst['trajectory']} step "
                     f"{worst['step']} try {worst['try']}, response token {at}), mean {mean:.3g}")
    if failed:
        parts.append(f"{failed} more could not be compared (see 'problem')")
    if guided:
        parts.append(f"{guided} guided calls skipped (vLLM's logprobs of guided answers are after the grammar mask)")
    if skipped:
        parts.append(f"{skipped} answers holding the image placeholder token skipped (transformers would read it "
                     "as an image)")
    rows = results
    if len(results) > MAX_ROWS:
        rows = sorted(results, key=lambda r: (r["problem"] is None, -(r["max_abs_diff"] or 0)))[:MAX_ROWS]
        parts.append(f"the table shows the {MAX_ROWS} worst calls")
    verdict = "passed" if passed else "FAILED"
    summary = "; ".join(parts) + f". Tolerance {tolerance:g}: {verdict}."
    shown = [{k: v for k, v in r.items() if not k.startswith("_") and (k != "problem" or failed)}
             for r in rows if not r["_skipped"]]
    return LogprobReport(shown, summary, max_diff, passed)
