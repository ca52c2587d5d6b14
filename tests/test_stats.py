"""`cua stats` and `cua compare` on hand-computed fixtures of all three layouts,
and on a run made by a real rollout."""

import json
import math

import pytest
from helpers.cli import run_cua

from cua_cli.stats.compare import mcnemar_exact


def line(**kw):
    base = {"domain": None, "attempt": 0, "reward": None, "steps": 2, "duration_s": 1.0, "error": None,
            "traj": None, "stop_reason": "finished"}
    base.update(kw)
    if base["outcome"] == "error":
        base["score"] = None
    return json.dumps(base)


@pytest.fixture
def cua_run(tmp_path):
    run = tmp_path / "cua-run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    sched = [("t1", 0, "chrome"), ("t1", 1, "chrome"), ("t2", 0, "chrome"), ("t2", 1, "chrome"),
             ("t3", 0, "gimp"), ("t3", 1, "gimp")]
    (run / "scheduled.jsonl").write_text("".join(
        json.dumps({"task_id": t, "domain": d, "sample": s}) + "\n" for t, s, d in sched))
    episodes = [
        line(task_id="t1", domain="chrome", sample=0, attempt=0, outcome="error", stop_reason="env_error"),
        line(task_id="t1", domain="chrome", sample=0, attempt=1, outcome="success", score=1.0, steps=4),
        line(task_id="t1", domain="chrome", sample=1, outcome="failure", score=0.0),
        line(task_id="t2", domain="chrome", sample=0, outcome="success", score=1.0),
        line(task_id="t2", domain="chrome", sample=1, attempt=2, outcome="error", stop_reason="env_error"),
        line(task_id="t3", domain="gimp", sample=0, outcome="success", score=1.0, evaluator_func="infeasible"),
    ]
    # t3 sample 1 never finished; the last line is torn (a writer was killed mid-line)
    (run / "episodes.jsonl").write_text("\n".join(episodes) + '\n{"task_id": "t3", "sam')
    return run


