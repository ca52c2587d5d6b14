"""`cua export`: run folders built by hand (real PNG files) -> step-wise rows, sft lines, parquet."""

import hashlib
import json
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.cli import run_cua
from PIL import Image

from cua_cli.errors import InputError
from cua_cli.export import ExportOptions, export_runs
from cua_cli.export.writers import COLUMNS

FIELDS = [name for name, _ in COLUMNS]


def png(path, width, height, color=(200, 30, 30)):
    Image.new("RGB", (width, height), color).save(path, "PNG")


def step_line(k: int, version: int = 0, **extra) -> dict:
    """A step recorded with model.record_tokens: its prompt shows the last two screenshots."""
    images = [{"type": "image_file", "file": f"step_{j:04d}.png"} for j in range(max(0, k - 1), k + 1)]
    line = {"step": k, "screenshot": f"step_{k:04d}.png", "response": f"answer {k}", "thought": "t",
            "action": [{"type": "click", "x": 1.0, "y": 2.0}], "commands": [], "endpoint": "http://m",
            "model_version": f"ckpt-{version}", "policy_version": version, "parse_retries": 0,
            "width": 40 + k, "height": 30, "timings": {},
            "prompt": [{"role": "system", "content": "Play the task."},
                       {"role": "user", "content": [{"type": "text", "text": f"step {k}"}, *images]}],
            "prompt_token_ids": [1, 2, 3, k], "response_token_ids": [10 + k, 20 + k],
            "response_logprobs": [-0.5, -0.25], "finish_reason": "stop",
            "sampling": {"temperature": 1.0, "max_tokens": 64, "guided": False}}
    line.update(extra)
    return line


class RunFolder:
    """A run folder written by hand, as a rollout would have left it."""

    def __init__(self, root, name, run_id=None):
        self.path = root / name
        self.path.mkdir(parents=True)
        (self.path / "run.json").write_text(json.dumps({"format_version": 2, "run_id": run_id or name}))
        self.episodes = []

    def attempt(self, task, sample, outcome, attempt=0, steps=2, score=None, reward=None, version=0,
                lines=None, domain="web", stop_reason="finished") -> str:
        traj = f"trajectories/{task}/{sample}_{attempt}"
        folder = self.path / traj
        folder.mkdir(parents=True)
        for k in range(steps):
            png(folder / f"step_{k:04d}.png", 40 + k, 30, (k * 40, sample * 50, attempt * 90))
        lines = lines if lines is not None else [json.dumps(step_line(k, version)) for k in range(steps)]
        (folder / "traj.jsonl").write_text("".join(x + "\n" for x in lines))
        if score is None and outcome != "error":
            score = 1.0 if outcome == "success" else 0.0
        self.episodes.append(json.dumps({
            "task_id": task, "domain": domain, "sample": sample, "attempt": attempt, "outcome": outcome,
            "reward": reward if reward is not None else score, "score": score, "steps": steps,
            "stop_reason": "env_error" if outcome == "error" else stop_reason, "duration_s": 1.0,
            "error": "connection refused" if outcome == "error" else None, "traj": traj}))
        return traj

    def write(self, tail: str = ""):
        (self.path / "scheduled.jsonl").write_text("")
        (self.path / "episodes.jsonl").write_text("".join(x + "\n" for x in self.episodes) + tail)
        return self.path


def export(runs, tmp_path, fmt="jsonl", **options):
    out = tmp_path / "out" / f"rows.{fmt}"
    summary = export_runs(list(runs), out, fmt, ExportOptions(**options))
    if fmt == "parquet":
        return out, summary
    return [json.loads(x) for x in out.read_text().splitlines()], summary


@pytest.fixture
def two_task_run(tmp_path):
    r = RunFolder(tmp_path, "run-a")
    r.attempt("t1", 0, "success", steps=3, reward=0.8, score=1.0)
    r.attempt("t1", 1, "failure", steps=1, reward=-1.0, score=0.0)
    r.attempt("t2", 0, "failure", steps=2, score=0.25)
    return r.write()


