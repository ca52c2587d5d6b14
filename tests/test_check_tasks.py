"""`cua check-tasks`: the verdict rules (stats/task_checks.py) as properties; the command end to end
on AgentGym's WebArena stand-in (fast) and on real desktops with OSWorld-format tasks (slow): a task
whose evaluator always passes, one whose oracle fails, a flaky one and ok ones, each named as such;
its report read back by `cua stats --exclude-broken`; bad input refused in one line."""

import json
import signal
from pathlib import Path

import psutil
import pytest
from helpers.agentgym_standins import AgentGymStandIn, winning_action
from helpers.cli import finish, kill_group, run_cua, start_cua
from helpers.desktops import needs_desktops
from helpers.waiting import wait_for
from hypothesis import given
from hypothesis import strategies as st

from cua_cli.errors import InputError
from cua_cli.runfolder.jsonl import read_lines
from cua_cli.stats.readers import Final, RunData
from cua_cli.stats.task_checks import (
    EVAL_ERROR,
    FLAKY,
    NOOP_PASSES,
    OK,
    ORACLE_FAILS,
    SETUP_ERROR,
    VERDICTS,
    Play,
    broken,
    leave_out,
    read_report,
    report_line,
    verdict,
    write_report,
)

# -- the verdict rules ---------------------------------------------------------------------------------------

ERROR_REASONS = ["env_error", "eval_error", "model_error", "timeout", "bad_task", "runner_lost", "runner_error",
                 "interrupted"]
scored = st.one_of(st.just(Play("success", 1.0, "finished")),
                   st.sampled_from([0.0, 0.25, 0.5]).map(lambda s: Play("failure", s, "max_steps")))
errored = st.one_of(st.sampled_from(ERROR_REASONS).map(lambda r: Play("error", None, r, f"{r} happened")),
                    st.just(Play(None, error="never finished")))
play = st.one_of(scored, scored, errored)  # errors are rarer
group = st.lists(play, min_size=1, max_size=5)


@given(group, group, st.booleans(), st.randoms())
def test_a_verdict_follows_the_documented_order_and_ignores_sample_order(oracle, noop, infeasible, rnd):
    status, why = verdict(oracle, noop, infeasible)
    assert status in VERDICTS
    plays = oracle + noop
    unscored = [p for p in plays if p.outcome not in ("success", "failure")]
    if unscored:
        setup = any(p.stop_reason != "eval_error" for p in unscored)
        assert status == (SETUP_ERROR if setup else EVAL_ERROR)
    elif any(len({p.score for p in g}) > 1 for g in (oracle, noop)):
        assert status == FLAKY
    elif oracle[0].score != 1:
        assert status == ORACLE_FAILS
    elif noop[0].score == 1 and not infeasible:
        assert status == NOOP_PASSES
    else:
        assert status == OK
    assert (why == "") == (status == OK and not infeasible)
    shuffled = (rnd.sample(oracle, len(oracle)), rnd.sample(noop, len(noop)))
    assert verdict(*shuffled, infeasible)[0] == status


@given(group, st.booleans())
def test_an_infeasible_tasks_no_op_is_never_judged(oracle, noop_passes):
    noop = [Play("success", 1.0, "fail")] if noop_passes else [Play("failure", 0.0, "max_steps")]
    assert verdict(oracle, noop, infeasible=True)[0] != NOOP_PASSES


def test_every_problem_found_is_named_and_the_first_is_the_verdict():
    wrong = [Play("failure", 0.0, "finished")] * 2
    passes = [Play("success", 1.0, "max_steps")] * 2
    status, why = verdict(wrong, passes)
    assert status == ORACLE_FAILS
    assert "the oracle scores 0, 0 (stop reason finished)" in why
    assert "answering nothing scores 1, 1 (stop reason max_steps)" in why
    status, why = verdict([Play("success", 1.0, "finished"), Play("failure", 0.0, "finished")], passes)
    assert status == FLAKY and "the oracle's scores differ: 1, 0" in why and "answering nothing" in why
    status, why = verdict(passes, [Play("error", None, "env_error", "execute step 2: until not met"),
                                   Play("error", None, "eval_error", "metric raised")])
    assert status == SETUP_ERROR
    assert why == "no-op sample 0: env_error: execute step 2: until not met (and 1 more)"
    assert verdict(passes, [], False) == (SETUP_ERROR, "no-op sample 0: not finished: never played")