def stats_json(*args):
    r = run_cua("stats", *args, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def test_cua_layout_hand_computed(cua_run):
    out, err = stats_json(str(cua_run))
    assert "torn last line" in err
    (r,) = out["runs"]
    assert (r["scheduled"], r["finished"], r["missing"], r["errors"]) == (6, 5, 1, 1)
    assert r["success_rate"] == pytest.approx(3 / 6)          # missing and error count 0
    assert r["success_rate_finished"] == pytest.approx(3 / 4)  # errors left out, under its own name
    lo, hi = r["ci95"]                                         # Wilson, n = scheduled = 6
    assert (lo, hi) == (pytest.approx(0.18761, abs=1e-4), pytest.approx(0.81239, abs=1e-4))
    assert r["domains"]["chrome"]["scheduled"] == 4 and r["domains"]["chrome"]["success_rate"] == 0.5
    assert r["groups"] == {"Daily": r["domains"]["chrome"], "Professional": r["domains"]["gimp"]}
    assert r["infeasible"]["scheduled"] == 2 and r["infeasible"]["success_rate"] == 0.5
    assert r["errors_by_stop_reason"] == {"env_error": 1}
    # n = 2 samples, c = 1 correct for every task
    assert r["pass_at_k"] == {"1": pytest.approx(0.5), "2": pytest.approx(1.0)}
    assert r["pass_hat_k"] == {"1": pytest.approx(0.5), "2": pytest.approx(0.0)}
    assert r["any_correct"] == 1.0
    assert out["mean_success_rate"] == pytest.approx(0.5) and out["std_success_rate"] is None


@pytest.fixture
def osworld_run(tmp_path):
    root = tmp_path / "osworld" / "pyautogui" / "screenshot" / "uitars"
    for domain, ex, result, steps in [("chrome", "a", "1.0", 3), ("chrome", "b", "0", 1),
                                      ("gimp", "c", None, 2), ("gimp", "d", "0.5", 5)]:
        d = root / domain / ex
        d.mkdir(parents=True)
        (d / "traj.jsonl").write_text("{}\n" * steps)
        if result is not None:
            (d / "result.txt").write_text(result + "\n")
    tasks = tmp_path / "test_all.json"
    tasks.write_text(json.dumps({"chrome": ["a", "b", "e"], "gimp": ["c", "d"]}))
    return root, tasks


def test_osworld_layout_counts_unfinished_and_unstarted_as_missing(osworld_run):
    root, tasks = osworld_run
    (r,) = stats_json(str(root), "--tasks", str(tasks))[0]["runs"]
    assert r["layout"] == "osworld"
    assert (r["scheduled"], r["finished"], r["missing"], r["errors"]) == (5, 3, 2, 0)
    assert r["success_rate"] == pytest.approx(1.5 / 5)  # OSWorld's show_result would say 1.5 / 3
    assert r["success_rate_finished"] == pytest.approx(0.5)
    lo, hi = r["ci95"]  # scores are not binary: a bootstrap interval
    assert 0 <= lo < 0.3 < hi <= 1
    assert r["mean_steps"] == pytest.approx(3.0)
    (r,) = stats_json(str(root))[0]["runs"]
    assert r["scheduled"] == 4, "without --tasks only the example folders are known"


@pytest.fixture
def dart_run(tmp_path):
    root = tmp_path / "dart"
    traces = [("t1", 0, "chrome", "1"), ("t1", 1, "chrome", "0"), ("t1", 2, "chrome", "-1"),
              ("t2", 0, "os", "-2"), ("t2", 1, "os", None), ("t2", 2, "os", "1.0")]
    for task, trace, kind, reward in traces:
        d = root / f"{task}_{trace}"
        d.mkdir(parents=True)
        (d / "task_config.json").write_text(json.dumps({"raw": {"task_id": task, "task_type": kind}}))
        if reward is not None:
            (d / "reward.txt").write_text(reward)
    return root


def test_dart_layout_errors_and_pass_at_k(dart_run):
    (r,) = stats_json(str(dart_run))[0]["runs"]
    assert r["layout"] == "dart"
    assert (r["scheduled"], r["finished"], r["missing"], r["errors"]) == (6, 5, 1, 2)
    assert r["errors_by_stop_reason"] == {"eval_error": 1, "model_error": 1}
    assert r["success_rate"] == pytest.approx(2 / 6)
    assert r["success_rate_finished"] == pytest.approx(2 / 3)
    assert set(r["domains"]) == {"chrome", "os"}
    # n = 3, c = 1 for both tasks
    assert r["pass_at_k"] == {"1": pytest.approx(1 / 3), "2": pytest.approx(2 / 3), "3": pytest.approx(1.0)}
    assert r["pass_hat_k"]["1"] == pytest.approx(1 / 3) and r["pass_hat_k"]["2"] == 0


def test_several_runs_mean_and_std(cua_run, dart_run):
    out, _ = stats_json(str(cua_run), str(dart_run))
    assert [r["run"] for r in out["runs"]] == ["cua-run", "dart"]
    assert out["mean_success_rate"] == pytest.approx((0.5 + 1 / 3) / 2)
    assert out["std_success_rate"] == pytest.approx(math.sqrt(2) * (0.5 - 1 / 3) / 2)


def test_table_csv_markdown_and_bad_input(cua_run, tmp_path):
    r = run_cua("stats", str(cua_run), "--by", "domain")
    assert r.returncode == 0 and "success %" in r.stdout and "chrome" in r.stdout and "Daily" in r.stdout
    r = run_cua("stats", str(cua_run), "--format", "csv")
    header, row = r.stdout.splitlines()[:2]
    assert "success_rate" in header.split(",") and "pass_at_k_2" in header.split(",")
    r = run_cua("stats", str(cua_run), "--format", "markdown")
    assert r.stdout.startswith("| run")
    r = run_cua("stats", str(tmp_path / "nope"))
    assert r.returncode == 2 and "nope" in r.stderr
    (tmp_path / "empty").mkdir()
    r = run_cua("stats", str(tmp_path / "empty"))
    assert r.returncode == 2 and "not a cua run" in r.stderr


def osworld_results(root, results: dict):
    for task, value in results.items():
        d = root / "chrome" / task
        d.mkdir(parents=True)
        (d / "result.txt").write_text(str(value))
    return root


def test_mcnemar_exact_values():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)
    assert mcnemar_exact(1, 2) == 1.0
    assert mcnemar_exact(2, 10) == pytest.approx(2 * (1 + 12 + 66) / 4096)


def test_compare_one_sample_binary_uses_mcnemar(tmp_path):
    a = osworld_results(tmp_path / "a", {f"t{i}": 0 for i in range(8)} | {"x": 1, "only_a": 1})
    b = osworld_results(tmp_path / "b", {f"t{i}": 1 for i in range(8)} | {"x": 1, "only_b": 0})
    out_file = tmp_path / "diff.json"
    r = run_cua("compare", str(a), str(b), "--format", "json", "--out", str(out_file))
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["better_b"] == [f"t{i}" for i in range(8)] and res["better_a"] == [] and res["same"] == 1
    assert res["delta"] == pytest.approx(8 / 9)
    assert res["test"] == "mcnemar_exact" and res["p_value"] == pytest.approx(2 / 256)
    assert res["only_a"] == ["only_a"] and res["only_b"] == ["only_b"]
    assert res["domains"]["chrome"]["delta"] == pytest.approx(8 / 9)
    diff = json.loads(out_file.read_text())
    assert [d["task_id"] for d in diff["better_b"]] == [f"t{i}" for i in range(8)]
    r = run_cua("compare", str(a), str(b))
    assert "B better" in r.stdout and "mcnemar_exact" in r.stdout