def test_rows_fields_values_and_alignment(two_task_run, tmp_path):
    rows, summary = export([two_task_run], tmp_path)
    assert summary["rows written"] == 6 and summary["trajectories"] == 3 and summary["groups"] == 2
    assert all(list(r) == FIELDS for r in rows)  # every row has every field, in the documented order
    first = [r for r in rows if r["task_id"] == "t1" and r["sample"] == 0]
    assert [r["step"] for r in first] == [0, 1, 2]
    r = first[2]
    folder = two_task_run / "trajectories/t1/0_0"
    assert r["run_id"] == "run-a" and r["group_id"] == "t1" and r["trajectory_id"] == "run-a/trajectories/t1/0_0"
    assert (r["domain"], r["attempt"], r["try"], r["is_failed_try"], r["is_last_step"]) == ("web", 0, 0, False, True)
    assert r["prompt_messages"] == [
        {"role": "system", "content": "Play the task."},
        {"role": "user", "content": [{"type": "text", "text": "step 2"},
                                     {"type": "image_file", "file": "trajectories/t1/0_0/step_0001.png"},
                                     {"type": "image_file", "file": "trajectories/t1/0_0/step_0002.png"}]}]
    assert r["images"] == [
        {"path": f"trajectories/t1/0_0/step_000{k}.png",
         "sha256": hashlib.sha256((folder / f"step_000{k}.png").read_bytes()).hexdigest(), "width": 40 + k,
         "height": 30} for k in (1, 2)]
    assert (r["prompt_token_ids"], r["response_token_ids"], r["response_logprobs"]) == (
        [1, 2, 3, 2], [12, 22], [-0.5, -0.25])
    assert len(r["response_token_ids"]) == len(r["response_logprobs"])
    assert (r["response_text"], r["model_version"], r["policy_version"], r["finish_reason"], r["error"]) == (
        "answer 2", "ckpt-0", 0, "stop", None)
    assert r["sampling"] == {"temperature": 1.0, "max_tokens": 64, "guided": False}
    assert (r["step_reward"], r["traj_reward"], r["traj_raw_reward"]) == (1.0, 1.0, 0.8)
    assert [x["step_reward"] for x in first[:2]] == [0.0, 0.0] and not any(x["is_last_step"] for x in first[:2])
    assert (r["outcome"], r["stop_reason"], r["group_mean"], r["group_std"], r["group_size"]) == (
        "success", "finished", 0.5, 0.5, 2)
    assert r["run_dir"] == os.path.realpath(two_task_run)
    # the failure's reward is its score (0.0) on its last step; t2 is a group of one with a partial score
    (fail,) = [x for x in rows if x["task_id"] == "t1" and x["sample"] == 1]
    assert (fail["step_reward"], fail["traj_raw_reward"], fail["is_last_step"]) == (0.0, -1.0, True)
    t2 = [x for x in rows if x["task_id"] == "t2"]
    assert (t2[-1]["step_reward"], t2[0]["group_mean"], t2[0]["group_std"], t2[0]["group_size"]) == (0.25, 0.25, 0, 1)


def test_final_attempt_rule_and_errors_have_null_rewards(tmp_path):
    r = RunFolder(tmp_path, "run")
    r.attempt("t", 0, "error", attempt=0, steps=2)
    r.attempt("t", 0, "success", attempt=1, steps=1)
    r.attempt("t", 1, "error", steps=1)  # a final error: exported, flagged, never a negative reward
    run = r.write()
    rows, _ = export([run], tmp_path)
    assert sorted((x["sample"], x["attempt"]) for x in rows) == [(0, 1), (1, 0)]
    (err,) = [x for x in rows if x["outcome"] == "error"]
    assert (err["step_reward"], err["traj_reward"], err["traj_raw_reward"], err["stop_reason"]) == (
        None, None, None, "env_error")
    assert err["group_size"] == 1 and err["group_mean"] == 1.0  # errors never count in the group
    rows, _ = export([run], tmp_path, all_attempts=True)
    assert sorted((x["sample"], x["attempt"], x["step"]) for x in rows) == [(0, 0, 0), (0, 0, 1), (0, 1, 0), (1, 0, 0)]
    assert all(x["step_reward"] is None for x in rows if x["attempt"] == 0 and x["sample"] == 0)