@given(st.lists(st.text(), min_size=1, max_size=8, unique=True), st.data())
def test_a_report_reads_back_whatever_the_task_ids(tmp_path_factory, ids, data):
    statuses = data.draw(st.lists(st.sampled_from(VERDICTS), min_size=len(ids), max_size=len(ids)))
    path = tmp_path_factory.mktemp("report") / "report.jsonl"
    write_report(path, [dict(report_line(t, None, [], []), status=s) for t, s in zip(ids, statuses)])
    assert read_report(path) == dict(zip(ids, statuses))
    assert broken(read_report(path)) == {t for t, s in zip(ids, statuses) if s != OK}


@pytest.mark.parametrize("line, problem", [
    ("{not json", "not a JSON line"),
    ('{"task_id": "a"}', "has a task_id and a status"),
    ('{"task_id": "a", "status": "fine"}', "has a task_id and a status"),
    ('{"task_id": 3, "status": "ok"}', "has a task_id and a status"),
    ("[1, 2]", "has a task_id and a status"),
])
def test_a_bad_report_line_is_named_by_file_and_line(tmp_path, line, problem):
    path = tmp_path / "report.jsonl"
    path.write_text('{"task_id": "ok-one", "status": "ok"}\n\n' + line + "\n")
    with pytest.raises(InputError, match=rf"report.jsonl:3: .*{problem}"):
        read_report(path)


@given(st.dictionaries(st.tuples(st.sampled_from("abcd"), st.integers(0, 3)), st.just(Final("success", 1.0))),
       st.sets(st.sampled_from("abcde")))
def test_leaving_out_drops_exactly_the_pairs_of_the_tasks(pairs, tasks):
    data = RunData("run", "cua", dict(pairs))
    dropped_pairs, dropped_tasks = leave_out(data, tasks)
    assert set(data.pairs) == {p for p in pairs if p[0] not in tasks}
    assert dropped_pairs == len(pairs) - len(data.pairs)
    assert dropped_tasks == len({t for t, _ in pairs} & tasks)


# -- the command on AgentGym's WebArena stand-in ------------------------------------------------------------

def _webarena(tmp_path: Path, url: str, oracle: dict, name: str = "wa") -> Path:
    (tmp_path / "oracle.json").write_text(json.dumps(oracle))
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(f"""
run: {{name: {name}, results_dir: {tmp_path}/results}}
tasks: {{kind: agentgym, agentgym: {{indices: "0-2"}}}}
env: {{kind: agentgym, url: "{url}", retries: 0, agentgym: {{env: webarena}}}}
agent: {{kind: webarena}}
model: {{provider: script, script: oracle.json}}
runner: {{num_envs: 2, max_steps: 3}}
""")
    return cfg


ORACLE = {f"webarena@{i}": [f"The page is clear. {winning_action('webarena', i)}"] for i in range(3)}


def _episodes(folder: Path, phase: str) -> list[dict]:
    return read_lines(next(folder.glob(f"{phase}-*")) / "episodes.jsonl")


