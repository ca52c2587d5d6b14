"""`cua check-logprobs` and scripts/train_step_example.py on the tiny model, without vLLM.

The recorded logprobs are computed here the plain way (the processor's own
inputs, every position's logits), so a check that rebuilds the model's input
differently from how vLLM sees it, or reads the wrong positions, fails.
"""
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from helpers.cli import ROOT, run_cua
from helpers.models import build_tiny_vlm
from PIL import Image

pytestmark = pytest.mark.slow  # torch and transformers on a real recorded run

TOKEN_FIELDS = ("prompt_token_ids", "response_token_ids", "response_logprobs")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_vlm(tmp_path_factory.mktemp("tinyvlm") / "model")


def _recorded(model, proc, messages, images, answer):
    """A model call as cua records it, with the logprobs computed from the processor's own inputs."""
    wire = [{"role": m["role"], "content": m["content"] if isinstance(m["content"], str) else
             [{"type": "image"} if p["type"] == "image_file" else p for p in m["content"]]} for m in messages]
    text = proc.apply_chat_template(wire, add_generation_prompt=True, tokenize=False)
    inputs = proc(text=[text], images=images or None, return_tensors="pt")
    prompt = inputs["input_ids"][0].tolist()
    response = proc.tokenizer(answer)["input_ids"] + [proc.tokenizer.convert_tokens_to_ids("<|im_end|>")]
    inputs["input_ids"] = torch.tensor([prompt + response])
    inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
    if "mm_token_type_ids" in inputs:
        inputs["mm_token_type_ids"] = torch.cat([inputs["mm_token_type_ids"], torch.zeros(1, len(response))], 1).int()
    with torch.no_grad():
        logp = model(**inputs).logits[0].log_softmax(-1)
    lps = [logp[len(prompt) + i - 1, t].item() for i, t in enumerate(response)]
    return {"response": answer, "prompt_token_ids": prompt, "response_token_ids": response,
            "response_logprobs": lps, "finish_reason": "stop"}


def _png(path: Path, w: int, h: int, seed: int) -> Image.Image:
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path)
    return Image.open(path).convert("RGB")


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def run(model_dir, tmp_path_factory):
    """A run of two tasks: a GUI trajectory of 2 steps (1 then 2 images, a failed try) and a text one."""
    model = transformers.AutoModelForImageTextToText.from_pretrained(model_dir, dtype=torch.float32).eval()
    proc = transformers.AutoProcessor.from_pretrained(model_dir)
    run = tmp_path_factory.mktemp("run")
    gui, text = run / "trajectories/gui/0_0", run / "trajectories/text/0_0"
    gui.mkdir(parents=True)
    text.mkdir(parents=True)
    sampling = {"temperature": 1.0, "max_tokens": 64, "guided": False}
    shots = [_png(gui / "step_0000.png", 160, 210, 0), _png(gui / "step_0001.png", 300, 200, 1)]
    first = [{"role": "user", "content": [{"type": "image_file", "file": "step_0000.png"},
                                          {"type": "text", "text": "Click OK."}]}]
    step0 = _recorded(model, proc, first, shots[:1], "Thought: ok\nAction: click(start_box='(1,2)')")
    second = first + [{"role": "assistant", "content": step0["response"]},
                      {"role": "user", "content": [{"type": "image_file", "file": "step_0001.png"},
                                                   {"type": "text", "text": "Again."}]}]
    failed = _recorded(model, proc, second, shots, "no action here")
    step1 = _recorded(model, proc, second, shots, "Action: finished()")
    _jsonl(gui / "traj.jsonl", [
        {"step": 0, "screenshot": "step_0000.png", "prompt": first, "sampling": sampling, **step0},
        {"step": 1, "screenshot": "step_0001.png", "prompt": second, "sampling": sampling, **step1,
         "failed_tries": [{**failed, "error": "parse: no action"}]}])
    words = [{"role": "user", "content": "You are in a room. What do you do?"}]
    text0 = _recorded(model, proc, words, [], "Action: look")
    guided = dict(text0, response_logprobs=[0.0] * len(text0["response_token_ids"]))  # after a grammar mask
    _jsonl(text / "traj.jsonl", [
        {"step": 0, "screenshot": None, "prompt": words, "sampling": sampling, **text0},
        {"step": 1, "screenshot": None, "prompt": words, "sampling": dict(sampling, guided=True), **guided}])
    (run / "run.json").write_text(json.dumps({"format_version": 2, "run_id": "fabricated"}))
    _jsonl(run / "scheduled.jsonl", [{"task_id": t, "domain": "d", "sample": 0} for t in ("gui", "text")])
    _jsonl(run / "episodes.jsonl", [
        {"task_id": t, "domain": "d", "sample": 0, "attempt": 0, "outcome": o, "reward": s, "score": s,
         "steps": 2, "stop_reason": "finished", "duration_s": 1.0, "error": None, "traj": f"trajectories/{t}/0_0"}
        for t, o, s in (("gui", "success", 1.0), ("text", "failure", 0.0))])
    return run


def _copy(run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run, tmp_path / "run"))


def _edit_step(run: Path, traj: str, step: int, edit) -> None:
    path = run / "trajectories" / traj / "0_0" / "traj.jsonl"
    lines = [json.loads(s) for s in path.read_text().splitlines()]
    edit(lines[step])
    _jsonl(path, lines)


def test_agreeing_logprobs_pass(run, model_dir):
    r = run_cua("check-logprobs", str(run), "--model", str(model_dir))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Compared 4 model calls" in r.stdout and "passed" in r.stdout
    assert "1 guided calls skipped" in r.stdout
    for row in ("gui/0_0", "text/0_0"):
        assert row in r.stdout