def test_group_stats_across_runs_and_group_by(tmp_path):
    a, b = RunFolder(tmp_path, "a"), RunFolder(tmp_path, "b")
    a.attempt("t", 0, "success")
    a.attempt("t", 1, "failure")
    b.attempt("t", 0, "success")
    b.attempt("t", 1, "error")
    runs = [a.write(), b.write()]
    rows, summary = export(runs, tmp_path)
    assert summary["groups"] == 1
    assert {(x["group_id"], x["group_size"], x["group_mean"]) for x in rows} == {("t", 3, 2 / 3)}
    assert rows[0]["group_std"] == pytest.approx((2 / 9) ** 0.5)  # population std of 1, 0, 1
    rows, summary = export(runs, tmp_path, group_by="run-task")
    assert summary["groups"] == 2
    assert {(x["group_id"], x["group_size"], x["group_mean"], x["group_std"]) for x in rows} == {
        ("a/t", 2, 0.5, 0.5), ("b/t", 1, 1.0, 0.0)}


def test_filters_mixed_groups_outcomes_min_steps_policy_versions(tmp_path):
    r = RunFolder(tmp_path, "run")
    r.attempt("all-good", 0, "success", steps=1)
    r.attempt("all-good", 1, "success", steps=1)
    r.attempt("mixed", 0, "success", steps=3, version=4)
    r.attempt("mixed", 1, "failure", steps=1, version=7)
    r.attempt("mixed", 2, "error", steps=1)
    lines = [json.dumps(step_line(0, 5)), json.dumps(step_line(1, None)), json.dumps(step_line(2, 6))]
    r.attempt("versions", 0, "failure", steps=3, lines=lines)
    run = r.write()
    rows, summary = export([run], tmp_path, mixed_groups=True)
    assert {x["task_id"] for x in rows} == {"mixed"} and summary["trajectories skipped by filters"] == 3
    rows, _ = export([run], tmp_path, outcomes="success, error")
    assert {x["outcome"] for x in rows} == {"success", "error"}
    rows, _ = export([run], tmp_path, min_steps=3)
    assert {(x["task_id"], x["sample"]) for x in rows} == {("mixed", 0), ("versions", 0)}
    rows, summary = export([run], tmp_path, policy_versions="5-6,7")
    assert sorted((x["task_id"], x["step"]) for x in rows) == [("mixed", 0), ("versions", 0), ("versions", 2)]
    assert summary["rows skipped by --policy-versions"] == 7  # the null version is no version at all
    # the group's statistics come before any filter
    assert {x["group_size"] for x in rows if x["task_id"] == "mixed"} == {2}


