"""DartFolderSink: a hand-made cua run folder written as DART-GUI's rollouter lays out a trajectory,
read back with torch and with `cua stats`."""

import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch  # the [dart] extra (and the [test] one)
from helpers.cli import run_cua
from PIL import Image as PILImage

from cua_cli.agents.uitars import UITarsAgent
from cua_cli.dart.folders import TMP_DIR, DartFolderSink, folder_part
from cua_cli.errors import CuaError
from cua_cli.models import Image, by_file
from cua_cli.runfolder.names import encode_task_id

EOS = 151645  # <|im_end|>: vLLM's sampled tokens end with it


@dataclass(frozen=True)
class Finished:
    """Built the way cua_cli.runfolder.finished.Finished is (same fields, same steps())."""
    run_id: str
    run_dir: Path
    record: dict
    traj_dir: Path
    task: dict
    trace_id: str

    def steps(self) -> list[dict]:
        lines = (self.traj_dir / "traj.jsonl").read_text().splitlines()
        return sorted((json.loads(x) for x in lines if x.strip()), key=lambda s: s["step"])


def png(i: int) -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", (8 + i, 6), (40 * i % 256, 10, 200)).save(buf, format="PNG")
    return buf.getvalue()


def make_attempt(run: Path, task_id="chrome-task", sample=0, attempt=0, n_steps=3, outcome="success",
                 score=1.0, stop_reason="finished", tokens=True, prompts=True) -> Finished:
    """A run folder's attempt as `cua rollout` with model.record_tokens writes it: UI-TARS prompts
    (two screenshots in the window), screenshots, tokens and logprobs."""
    traj_rel = f"trajectories/{encode_task_id(task_id)}/{sample}_{attempt}"
    traj = run / traj_rel
    traj.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"run_id": run.name}))
    agent, history, lines = UITarsAgent(history_images=2), [], []
    for k in range(n_steps):
        shot = Image(png(k), f"step_{k:04d}.png")
        (traj / shot.file).write_bytes(shot.png)
        answer = f"Thought: step {k}.\nAction: click(start_box='({k},{k})')"
        line = {"step": k, "screenshot": shot.file, "response": answer}
        if prompts:
            line["prompt"] = by_file(agent.build_messages("Open the menu_bar", history, shot))
        if tokens:
            line.update(prompt_token_ids=list(range(100 + k)), response_token_ids=[7, k, EOS],
                        response_logprobs=[-0.5, -0.25 * k, 0])
        lines.append(line)
        history.append((shot, answer))
    (traj / "traj.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    record = {"task_id": task_id, "domain": "chrome", "sample": sample, "attempt": attempt, "outcome": outcome,
              "reward": score, "score": score, "steps": n_steps, "stop_reason": stop_reason, "traj": traj_rel,
              "instruction": "Open the menu_bar"}
    task = {"task_id": task_id, "domain": "chrome", "instruction": "Open the menu_bar", "config": [{"type": "x"}],
            "evaluator": {"func": "exact_match"}}
    return Finished(run.name, run, record, traj, task, f"tr{sample}-{attempt}")


def test_layout_tensors_messages_reward_and_config(tmp_path):
    f = make_attempt(tmp_path / "run")
    root = tmp_path / "dart"
    name = DartFolderSink(root).write(f)
    out = root / name
    assert name == "chrome-task_tr0-0"
    assert sorted(p.name for p in out.iterdir()) == [
        "data_for_step_1.pt", "data_for_step_2.pt", "data_for_step_3.pt", "final_messages.json",
        "image_0000.png", "image_0001.png", "image_0002.png", "reward.txt", "reward_from_env.txt",
        "task_config.json"]
    for k in range(3):  # image_k is the screenshot the model saw at step k, byte for byte
        assert (out / f"image_{k:04d}.png").read_bytes() == (f.traj_dir / f"step_{k:04d}.png").read_bytes()
        d = torch.load(out / f"data_for_step_{k + 1}.pt")
        assert set(d) == {"logp", "token_ids", "prompt_token_ids"}
        assert d["logp"].dtype == torch.float32 and d["token_ids"].dtype == torch.int64
        assert d["prompt_token_ids"].dtype == torch.int64 and d["prompt_token_ids"].dim() == 1
        assert d["token_ids"].tolist() == [7, k, EOS] and len(d["logp"]) == 3
        assert d["logp"].tolist() == pytest.approx([-0.5, -0.25 * k, 0])
        assert d["prompt_token_ids"].tolist() == list(range(100 + k))
    messages = json.loads((out / "final_messages.json").read_text())
    # The whole dialogue, though the last prompt kept only two screenshots.
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert messages[0] == {"role": "system", "content": "You are a helpful assistant."}
    text, first = messages[1]["content"]
    assert text["type"] == "text" and "Open the menu_bar" in text["text"]
    assert first == {"type": "image_url", "image_url": "image_0000.png"}
    assert [m["content"] for m in messages[3::2]] == [[{"type": "image_url", "image_url": f"image_{k:04d}.png"}]
                                                      for k in (1, 2)]
    assert [m["content"] for m in messages[2::2]] == [json.loads(x)["response"]
                                                      for x in (f.traj_dir / "traj.jsonl").read_text().splitlines()]
    assert (out / "reward.txt").read_text() == "1.0" == (out / "reward_from_env.txt").read_text()
    cfg = json.loads((out / "task_config.json").read_text())
    assert cfg["raw"] == {"task_type": "chrome", "task_id": "chrome-task"}
    assert cfg["id"] == "chrome-task" and cfg["instruction"] == "Open the menu_bar"
    assert cfg["evaluator"] == {"func": "exact_match"} and cfg["config"] == [{"type": "x"}]
    assert list((root / TMP_DIR).iterdir()) == []