@pytest.mark.slow  # a whole rollout through runner processes
def test_an_oracle_that_fails_is_named_and_the_report_leaves_it_out_of_stats(tmp_path):
    wrong = dict(ORACLE, **{"webarena@1": ["Wrong. " + winning_action("webarena", 7)]})
    with AgentGymStandIn("webarena", tasks=5) as url:
        cfg = _webarena(tmp_path, url, wrong)
        r = run_cua("check-tasks", str(cfg), "--repeat", "2")
        assert r.returncode == 1, r.stderr
        assert "1 of 3 tasks are not ok: webarena@1" in r.stderr
        folder = next((tmp_path / "results").glob("wa-check-*"))
        report = {x["task_id"]: x for x in read_lines(folder / "report.jsonl")}
        assert {t: x["status"] for t, x in report.items()} == {
            "webarena@0": OK, "webarena@1": ORACLE_FAILS, "webarena@2": OK}
        assert report["webarena@1"]["oracle"]["scores"] == [0.0, 0.0]
        assert report["webarena@0"]["noop"]["stop_reasons"] == ["finished", "finished"]  # the agent's own end
        row = next(line for line in r.stdout.splitlines() if "webarena@1" in line)
        assert "oracle_fails" in row and "the oracle scores 0, 0" in row
        assert "3 tasks: 1 oracle_fails, 2 ok; report: " in r.stdout
        assert len(_episodes(folder, "oracle")) == len(_episodes(folder, "noop")) == 6

        # A finished check resumed plays nothing again; a larger --repeat adds the new samples only.
        again = run_cua("check-tasks", str(cfg), "--resume", str(folder), "--repeat", "3")
        assert again.returncode == 1, again.stderr
        for phase in ("oracle", "noop"):
            pairs = [(x["task_id"], x["sample"]) for x in _episodes(folder, phase)]
            assert len(pairs) == len(set(pairs)) == 9
        assert [x["status"] for x in read_lines(folder / "report.jsonl")] == [OK, ORACLE_FAILS, OK]

    oracle_run = next(folder.glob("oracle-*"))
    plain = json.loads(run_cua("stats", str(oracle_run), "--format", "json").stdout)["runs"][0]
    assert plain["scheduled"] == 9 and plain["success_rate"] == pytest.approx(2 / 3)
    assert "broken_pairs_left_out" not in plain  # by default nothing is dropped
    kept = run_cua("stats", str(oracle_run), "--exclude-broken", str(folder / "report.jsonl"), "--format", "json")
    figures = json.loads(kept.stdout)["runs"][0]
    assert figures["scheduled"] == 6 and figures["success_rate"] == 1.0
    assert (figures["broken_pairs_left_out"], figures["broken_tasks_left_out"]) == (3, 1)
    table = run_cua("stats", str(oracle_run), "--exclude-broken", str(folder / "report.jsonl"))
    assert table.returncode == 0 and "left out 3 pairs of 1 task that" in table.stdout


@pytest.mark.slow  # a whole rollout through runner processes
def test_every_task_ok_exits_0_and_an_env_that_fails_is_a_setup_error(tmp_path):
    with AgentGymStandIn("webarena", tasks=5) as url:
        cfg = _webarena(tmp_path, url, ORACLE)
        r = run_cua("check-tasks", str(cfg), "--repeat", "1", "--report", str(tmp_path / "mine.jsonl"))
        assert r.returncode == 0, r.stderr
        assert [x["status"] for x in read_lines(tmp_path / "mine.jsonl")] == [OK] * 3

    # A server that is gone: every allocation fails, which is never the oracle's failure.
    with AgentGymStandIn("webarena", tasks=5) as url:
        server_down = _webarena(tmp_path, url, ORACLE, "down")
    r = run_cua("check-tasks", str(server_down), "--repeat", "1", "--set", "runner.max_attempts=1")
    assert r.returncode == 1, r.stderr
    lines = read_lines(next((tmp_path / "results").glob("down-check-*")) / "report.jsonl")
    assert {x["status"] for x in lines} == {SETUP_ERROR}
    assert all(x["why"].startswith("oracle sample 0: env_error") for x in lines)


@pytest.mark.slow  # a whole rollout through runner processes
def test_an_interrupted_check_resumes_and_plays_each_pair_once(tmp_path):
    server = AgentGymStandIn("webarena", tasks=5)
    with server as url:
        cfg = _webarena(tmp_path, url, ORACLE)
        server.delay("step", 0.5)  # episodes long enough to be interrupted
        p = start_cua("check-tasks", str(cfg), "--set", "runner.num_envs=1")
        try:
            wait_for(lambda: list((tmp_path / "results").glob("wa-check-*/oracle-*/episodes.jsonl")),
                     timeout=60, what="the oracle run's first episode")
            p.send_signal(signal.SIGINT)
            out, err = finish(p, 120)
        finally:
            kill_group(p)
        assert p.returncode == 130, err
        folder = next((tmp_path / "results").glob("wa-check-*"))
        assert f"--resume {folder}" in out
        assert not (folder / "report.jsonl").exists()
        server.delay("step", 0)
        r = run_cua("check-tasks", str(cfg), "--resume", str(folder))
        assert r.returncode == 0, r.stderr
    for phase in ("oracle", "noop"):
        finals = [x for x in _episodes(folder, phase) if x["stop_reason"] != "interrupted"]
        pairs = [(x["task_id"], x["sample"]) for x in finals]
        assert sorted(pairs) == sorted({(f"webarena@{i}", s) for i in range(3) for s in range(2)})