def test_failed_tries_and_older_token_names(tmp_path):
    tries = [{"response": "bad 0", "error": "parse: no action", "prompt_token_ids": [1, 2],
              "response_token_ids": [5], "response_logprobs": [-3.0], "finish_reason": "length"},
             {"response": "bad 1", "error": "env refused the action: no", "commands": ["x"],
              "token_ids": [6, 7], "logprobs": [-1, -2.5], "policy_version": 9}]
    lines = [json.dumps(step_line(0, 2, failed_tries=tries, parse_retries=2)),
             json.dumps({k: v for k, v in step_line(1, 2, token_ids=[8], logprobs=[-0.1]).items()
                         if k not in ("response_token_ids", "response_logprobs", "prompt_token_ids")})]
    r = RunFolder(tmp_path, "run")
    r.attempt("t", 0, "success", steps=2, lines=lines)
    run = r.write()
    rows, _ = export([run], tmp_path)
    assert [(x["step"], x["try"], x["is_failed_try"]) for x in rows] == [(0, 2, False), (1, 0, False)]
    assert (rows[1]["response_token_ids"], rows[1]["response_logprobs"], rows[1]["prompt_token_ids"]) == (
        [8], [-0.1], None)
    rows, _ = export([run], tmp_path, failed_tries=True)
    assert [(x["step"], x["try"], x["is_failed_try"], x["is_last_step"]) for x in rows] == [
        (0, 0, True, False), (0, 1, True, False), (0, 2, False, False), (1, 0, False, True)]
    t0, t1 = rows[0], rows[1]
    assert (t0["response_text"], t0["error"], t0["finish_reason"], t0["response_token_ids"]) == (
        "bad 0", "parse: no action", "length", [5])
    assert (t1["response_token_ids"], t1["response_logprobs"], t1["policy_version"]) == ([6, 7], [-1.0, -2.5], 9)
    assert type(t1["response_logprobs"][0]) is float
    assert (t0["policy_version"], t0["model_version"], t0["step_reward"]) == (2, "ckpt-2", 0.0)
    assert t0["prompt_messages"] == rows[2]["prompt_messages"] and t0["images"] == rows[2]["images"]
    rows, _ = export([run], tmp_path, failed_tries=True, policy_versions="9")
    assert [(x["step"], x["try"]) for x in rows] == [(0, 1)]


def test_sft_lines(tmp_path):
    r = RunFolder(tmp_path, "run")
    r.attempt("t", 0, "success", steps=3)
    r.attempt("t", 1, "failure", steps=2)
    r.attempt("u", 0, "error", steps=2)
    lines, summary = export([r.write()], tmp_path, fmt="sft")
    assert summary["lines written"] == 1
    (line,) = lines
    assert line == {
        "messages": [{"role": "system", "content": "Play the task."},
                     {"role": "user", "content": [{"type": "text", "text": "step 2"}, {"type": "image"},
                                                  {"type": "image"}]},
                     {"role": "assistant", "content": "answer 2"}],
        "images": ["trajectories/t/0_0/step_0001.png", "trajectories/t/0_0/step_0002.png"],
        "trajectory_id": "run/trajectories/t/0_0", "task_id": "t", "run_dir": os.path.realpath(r.path)}


def test_parquet_schema_and_same_rows_as_jsonl(two_task_run, tmp_path):
    rows, _ = export([two_task_run], tmp_path, failed_tries=True)
    out, summary = export([two_task_run], tmp_path, fmt="parquet", failed_tries=True)
    table = pq.read_table(out)
    image = pa.struct([("path", pa.string()), ("sha256", pa.string()), ("width", pa.int64()),
                       ("height", pa.int64())])
    want = {"sample": pa.int64(), "step": pa.int64(), "try": pa.int64(), "policy_version": pa.int64(),
            "group_size": pa.int64(), "is_failed_try": pa.bool_(), "is_last_step": pa.bool_(),
            "prompt_token_ids": pa.list_(pa.int64()), "response_token_ids": pa.list_(pa.int64()),
            "response_logprobs": pa.list_(pa.float64()), "step_reward": pa.float64(), "group_std": pa.float64(),
            "prompt_messages": pa.string(), "sampling": pa.string(), "images": pa.list_(image),
            "run_id": pa.string(), "domain": pa.string()}
    assert table.schema.names == FIELDS
    assert {name: table.schema.field(name).type for name in want} == want
    back = table.to_pylist()
    for r in back:
        r["prompt_messages"] = json.loads(r["prompt_messages"])
        r["sampling"] = json.loads(r["sampling"])
    assert back == rows and summary["rows written"] == len(rows)