def test_one_corrupted_logprob_fails_naming_the_call(run, model_dir, tmp_path):
    bad = _copy(run, tmp_path)

    def corrupt(step):
        step["failed_tries"][0]["response_logprobs"][2] += 0.5
    _edit_step(bad, "gui", 1, corrupt)
    r = run_cua("check-logprobs", str(bad), "--model", str(model_dir))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "at gui/0_0 step 1 try 0, response token 2" in r.stdout and "FAILED" in r.stdout
    assert "logprobs differ by up to 0.5" in r.stderr


def test_a_run_without_tokens_says_how_to_record_them(run, model_dir, tmp_path):
    bare = _copy(run, tmp_path)
    for traj in ("gui", "text"):
        path = bare / "trajectories" / traj / "0_0" / "traj.jsonl"
        _jsonl(path, [{k: v for k, v in json.loads(s).items() if k not in TOKEN_FIELDS + ("failed_tries",)}
                      for s in path.read_text().splitlines()])
    r = run_cua("check-logprobs", str(bare), "--model", str(model_dir))
    assert r.returncode == 1 and "model.record_tokens: true" in r.stderr, r.stdout + r.stderr


def test_a_run_of_guided_answers_only_is_refused(run, model_dir, tmp_path):
    guided = _copy(run, tmp_path)
    for traj, steps in (("gui", 2), ("text", 2)):
        for n in range(steps):
            _edit_step(guided, traj, n, lambda step: step["sampling"].update(guided=True))
    r = run_cua("check-logprobs", str(guided), "--model", str(model_dir))
    assert r.returncode == 1 and "were guided" in r.stderr and "grammar" in r.stderr, r.stdout + r.stderr


def test_bad_calls_fail_with_a_row_and_the_others_are_checked(run, model_dir, tmp_path):
    bad = _copy(run, tmp_path)
    _edit_step(bad, "gui", 0, lambda step: step["response_logprobs"].pop())
    (bad / "trajectories/gui/0_0/step_0001.png").unlink()
    r = run_cua("check-logprobs", str(bad), "--model", str(model_dir))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert "response tokens but" in r.stdout and "step_0001.png" in r.stdout
    assert "Compared 1 model calls" in r.stdout and "3 more could not be compared" in r.stdout


def test_malformed_lines_are_named_and_the_rest_compared(run, model_dir, tmp_path):
    bad = _copy(run, tmp_path)
    _edit_step(bad, "gui", 0, lambda step: step.update(failed_tries=3))

    def tries(step):
        step["failed_tries"] = [True, {**step["failed_tries"][0], "response_token_ids": "abc"}]
    _edit_step(bad, "gui", 1, tries)
    _edit_step(bad, "text", 0, lambda step: step.update(prompt={"role": "user", "content": "a dict"}))
    r = run_cua("check-logprobs", str(bad), "--model", str(model_dir))
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    gui, text = (bad / "trajectories" / t / "0_0" / "traj.jsonl" for t in ("gui", "text"))
    for line in (f"{gui}:1: step 0: read without what is malformed: failed_tries is a number, not a list",
                 f"{gui}:2: step 1 try 0: malformed: failed_tries[0] is not an object; not compared",
                 f"{gui}:2: step 1 try 1: malformed: response_token_ids is not a non-empty list of integers >= 0",
                 f"{text}:1: step 0: read without what is malformed: prompt is an object, not a list"):
        assert line in r.stderr, r.stderr
    # The rest: step 0's and step 1's own answers, the text step (its prompt ids are what the model read).
    assert "Compared 3 model calls" in r.stdout and "1 more could not be compared" in r.stdout, r.stdout
    assert "malformed: response_token_ids" in r.stdout


def test_train_step_example_saves_a_loadable_updated_model(run, model_dir, tmp_path):
    rows = []
    for traj, reward in (("gui", 1.0), ("text", 0.0)):
        for step in map(json.loads, (run / "trajectories" / traj / "0_0" / "traj.jsonl").read_text().splitlines()):
            images = [{"path": f"trajectories/{traj}/0_0/{p['file']}", "width": 1, "height": 1,
                       "sha256": hashlib.sha256((run / "trajectories" / traj / "0_0" / p["file"]).read_bytes())
                       .hexdigest()}
                      for m in step["prompt"] if isinstance(m["content"], list)
                      for p in m["content"] if p["type"] == "image_file"]
            rows.append({"group_id": "g", "trajectory_id": traj, "run_dir": str(run), "images": images,
                         **{k: step[k] for k in TOKEN_FIELDS},
                         "traj_reward": reward, "group_mean": 0.5, "group_std": 0.5,
                         "outcome": "success" if reward else "failure"})
    rows.append(dict(rows[0], outcome="error", traj_reward=None))
    export, out = tmp_path / "rows.jsonl", tmp_path / "ckpt"
    _jsonl(export, rows)
    r = subprocess.run([sys.executable, str(ROOT / "scripts/train_step_example.py"), str(export),
                        "--model", str(model_dir), "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rows: 4 used (0 guided), 1 skipped" in r.stdout and "loss" in r.stdout

    for name in ("chat_template.jinja", "tokenizer.json", "preprocessor_config.json", "model.safetensors"):
        assert (out / name).is_file(), name
    before = transformers.AutoModelForImageTextToText.from_pretrained(model_dir).state_dict()
    after = transformers.AutoModelForImageTextToText.from_pretrained(out).state_dict()
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    proc = transformers.AutoProcessor.from_pretrained(out)
    assert proc.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False).startswith("<|im_start|>")
