"""`cua export --format atif`: Harbor ATIF v1.8 trajectories, checked with the `atif` package's own models.

A real rollout (the `cua` CLI, the openai provider against a loopback model stand-in, an env cluster
stand-in whose screen changes every step) gives the shape; the hand-built logprob-bearing runs of
test_export.py give the token fields, failed tries and hostile lines.
"""

import base64
import hashlib
import io
import json
import os
from pathlib import Path

import atif
import pytest
from helpers.cli import run_cua
from helpers.servers import ClusterStandIn, ModelStandIn
from PIL import Image as PILImage
from test_export import RunFolder, png, step_line

from cua_cli.errors import InputError
from cua_cli.export import ExportOptions, export_runs
from cua_cli.runfolder.jsonl import read_lines
from cua_cli.runfolder.names import encode_task_id

ANSWER = "Thought: the button.\nAction: click(start_box='(10,20)')"


class ChangingScreens(ClusterStandIn):
    """Every screenshot a PNG of its own colour, so each step's image has its own bytes."""

    def __init__(self):
        super().__init__()
        self.shots = 0

    def answer(self, method, path, body):
        if path.startswith("/server/execute/") and json.loads(body).get("action") == "screenshot":
            with self._lock:
                self.shots += 1
                n = self.shots
            out = io.BytesIO()
            PILImage.new("RGB", (64, 48), (n * 37 % 256, n * 91 % 256, 200)).save(out, "PNG")
            return 200, out.getvalue()
        return super().answer(method, path, body)


def load(path: Path) -> atif.Trajectory:
    """An exported file through the atif package's models: what a consumer of ATIF reads."""
    return atif.Trajectory.model_validate_json(path.read_bytes())


def exported(out: Path) -> dict[str, Path]:
    """trajectory_id -> file, of every trajectory.json under `out`."""
    files = list(out.rglob("trajectory.json"))
    return {json.loads(f.read_text())["trajectory_id"]: f for f in files}


def image_paths(doc: atif.Trajectory) -> list[str]:
    parts = [p for s in doc.steps if isinstance(s.message, list) for p in s.message]
    parts += [p for s in doc.steps if s.observation for r in s.observation.results
              if isinstance(r.content, list) for p in r.content]
    return [p.source.path for p in parts if p.type == "image"]


@pytest.fixture(scope="module")
def rollout(tmp_path_factory):
    """A real `cua rollout`: 2 tasks x 2 samples of 3 steps, the model asked through a fleet file."""
    work = tmp_path_factory.mktemp("atif-rollout")
    (work / "tasks.jsonl").write_text("".join(json.dumps({"task_id": t, "instruction": f"Click {t}."}) + "\n"
                                              for t in ("a", "b/c")))
    with ModelStandIn(ANSWER) as model, ChangingScreens() as env:
        (work / "fleet.json").write_text(json.dumps({"supervisor_pid": 1, "servers": [
            {"url": model.url, "served_model_name": "m", "model": "m", "model_dir": None, "mm_processor_kwargs": {}}]}))
        (work / "exp.yaml").write_text(f"""
run: {{name: atif, results_dir: results}}
tasks: {{kind: jsonl, jsonl: tasks.jsonl, rollout_n: 2}}
env: {{url: "{env.url}"}}
model: {{provider: openai, fleet: fleet.json, record_prompt: true}}
agent: {{history_images: 2}}
runner: {{num_envs: 2, max_steps: 3, max_attempts: 1}}
""")
        r = run_cua("rollout", "exp.yaml", cwd=work)
        assert r.returncode == 0, r.stderr
    (run,) = (work / "results").iterdir()
    return work, run