def test_second_write_finds_the_folder_and_leaves_it(tmp_path):
    f = make_attempt(tmp_path / "run")
    sink = DartFolderSink(tmp_path / "dart")
    name = sink.write(f)
    (tmp_path / "dart" / name / "reward.txt").write_text("marker")
    assert sink.write(f) == name
    assert (tmp_path / "dart" / name / "reward.txt").read_text() == "marker"
    assert [p.name for p in (tmp_path / "dart").iterdir() if p.name != TMP_DIR] == [name]


def test_hostile_task_id_stays_inside_and_cua_stats_reads_the_root(tmp_path):
    root = tmp_path / "dart"
    sink = DartFolderSink(root)
    odd = "../a/b c_d"
    names = [sink.write(make_attempt(tmp_path / "run", odd, sample=0)),
             sink.write(make_attempt(tmp_path / "run", odd, sample=1, outcome="failure", score=0.0)),
             sink.write(make_attempt(tmp_path / "run", "t2", n_steps=1, outcome="error", score=None,
                                     stop_reason="model_error")),
             sink.write(make_attempt(tmp_path / "run", "t3", n_steps=2, outcome="error", score=None,
                                     stop_reason="env_error"))]
    for name in names:
        assert "/" not in name and (root / name).resolve().parent == root.resolve()
        # DART's trainer takes the task id up to the first `_`, cua stats up to the last: the same
        assert name.split("_")[0] == name.rsplit("_", 1)[0]
    assert names[0].split("_")[0] == folder_part(odd) == "%2E.%2Fa%2Fb%20c%5Fd"
    assert (root / names[2] / "reward.txt").read_text() == "-2"
    assert not (root / names[3] / "reward.txt").exists()  # ended before its evaluation: DART leaves none
    assert not (root / names[3] / "final_messages.json").exists()
    r = run_cua("stats", str(root), "--format", "json")
    assert r.returncode == 0, r.stderr
    (run,) = json.loads(r.stdout)["runs"]
    assert run["layout"] == "dart"
    assert (run["scheduled"], run["finished"], run["missing"], run["errors"]) == (4, 3, 1, 1)
    assert run["errors_by_stop_reason"] == {"model_error": 1}
    assert run["success_rate"] == pytest.approx(1 / 4)
    assert set(run["domains"]) == {"chrome"}


def test_steps_without_tokens_get_darts_empty_tensors(tmp_path):
    f = make_attempt(tmp_path / "run", tokens=False)
    out = tmp_path / "dart" / DartFolderSink(tmp_path / "dart").write(f)
    for k in (1, 2, 3):
        d = torch.load(out / f"data_for_step_{k}.pt")
        assert all(v.dtype == torch.float32 and v.shape == (0,) for v in d.values())


def test_model_error_at_the_last_step_drops_its_screenshot_message(tmp_path):
    f = make_attempt(tmp_path / "run", outcome="error", score=None, stop_reason="model_error")
    lines = f.steps()
    lines[-1].update(response=None, response_token_ids=None, response_logprobs=None)
    (f.traj_dir / "traj.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "dart" / DartFolderSink(tmp_path / "dart").write(f)
    messages = json.loads((out / "final_messages.json").read_text())
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant"]
    assert (out / "image_0002.png").exists() and (out / "data_for_step_3.pt").exists()
    assert torch.load(out / "data_for_step_3.pt")["logp"].shape == (0,)


@pytest.mark.parametrize("spoil", ["no prompt", "no screenshot", "escaping screenshot", "logprobs short", "gap"])
def test_unusable_trajectories_are_refused_and_leave_nothing(tmp_path, spoil):
    f = make_attempt(tmp_path / "run", prompts=spoil != "no prompt")
    lines = f.steps()
    if spoil == "no screenshot":
        lines[1]["screenshot"] = None
    elif spoil == "escaping screenshot":
        (tmp_path / "run" / "x.png").write_bytes(png(9))
        lines[2]["screenshot"] = "../../../x.png"
    elif spoil == "logprobs short":
        lines[1]["response_logprobs"] = [-1.0]
    elif spoil == "gap":
        lines[1]["step"] = 5
    (f.traj_dir / "traj.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    root = tmp_path / "dart"
    with pytest.raises(CuaError):
        DartFolderSink(root).write(f)
    assert [p.name for p in root.iterdir()] == [TMP_DIR] and list((root / TMP_DIR).iterdir()) == []


def test_without_torch_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(CuaError, match=r"pip install -e \.\[dart\]"):
        DartFolderSink(tmp_path / "dart").write(make_attempt(tmp_path / "run"))