def test_parquet_batches_and_strange_text(tmp_path, monkeypatch):
    from cua_cli.export import writers
    monkeypatch.setattr(writers, "BATCH_ROWS", 2)
    r = RunFolder(tmp_path, "run")
    r.attempt("t", 0, "success", steps=3)
    lines = [json.dumps(step_line(0, response="caf\udc80 \u00e9", prompt=[{"role": "user", "content": "\ud800"}]))]
    r.attempt("odd", 0, "failure", steps=1, lines=lines)
    out, summary = export([r.write()], tmp_path, fmt="parquet")
    table = pq.read_table(out)
    assert table.num_rows == summary["rows written"] == 4
    odd = [x for x in table.to_pylist() if x["task_id"] == "odd"][0]
    assert odd["response_text"] == "caf\ufffd \u00e9"
    assert json.loads(odd["prompt_messages"]) == [{"role": "user", "content": "\ud800"}]  # JSON keeps the escape
    rows, _ = export([r.path], tmp_path)  # jsonl keeps every character, as JSON escapes
    assert [x["response_text"] for x in rows if x["task_id"] == "odd"] == ["caf\udc80 \u00e9"]


def test_run_given_twice_counts_once(two_task_run, tmp_path, capsys):
    copy = tmp_path / "copy-of-a"
    shutil.copytree(two_task_run, copy)
    link = tmp_path / "link"
    link.symlink_to(two_task_run)
    rows, summary = export([two_task_run, link, copy, two_task_run], tmp_path)
    assert summary["runs"] == 1 and summary["rows written"] == 6 == len(rows)
    err = capsys.readouterr().err
    assert "the same folder as" in err and "the same run_id 'run-a'" in err


def test_live_run_exports_finished_attempts_only(tmp_path, capsys):
    r = RunFolder(tmp_path, "live")
    r.attempt("t", 0, "success", steps=2)
    running = r.path / "trajectories/t/1_0"  # an attempt still going: steps, no episode line
    running.mkdir(parents=True)
    (running / "traj.jsonl").write_text(json.dumps(step_line(0)) + "\n" + '{"step": 1, "resp')
    run = r.write(tail='{"task_id": "t", "sample": 1, "attempt": 0, "outc')
    rows, summary = export([run], tmp_path)
    assert {(x["sample"], x["step"]) for x in rows} == {(0, 0), (0, 1)}
    assert "torn last line" in capsys.readouterr().err


def test_hostile_lines_are_warned_about_and_skipped(tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "traj.jsonl").write_text(json.dumps(step_line(0)) + "\n")
    png(outside / "secret.png", 7, 7)
    r = RunFolder(tmp_path, "run")
    bad_steps = [
        "not json at all",
        "[1, 2]",
        json.dumps(step_line(0, prompt_token_ids=[1, "2"], response_logprobs=[-1.0], policy_version="3",
                             sampling={"t": [1]}, finish_reason=5)),
        json.dumps(step_line(1, prompt=[{"role": "user", "content": [{"type": "image_file", "file": "secret.png"},
                                                                      {"type": "image_file", "file": "link.png"}]}])),
        json.dumps(step_line(1)),  # a second line of step 1
        json.dumps(step_line(2, prompt="not messages", response_token_ids=[1, True], failed_tries=[7, {}])),
        json.dumps({"step": "3"}),
        json.dumps(step_line(4, prompt=[{"role": "user", "content": [{"type": "video"}]}])),
        json.dumps(step_line(5, prompt=[{"role": "user", "content": [{"type": "image_file", "file": "\ud800"}]}])),
    ]
    traj = r.attempt("t", 0, "failure", steps=5, lines=bad_steps)
    (r.path / traj / "link.png").symlink_to(outside / "secret.png")
    (r.path / traj / "secret.png").write_bytes(b"not a png")
    r.episodes += ["{garbage", json.dumps({"task_id": 5, "sample": 0, "attempt": 0, "outcome": "failure"}),
                   json.dumps({"task_id": "esc", "sample": 0, "attempt": 0, "outcome": "failure", "score": 0,
                               "traj": "../outside"}),
                   json.dumps({"task_id": "abs", "sample": 0, "attempt": 0, "outcome": "failure", "score": 0,
                               "traj": str(outside)}),
                   json.dumps({"task_id": "sur", "sample": 0, "attempt": 0, "outcome": "failure", "score": 0,
                               "traj": "trajectories/\ud800"})]
    rows, summary = export([r.write()], tmp_path, failed_tries=True)
    err = capsys.readouterr().err
    assert {x["task_id"] for x in rows} == {"t"} and summary["trajectories"] == 4
    by_step = {x["step"]: x for x in rows}
    assert sorted(by_step) == [0, 1, 2, 4, 5]
    # A refused image has no path either: a trainer opens every path it is given.
    assert by_step[5]["images"] == [{"path": None, "sha256": None, "width": None, "height": None}]
    s0 = by_step[0]
    assert (s0["prompt_token_ids"], s0["response_logprobs"], s0["policy_version"], s0["sampling"],
            s0["finish_reason"]) == (None, None, None, None, None)
    assert s0["response_token_ids"] == [10, 20]
    s1 = by_step[1]
    assert [(i["path"], i["sha256"], i["width"]) for i in s1["images"]] == [
        ("trajectories/t/0_0/secret.png", hashlib.sha256(b"not a png").hexdigest(), None),
        (None, None, None)]  # a link out of the run is never read, nor named
    assert (by_step[2]["prompt_messages"], by_step[2]["images"], by_step[2]["response_token_ids"]) == (None, [], None)
    assert by_step[4]["prompt_messages"] is None
    for text in ("traj '../outside' climbs out of its folder with '..'; not read",
                 f"traj {str(outside)!r} is an absolute path; not read", "image 'link.png' is a link; not read",
                 "image '\\ud800' is not a path name; not read", "not JSON", "not an object",
                 "prompt_token_ids is not a list of token ids", "1 logprobs for 2 response token ids",
                 "policy_version is not an integer >= 0", "sampling is not", "second line of step 1",
                 "step is not an integer", "neither text nor an image file", "failed_tries[0] holds no answer",
                 "task_id is 5", "not an image file"):
        assert text in err, text