def test_every_attempt_becomes_an_atif_file_its_models_accept(rollout, tmp_path):
    _, run = rollout
    out = tmp_path / "atif"
    r = run_cua("export", str(run), "--format", "atif", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "files written" in r.stdout and "trajectories skipped" in r.stdout
    finals = read_lines(run / "episodes.jsonl")
    files = exported(out)
    assert len(files) == len(finals) == 4
    assert [p.name for p in tmp_path.iterdir()] == ["atif"]  # no temporary folder left
    for rec in finals:
        f = files[f"{run.name}/{rec['traj']}"]
        assert f.parent == out / run.name / encode_task_id(rec["task_id"]) / f"{rec['sample']}_{rec['attempt']}"
        doc = load(f)
        steps = read_lines(run / rec["traj"] / "traj.jsonl")
        assert doc.schema_version == "ATIF-v1.8" and doc.session_id == run.name
        assert (doc.agent.name, doc.agent.model_name, doc.agent.extra) == ("cua", "m", {"agent": "uitars",
                                                                                      "provider": "openai"})
        assert len(doc.steps) == len(steps) + 1 == doc.final_metrics.total_steps
        user, agents = doc.steps[0], doc.steps[1:]
        assert user.source == "user" and user.message[0].text == rec["instruction"]
        assert user.message[1].source.path == steps[0]["screenshot"]
        for k, (step, st) in enumerate(zip(agents, steps)):
            assert step.source == "agent" and step.message == st["response"] == ANSWER
            assert [(c.function_name, {"type": c.function_name, **c.arguments}) for c in step.tool_calls] == [
                (a["type"], a) for a in st["action"]]
            if k + 1 < len(steps):  # what the agent saw after acting: the next step's screenshot
                (result,) = step.observation.results
                assert result.content[0].source.path == steps[k + 1]["screenshot"]
            else:
                assert step.observation is None
            # The images the model was sent at this step, as the step recorded them when it sent them.
            assert step.extra["images"] == [{"path": i["file"], "sha256": i["sha256"]} for i in st["images"]]
            assert [i["file"] for i in st["images"]] == [f"step_{j:04d}.png" for j in range(max(0, k - 1), k + 1)]
            assert step.extra["image_processor"] == st["image_processor"]
            assert step.extra["commands"] == st["commands"] and step.metrics is None  # no tokens recorded
        assert (doc.extra["outcome"], doc.extra["score"], doc.extra["task_id"], doc.extra["sample"]) == (
            rec["outcome"], rec["score"], rec["task_id"], rec["sample"])
        assert doc.extra["group_size"] == 2
        # Images are relative files beside the trajectory, byte for byte the run's.
        paths = image_paths(doc) + [i["path"] for s in agents for i in s.extra["images"]]
        assert paths and all(not os.path.isabs(p) and "/" not in p for p in paths)
        for p in set(paths):
            assert (f.parent / p).read_bytes() == (run / rec["traj"] / p).read_bytes()
        for i in (i for s in agents for i in s.extra["images"]):
            assert hashlib.sha256((f.parent / i["path"]).read_bytes()).hexdigest() == i["sha256"]


def test_a_step_records_the_hash_of_each_image_it_sent(tmp_path):
    """The sha256 a step records is of the bytes the model server got, in prompt order, and the server's
    processor settings come from the fleet file's model folder and flags."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "Qwen2VLImageProcessor", "patch_size": 14, "merge_size": 2,
        "min_pixels": 3136, "max_pixels": 1003520}))
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"task_id": "a", "instruction": "Click."}) + "\n")
    bodies = []

    class Recording(ModelStandIn):
        def answer(self, method, path, body):
            if path.endswith("/chat/completions"):
                bodies.append(json.loads(body))
            return super().answer(method, path, body)

    with Recording(ANSWER) as model, ChangingScreens() as env:
        (tmp_path / "fleet.json").write_text(json.dumps({"supervisor_pid": 1, "servers": [
            {"url": model.url, "served_model_name": "m", "model": "m", "model_dir": str(model_dir),
             "mm_processor_kwargs": {"max_pixels": 12544}}]}))
        (tmp_path / "exp.yaml").write_text(f"""
run: {{name: sent, results_dir: results}}
tasks: {{kind: jsonl, jsonl: tasks.jsonl}}
env: {{url: "{env.url}"}}
model: {{provider: openai, fleet: fleet.json, image_uuids: false}}
agent: {{history_images: 3}}
runner: {{num_envs: 1, max_steps: 4, max_attempts: 1}}
""")
        r = run_cua("rollout", "exp.yaml", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    (run,) = (tmp_path / "results").iterdir()
    (rec,) = read_lines(run / "episodes.jsonl")
    steps = read_lines(run / rec["traj"] / "traj.jsonl")
    assert len(steps) == len(bodies) == 4
    for st, body in zip(steps, bodies):
        urls = [p["image_url"]["url"] for m in body["messages"] if isinstance(m["content"], list)
                for p in m["content"] if p["type"] == "image_url"]
        sent = [hashlib.sha256(base64.b64decode(u.split(",", 1)[1])).hexdigest() for u in urls]
        assert [i["sha256"] for i in st["images"]] == sent and len(set(sent)) == len(sent) == min(st["step"] + 1, 3)
        assert [hashlib.sha256((run / rec["traj"] / i["file"]).read_bytes()).hexdigest() for i in st["images"]] == sent
        assert st["image_processor"] == {
            "resized_by": "server", "config": str(model_dir / "preprocessor_config.json"),
            "server_kwargs": {"max_pixels": 12544}, "type": "Qwen2VLImageProcessor", "rule": "smart_resize",
            "factor": 28, "min_pixels": 3136, "max_pixels": 12544}
    rows = [json.loads(x) for x in _export_rows(run, tmp_path)]
    assert [r["image_processor"] for r in rows] == [st["image_processor"] for st in steps]


def _export_rows(run, tmp_path) -> list[str]:
    out = tmp_path / "rows.jsonl"
    export_runs([run], out, "jsonl", ExportOptions())
    return out.read_text().splitlines()


def test_tokens_and_logprobs_round_trip_exactly_failed_tries_in_extra(tmp_path):
    tries = [{"response": "bad 0", "error": "parse: no action", "prompt_token_ids": [1, 2],
              "response_token_ids": [5], "response_logprobs": [-3.0000000000000004], "finish_reason": "length"},
             {"response": "bad 1", "error": "env refused the action: no", "token_ids": [6, 7],
              "logprobs": [-1, -2.5e-300], "policy_version": 9}]
    lines = [step_line(0, 2, failed_tries=tries, parse_retries=2, response_logprobs=[-0.1, -1e-12]),
             {k: v for k, v in step_line(1, 2, token_ids=[8], logprobs=[-0.30000000000000004]).items()
              if k not in ("response_token_ids", "response_logprobs", "prompt_token_ids")},
             step_line(4, 2, response_token_ids=[1, 2, 3], response_logprobs=[-0.5, 0, -7.25])]  # steps 2, 3 lost
    r = RunFolder(tmp_path, "run")
    traj = r.attempt("t", 0, "success", steps=3, lines=[json.dumps(x) for x in lines])
    run = r.write()
    out = tmp_path / "atif"
    summary = export_runs([run], out, "atif", ExportOptions(failed_tries=True))
    assert summary["files written"] == 1
    (f,) = exported(out).values()
    doc = load(f)
    recorded = read_lines(run / traj / "traj.jsonl")
    assert [s.step_id for s in doc.steps] == [1, 2, 3, 4] and [s.extra["step"] for s in doc.steps[1:]] == [0, 1, 4]
    s0, s1, s2 = (s.metrics for s in doc.steps[1:])
    assert (s0.prompt_token_ids, s0.completion_token_ids, s0.logprobs) == (
        recorded[0]["prompt_token_ids"], recorded[0]["response_token_ids"], recorded[0]["response_logprobs"])
    assert (s0.prompt_tokens, s0.completion_tokens, s0.extra) == (4, 2, {"finish_reason": "stop"})
    # Older runs' names (model.record_logprobs) are read as the response's tokens.
    assert (s1.prompt_token_ids, s1.completion_token_ids, s1.logprobs) == (None, [8], [-0.30000000000000004])
    assert s2.logprobs == [-0.5, 0.0, -7.25] and s2.completion_token_ids == [1, 2, 3]
    raw = json.loads(f.read_text())  # the numbers as written, not through pydantic
    assert raw["steps"][1]["metrics"]["logprobs"] == [-0.1, -1e-12]
    assert raw["final_metrics"]["total_prompt_tokens"] == 8 and raw["final_metrics"]["total_completion_tokens"] == 6
    failed = doc.steps[1].extra["failed_tries"]
    assert [(t["response"], t.get("completion_token_ids"), t.get("logprobs")) for t in failed] == [
        ("bad 0", [5], [-3.0000000000000004]), ("bad 1", [6, 7], [-1.0, -2.5e-300])]
    assert failed[1]["policy_version"] == 9 and failed[0]["finish_reason"] == "length"
    # Without --failed-tries the step keeps its own answer only.
    out2 = tmp_path / "atif2"
    export_runs([run], out2, "atif", ExportOptions())
    assert "failed_tries" not in load(next(iter(exported(out2).values()))).steps[1].extra
    # An attempt that ended in an error has null rewards, never a negative one.
    r2 = RunFolder(tmp_path, "err")
    r2.attempt("u", 0, "error", steps=1)
    out3 = tmp_path / "atif3"
    export_runs([r2.write()], out3, "atif", ExportOptions())
    doc = load(next(iter(exported(out3).values())))
    assert (doc.extra["outcome"], doc.extra.get("score"), doc.extra.get("reward")) == ("error", None, None)


def test_hostile_lines_give_valid_files_and_warnings(tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    png(outside / "secret.png", 5, 5)
    r = RunFolder(tmp_path, "run")
    lines = [
        json.dumps(step_line(0, action=[{"type": "click", "x": float("nan")}], timings={"env_s": float("inf")},
                             time=float("nan"), commands=[{"x": [[[[[1]]]]]}])),
        json.dumps(step_line(1, screenshot="link.png", images=[{"file": "step_0000.png", "sha256": "0" * 64},
                                                               {"file": "../outside/secret.png", "sha256": "1"}],
                             image_processor={"factor": float("-inf")})),
        json.dumps(step_line(2, screenshot="trajectory.json", response=None, response_token_ids=None,
                             response_logprobs=None, action="click")),
        json.dumps(step_line(3, screenshot="notes.txt", thought=7, response="a\ud800b")),
    ]
    traj = r.attempt("t x", 0, "failure", steps=4, lines=lines)
    (r.path / traj / "link.png").symlink_to(outside / "secret.png")
    (r.path / traj / "trajectory.json").write_bytes((r.path / traj / "step_0000.png").read_bytes())
    (r.path / traj / "notes.txt").write_text("not an image")
    out, run = tmp_path / "atif", r.write()
    export_runs([run], out, "atif", ExportOptions())
    err = capsys.readouterr().err
    (f,) = exported(out).values()
    doc = load(f)
    assert f.parent == out / "run" / "t%20x" / "0_0"
    assert doc.steps[4].message == "a\ufffdb"  # a lone surrogate: strict JSON parsers (pydantic's) refuse it
    assert doc.steps[1].tool_calls is None and "timings" not in doc.steps[1].extra and doc.steps[1].timestamp is None
    assert "commands" not in doc.steps[1].extra
    assert doc.steps[1].observation is None  # step 1's screenshot is a link out of the run: not exported
    assert doc.steps[2].extra["images"] == [{"path": "step_0000.png", "sha256": "0" * 64},
                                            {"path": None, "sha256": "1"}]
    assert "image_processor" not in doc.steps[2].extra
    assert doc.steps[3].message == "" and doc.steps[3].tool_calls is None and doc.steps[3].observation is None
    assert "thought" not in doc.steps[4].extra
    # Step 3's prompt names its images (it recorded no `images`); step 2 has no answer, so no prompt row.
    assert sorted(p.name for p in f.parent.iterdir()) == ["step_0000.png", "step_0002.png", "step_0003.png",
                                                          "trajectory.json"]
    for text in ("image 'link.png' is a link", "image 'step_0000.png' is not the one the model was sent",
                 "climbs out of its folder", "action is not a list of objects with a type",
                 "image 'notes.txt' is not a PNG, JPEG, GIF or WebP file", "image 'trajectory.json' has the trajectory file's name",
                 "lone surrogates in text are written as U+FFFD"):
        assert text in err, text
    # The rows' export checks the same: an image file that is not what its step sent is named.
    export_runs([run], tmp_path / "rows.jsonl", "jsonl", ExportOptions())
    assert "image 'step_0000.png': its file is not the one the model was sent" in capsys.readouterr().err


def test_atif_options_and_folders(tmp_path):
    r = RunFolder(tmp_path, "run")
    r.attempt("t", 0, "success", steps=1)
    run = r.write()
    with pytest.raises(InputError, match="--policy-versions: not with --format atif"):
        export_runs([run], tmp_path / "a", "atif", ExportOptions(policy_versions="1"))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    (tmp_path / "file").write_text("")
    for out in ("full", "file"):
        with pytest.raises(InputError, match="exists and is not an empty folder"):
            export_runs([run], tmp_path / out, "atif", ExportOptions())
    with pytest.raises(InputError, match="inside the run folder"):
        export_runs([run], run / "atif", "atif", ExportOptions())
    (tmp_path / "empty").mkdir()
    assert export_runs([run], tmp_path / "empty", "atif", ExportOptions())["files written"] == 1
    assert [p.name for p in (tmp_path / "empty").iterdir()] == ["run"]
    r = run_cua("export", str(run), "--format", "atif", "--out", str(tmp_path / "full"))
    assert r.returncode == 2 and "not an empty folder" in r.stderr and "Traceback" not in r.stderr


def test_a_persons_turn_is_the_users_step_and_actors_choose_the_attempts(tmp_path):
    r = RunFolder(tmp_path, "run")
    r.attempt("agent-only", 0, "success", steps=2)
    held = {"step": 1, "actor": "human", "time": 1.0, "screenshot": "step_0001.png", "response": None,
            "thought": None, "action": [{"type": "takeover", "held_s": 4.2, "ended": "return"}], "commands": [],
            "timings": {"env_s": 0.1, "model_s": 0.0, "act_s": 0.0}}
    r.attempt("helped", 0, "success", steps=3, lines=[json.dumps(step_line(0, actor="agent")), json.dumps(held),
                                                      json.dumps(step_line(2, actor="agent"))])
    r.episodes[-1] = json.dumps({**json.loads(r.episodes[-1]), "human_steps": 1, "held_s": 4.2})
    run = r.write()
    counts = {}
    for actors in ("all", "agent", "human"):
        out = tmp_path / actors
        summary = export_runs([run], out, "atif", ExportOptions(actors=actors))
        counts[actors] = (len(exported(out)), summary["trajectories skipped by filters"])
    assert counts == {"all": (2, 0), "agent": (1, 1), "human": (1, 1)}
    (doc,) = [load(f) for f in exported(tmp_path / "human").values()]
    assert [s.source for s in doc.steps] == ["user", "agent", "user", "agent"]  # the task, then who acted
    (doc,) = [load(f) for f in exported(tmp_path / "agent").values()]
    assert "user" not in [s.source for s in doc.steps[1:]]
    with pytest.raises(InputError, match="--actors: 'robots' is not one of all, agent, human"):
        ExportOptions(actors="robots")