def test_compare_multi_sample_uses_permutation(cua_run, dart_run):
    res = json.loads(run_cua("compare", str(cua_run), str(dart_run), "--format", "json").stdout)
    # per-task means: cua t1 = 0.5, t2 = 0.5; dart t1 = 1/3, t2 = 1/3; t3 only in cua
    assert res["tasks_shared"] == 2 and res["better_a"] == ["t1", "t2"]
    assert res["delta"] == pytest.approx(1 / 3 - 1 / 2)
    assert res["test"] == "paired_permutation" and 0 < res["p_value"] <= 1
    assert res["only_a"] == ["t3"]


@pytest.mark.slow  # a whole rollout on real MiniWoB++ (Chromium)
def test_stats_of_a_real_rollout(write, tmp_path):
    cfg = write("real.yaml", """
run: {name: real, results_dir: results}
tasks: {kind: miniwob, miniwob: {names: [click-test, click-button], seeds: [0, 1]}, rollout_n: 2}
env: {url: local, local: {max_envs: 2}}
model: {provider: random, seed: 3}
runner: {num_envs: 2, max_steps: 4}
""")
    assert run_cua("rollout", str(cfg)).returncode == 0
    (run,) = (tmp_path / "results").iterdir()
    out, _ = stats_json(str(run))
    (r,) = out["runs"]
    finals = {}
    for rec in map(json.loads, (run / "episodes.jsonl").read_text().splitlines()):
        key = (rec["task_id"], rec["sample"])
        if key not in finals or rec["attempt"] > finals[key]["attempt"]:
            finals[key] = rec
    assert r["scheduled"] == 8 == len(finals)
    assert r["success_rate"] == pytest.approx(sum(f["score"] or 0 for f in finals.values()) / 8)
    by_task = {}
    for (task, _), f in finals.items():
        by_task.setdefault(task, []).append(f["score"] == 1.0)
    assert r["pass_at_k"]["2"] == pytest.approx(sum(any(v) for v in by_task.values()) / len(by_task))


def rec(**kw):
    return dict(json.loads(line(**{"outcome": "success", "score": 1.0, **kw})))


def assert_clean(r, code=0):
    assert r.returncode == code, r.stderr
    assert "Traceback" not in r.stderr


@pytest.fixture
def bad_run(tmp_path):
    """A cua run whose files hold every kind of bad line, each next to a good one."""
    run = tmp_path / "bad-run"
    run.mkdir()
    sched = [{"task_id": t, "domain": "d", "sample": 0} for t in ("t1", "t2")] + [
        ["t3", 0], {"task_id": "t4", "domain": "d", "sample": "x"}, {"task_id": "t5", "domain": {"a": 1}, "sample": 0}
    ] + [{"task_id": t, "domain": "d", "sample": 0} for t in ("t6", "t7", "t8")]
    (run / "scheduled.jsonl").write_text("".join(json.dumps(s) + "\n" for s in sched))
    t8 = json.dumps(rec(task_id="t8", sample=0))
    lines = [
        json.dumps(rec(task_id="t1", sample=0)),                                    # 1 good
        json.dumps({k: v for k, v in rec(task_id="t2", sample=0).items() if k != "task_id"}),  # 2 no task_id
        json.dumps(rec(task_id="t2", sample="x")),                                  # 3
        json.dumps(rec(task_id="t2", sample=0, attempt=None)),                      # 4
        json.dumps(rec(task_id="t2", sample=0, outcome=5)),                         # 5
        json.dumps(rec(task_id="t2", sample=0, score="1")),                         # 6 an error, not a success
        json.dumps(rec(task_id="t5", sample=0, score=float("nan"))),                # 7 NaN: an error
        json.dumps(rec(task_id="t6", sample=0, reward=float("inf"))),               # 8 Infinity: an error
        json.dumps(rec(task_id="t7", sample=0, score=1.5)),                         # 9 out of range: an error
        "\udcff\udcfe not UTF-8",                                                   # 10
        json.dumps({"x": "y" * 3_000_000}),                                         # 11 huge, no task_id
        "[" * 100_000,                                                              # 12 too deep for json
        t8 + t8,                                                                    # 13 two objects: neither counts
        t8[:25] + json.dumps(rec(task_id="t8", sample=0, outcome="failure", score=0.0)),  # 14 torn, then a record
        json.dumps(["a list"]),                                                     # 15
    ]
    (run / "episodes.jsonl").write_bytes("".join(ln + "\n" for ln in lines).encode("utf-8", "surrogateescape"))
    return run