# -- bad input ------------------------------------------------------------------------------------------------

def _config(write, tmp_path, model: str) -> Path:
    return write("c.yaml", f"""
run: {{name: c, results_dir: {tmp_path}/results}}
tasks: {{kind: agentgym, agentgym: {{indices: "0-2"}}}}
env: {{kind: agentgym, url: "http://127.0.0.1:9", agentgym: {{env: webarena}}}}
agent: {{kind: webarena}}
model: {model}
""")


@pytest.mark.parametrize("model, args, message", [
    ("{provider: openai, endpoints: ['http://127.0.0.1:9/v1']}", [],
     "model.script: the config names no oracle answers; give --oracle FILE"),
    ("{provider: script, script: oracle.json}", [],
     "the oracle has no answers for 1 of the 3 tasks, e.g. 'webarena@2'"),
    ("{provider: script, script: missing.json}", [], "missing.json: cannot read model.script"),
    ("{provider: script, script: oracle.json}", ["--oracle", "bad.json"], "bad.json is not JSON"),
    ("{provider: script, script: oracle.json}", ["--repeat", "0"], "Invalid value for '--repeat'"),
    ("{provider: script, script: oracle.json}", ["--resume", "."], "not a cua check-tasks folder"),
    ("{provider: script, script: oracle.json}", ["--report", "nowhere/r.jsonl"], "there is no folder"),
    ("{provider: script, script: oracle.json}", ["--set", "runner.num_envs=-1"], "runner.num_envs"),
])
def test_bad_input_is_one_line_and_exit_2(write, tmp_path, model, args, message):
    write("oracle.json", json.dumps({"webarena@0": ["x"], "webarena@1": ["y"]}))
    write("bad.json", "{")
    r = run_cua("check-tasks", str(_config(write, tmp_path, model)), *args, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "results").exists()  # nothing was started


def test_stats_refuses_a_report_that_is_not_one(write, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "scheduled.jsonl").write_text('{"task_id": "a", "domain": null, "sample": 0}\n')
    report = write("report.jsonl", '{"task_id": "a", "status": "broken"}\n')
    r = run_cua("stats", str(run), "--exclude-broken", str(report))
    assert r.returncode == 2 and "report.jsonl:1: a check-tasks report line has a task_id and a status" in r.stderr
    r = run_cua("stats", str(run), "--exclude-broken", str(tmp_path / "none.jsonl"))
    assert r.returncode == 2 and "none.jsonl" in r.stderr


# -- on real desktops -----------------------------------------------------------------------------------------

WRITE_DONE = "```python\nimport os\nopen(os.path.expanduser('~/done.txt'), 'w').write('done\\n')\n```"
BITS = "import random; print(format(random.getrandbits(4096), '04096b'))"


def _shell(command: str) -> dict:
    return {"type": "vm_command_line", "command": command, "shell": True}


def _example(task_id: str, evaluator: dict) -> dict:
    return {"id": task_id, "snapshot": "os", "instruction": "Write done into ~/done.txt.", "source": "cua tests",
            "config": [{"type": "execute", "parameters": {"command": "rm -f ~/done.txt ~/other.txt", "shell": True}}],
            "related_apps": ["os"], "evaluator": evaluator}