def test_bad_options_and_folders(two_task_run, tmp_path):
    for kw, name in (({"outcomes": "success,bogus"}, "--outcomes"), ({"policy_versions": "x"}, "--policy-versions"),
                     ({"policy_versions": "5-3"}, "--policy-versions"), ({"group_by": "domain"}, "--group-by")):
        with pytest.raises(InputError, match=name):
            ExportOptions(**kw)
    with pytest.raises(InputError, match="not a cua run folder"):
        export_runs([tmp_path], tmp_path / "o.jsonl", "jsonl", ExportOptions())
    with pytest.raises(InputError, match="inside the run folder"):
        export_runs([two_task_run], two_task_run / "sub" / "o.jsonl", "jsonl", ExportOptions())
    assert not (two_task_run / "sub").exists()


def test_cli_export(two_task_run, tmp_path):
    out = tmp_path / "data" / "rows.jsonl"
    r = run_cua("export", str(two_task_run), "--out", str(out), "--failed-tries")
    assert r.returncode == 0, r.stderr
    assert "rows written" in r.stdout and len(out.read_text().splitlines()) == 6
    assert [p.name for p in out.parent.iterdir()] == ["rows.jsonl"]  # no temporary file left
    for args, name in ((["--outcomes", "bogus"], "--outcomes"), (["--policy-versions", "x"], "--policy-versions")):
        r = run_cua("export", str(two_task_run), "--out", str(out), *args)
        assert r.returncode == 2 and name in r.stderr and "Traceback" not in r.stderr
    r = run_cua("export", str(tmp_path / "nope"), "--out", str(out))
    assert r.returncode == 2 and "no such folder" in r.stderr


def test_a_png_cut_inside_its_header_has_no_size_and_does_not_stop_the_export(tmp_path, capsys):
    from cua_cli._util.png import SIGNATURE
    from cua_cli.export.images import TrajImages
    run = tmp_path.resolve() / "run"
    (run / "t").mkdir(parents=True)
    (run / "t" / "cut.png").write_bytes(SIGNATURE + b"\x00\x00\x00\x0dIHDR" + b"\x00\x07")  # 22 bytes
    e = TrajImages("t", str(run / "t")).entry("cut.png", "here")
    assert (e["path"], e["width"], e["height"]) == ("t/cut.png", None, None) and e["sha256"]
    assert "not an image file" in capsys.readouterr().err