def test_bad_lines_are_warned_about_by_file_and_line_and_never_crash(bad_run):
    r = run_cua("stats", str(bad_run), "--format", "json")
    assert_clean(r)
    (s,) = json.loads(r.stdout)["runs"]
    # t3, t4 were never validly scheduled; t5 is, with no domain
    assert (s["scheduled"], s["finished"], s["missing"], s["errors"]) == (6, 6, 0, 4)
    assert s["success_rate"] == pytest.approx(1 / 6)   # t1; t8's final line is the torn-then-recovered failure
    assert s["errors_by_stop_reason"] == {"eval_error": 4}
    assert set(s["domains"]) == {"d", "None"}
    for n in (3, 4):
        assert f"{bad_run / 'scheduled.jsonl'}:{n}: " in r.stderr
    for n in range(2, 16):
        assert f"{bad_run / 'episodes.jsonl'}:{n}: " in r.stderr, n
    for cmd in (["compare", str(bad_run), str(bad_run)], ["view", str(bad_run)],
                ["stats", str(bad_run), "--by", "task"]):
        assert_clean(run_cua(*cmd))


def test_a_line_counts_the_same_whatever_other_lines_hold(tmp_path):
    def finished(extra_lines):
        run = tmp_path / f"run{len(extra_lines)}"
        run.mkdir()
        (run / "scheduled.jsonl").write_text("".join(
            json.dumps({"task_id": t, "domain": None, "sample": 0}) + "\n" for t in ("a", "b", "c")))
        two = json.dumps(rec(task_id="b", sample=0)) + "," + json.dumps(rec(task_id="c", sample=0))
        first = json.dumps(rec(task_id="a", sample=0))
        (run / "episodes.jsonl").write_text("\n".join([first, two, *extra_lines]) + "\n")
        r = run_cua("stats", str(run), "--format", "json")
        assert_clean(r)
        return json.loads(r.stdout)["runs"][0]["finished"]

    assert finished([]) == finished(["garbage"]) == finished(["{}", "[]"]) == 1


def test_a_torn_line_does_not_swallow_the_record_after_it(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "scheduled.jsonl").write_text("".join(
        json.dumps({"task_id": t, "domain": None, "sample": 0}) + "\n" for t in ("a", "b")))
    torn = '{"task_id": "a", "sample": 0, "outc'
    (run / "episodes.jsonl").write_text(torn + json.dumps(rec(task_id="b", sample=0)) + "\n")
    r = run_cua("stats", str(run), "--format", "json")
    assert_clean(r)
    s = json.loads(r.stdout)["runs"][0]
    assert (s["finished"], s["success_rate"]) == (1, 0.5)
    assert f"{run / 'episodes.jsonl'}:1: recovered a record" in r.stderr


def test_nan_infinite_and_out_of_range_results_are_errors_not_successes(tmp_path):
    root = osworld_results(tmp_path / "osworld", {"a": "nan", "b": "inf", "c": "1.5", "d": "-0.5", "e": "1", "f": "x"})
    r = run_cua("stats", str(root), "--format", "json")
    assert_clean(r)
    s = json.loads(r.stdout)["runs"][0]
    assert (s["finished"], s["errors"], s["success_rate"]) == (6, 5, pytest.approx(1 / 6))
    for task in "abcdf":
        assert str(root / "chrome" / task / "result.txt") in r.stderr
    dart = tmp_path / "dart"
    for trace, reward in enumerate(["nan", "7", "-0.5", "1", "-Infinity"]):
        d = dart / f"t_{trace}"
        d.mkdir(parents=True)
        (d / "task_config.json").write_text(json.dumps({"raw": {"task_id": "t", "task_type": "os"}}))
        (d / "reward.txt").write_text(reward)
    r = run_cua("stats", str(dart), "--format", "json")
    assert_clean(r)
    s = json.loads(r.stdout)["runs"][0]
    assert (s["finished"], s["errors"], s["success_rate"]) == (5, 4, pytest.approx(1 / 5))
    assert str(dart / "t_0" / "reward.txt") in r.stderr and str(dart / "t_1" / "reward.txt") in r.stderr


@pytest.mark.parametrize("listing", ['"chrome"', '["a", "b"]', '{"chrome": "abc"}', '{"chrome": [1, 2]}',
                                     '{"chrome": [["a"]]}', '{"chrome": ["a", null]}', "[" * 100_000])
def test_task_lists_of_the_wrong_shape_are_refused(osworld_run, tmp_path, listing):
    root, _ = osworld_run
    tasks = tmp_path / "tasks.json"
    tasks.write_text(listing)
    for cmd in ("stats", "compare"):
        r = run_cua(cmd, str(root), *([str(root)] if cmd == "compare" else []), "--tasks", str(tasks))
        assert_clean(r, code=2)
        assert str(tasks) in r.stderr