def _desktop_tasks(root: Path) -> tuple[Path, Path]:
    """OSWorld-format task files whose evaluators are broken on purpose (and two that are not), with
    their oracle's answers."""
    done = {"type": "rule", "rules": {"expected": "done\n"}}
    examples = {
        "check-ok": {"func": "exact_match", "result": _shell("cat ~/done.txt 2>/dev/null || echo missing"),
                     "expected": done},
        # Looks at nothing the task asks for: doing nothing passes.
        "check-always-passes": {"func": "exact_match", "result": _shell("echo done"), "expected": done},
        # Looks at the wrong file: the right answer fails.
        "check-oracle-fails": {"func": "exact_match", "result": _shell("cat ~/other.txt 2>/dev/null || echo missing"),
                               "expected": done},
        # Reads 4096 random bits: its score (the share of zeros, as fuzzy_match finds it) differs each time;
        # two equal ones in both groups happen about once in 13,000 checks.
        "check-flaky": {"func": "fuzzy_match",
                        "result": {"type": "vm_command_line", "command": ["python3", "-c", BITS]},
                        "expected": {"type": "rule", "rules": {"expected": "0" * 2600}}},
        "check-infeasible": {"func": "infeasible"},
    }
    folder = root / "examples" / "check"
    folder.mkdir(parents=True)
    for task_id, evaluator in examples.items():
        (folder / f"{task_id}.json").write_text(json.dumps(_example(task_id, evaluator), indent=2))
    (root / "test_all.json").write_text(json.dumps({"check": sorted(examples)}))
    oracle = {t: [WRITE_DONE, "DONE"] for t in examples} | {"check-infeasible": ["FAIL"]}
    (root / "oracle.json").write_text(json.dumps(oracle, indent=2))
    return root / "test_all.json", root / "oracle.json"


def _xvfbs() -> set:
    return {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "Xvfb"}


@pytest.mark.slow
@needs_desktops
def test_on_desktops_broken_evaluators_flaky_ones_and_ok_ones_are_each_named(tmp_path):
    before = _xvfbs()
    task_list, oracle = _desktop_tasks(tmp_path / "tasks")
    # openbox: the tasks need a desktop's shell and files, not GNOME, whose start takes seconds more
    cfg = tmp_path / "check.yaml"
    cfg.write_text(f"""
run: {{name: desk, results_dir: {tmp_path}/results}}
tasks: {{kind: osworld, osworld: {{task_list: {task_list}, examples_dir: {tmp_path}/tasks/examples}}}}
env: {{kind: osworld, url: local, local: {{max_envs: 2}}, osworld: {{session: openbox, pause_s: 0.3}}}}
agent: {{kind: osworld}}
runner: {{num_envs: 2, max_steps: 4, step_timeout_s: 60, episode_timeout_s: 120}}
""")
    r = run_cua("check-tasks", str(cfg), "--oracle", str(oracle), "--repeat", "2", timeout=900)
    assert r.returncode == 1, r.stderr[-3000:]
    folder = next((tmp_path / "results").glob("desk-check-*"))
    report = {x["task_id"]: x for x in read_lines(folder / "report.jsonl")}
    assert {t: x["status"] for t, x in report.items()} == {
        "check-ok": OK, "check-always-passes": NOOP_PASSES, "check-oracle-fails": ORACLE_FAILS,
        "check-flaky": FLAKY, "check-infeasible": OK}
    assert report["check-ok"]["oracle"]["scores"] == [1.0, 1.0] and report["check-ok"]["noop"]["scores"] == [0.0, 0.0]
    assert report["check-ok"]["noop"]["stop_reasons"] == ["max_steps", "max_steps"]  # one WAIT: the agent's idle
    assert report["check-infeasible"]["why"] == "infeasible: the no-op is not judged"
    for task, status in (("check-always-passes", "noop_passes"), ("check-oracle-fails", "oracle_fails"),
                         ("check-flaky", "flaky")):
        assert any(task in line and status in line for line in r.stdout.splitlines()), r.stdout
    assert "3 of 5 tasks are not ok" in r.stderr

    oracle_run = next(folder.glob("oracle-*"))
    kept = run_cua("stats", str(oracle_run), "--exclude-broken", str(folder / "report.jsonl"), "--format", "json")
    figures = json.loads(kept.stdout)["runs"][0]
    assert (figures["broken_pairs_left_out"], figures["broken_tasks_left_out"]) == (6, 3)
    assert figures["scheduled"] == 4 and figures["success_rate"] == 1.0
    wait_for(lambda: _xvfbs() <= before, timeout=60, what="every desktop of the check is gone")
