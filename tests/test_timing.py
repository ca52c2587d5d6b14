"""Where a run's time went: the timing figures from episode lines and metrics.jsonl, the load sampler
against servers on loopback, and `cua stats --timing` / `cua compare --timing`.

The real thing end to end (a rollout through a real vLLM fleet, its real /metrics sampled) is in
test_fleet_e2e.py; the episode lines' phases of a real MiniWoB rollout in test_rollout_e2e.py."""

import json

import pytest
from helpers.cli import run_cua
from helpers.net import free_port
from helpers.servers import LoopbackHTTPServer
from helpers.waiting import wait_for
from hypothesis import given, settings
from hypothesis import strategies as st

from cua_cli.fleet.metrics import load, parse
from cua_cli.fleet.nvml import Gpus
from cua_cli.rollout.monitor import Monitor, server_root
from cua_cli.runfolder.jsonl import read_lines
from cua_cli.runfolder.records import PHASES
from cua_cli.stats.timing import timing_figures

T0 = 1_790_000_000.0


def _phases(**given) -> dict:
    return {p: given.get(p, 0.0) for p in PHASES}


def _line(task, lane, start, duration, wait=0.0, **phases) -> dict:
    return {"task_id": task, "domain": task.split("-")[0], "sample": 0, "attempt": 0, "outcome": "failure",
            "score": 0.0, "reward": 0.0, "steps": 2, "stop_reason": "max_steps", "duration_s": duration,
            "started_at": start, "lane": lane, "claim_wait_s": wait, "phases": _phases(**phases)}


def _run(tmp_path, lines, metrics=()):
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / "run.json").write_text(json.dumps({"format_version": 2, "run_id": "run"}))
    (run / "scheduled.jsonl").write_text("".join(json.dumps({"task_id": r["task_id"], "domain": None, "sample": 0})
                                                 + "\n" for r in lines if isinstance(r, dict) and "task_id" in r))
    (run / "episodes.jsonl").write_text("".join((json.dumps(r) if not isinstance(r, str) else r) + "\n"
                                                for r in lines))
    (run / "metrics.jsonl").write_text("".join((json.dumps(m) if not isinstance(m, str) else m) + "\n"
                                               for m in metrics))
    return run


def test_slot_time_splits_into_phases_and_idle_and_names_the_largest_wait(tmp_path):
    # Two lanes over 10 s (20 slot-seconds): lane a busy 8 s (after a 2 s wait), lane b busy 4 s.
    lines = [_line("web-1", "a", T0 + 2, 8.0, wait=2.0, model_s=5.0, act_s=1.0, observe_s=1.0, allocate_s=1.0),
             _line("os-2", "b", T0 + 6, 4.0, wait=6.0, allocate_s=2.0, setup_s=1.0, evaluate_s=0.5, other_s=0.5)]
    metrics = [{"t": T0 + i, "server": "http://s", "up": True, "running": i % 2, "waiting": 0, "kv_usage": 0.5,
                "prefix_hits": 10.0 * i, "prefix_queries": 20.0 * i, "generation_tokens": 100.0 * i,
                "queue_s_sum": 0.1 * i, "queue_count": 1.0 * i} for i in range(10)]
    metrics += [{"t": T0 + 3, "server": "http://s", "up": False}, {"t": T0, "gpu": 0, "util": 50, "mem_used": 2 ** 30,
                                                                   "mem_total": 2 ** 33}]
    t = timing_figures(_run(tmp_path, lines, metrics))
    assert t["wall_s"] == pytest.approx(10.0) and t["lanes"] == 2 and t["steps_per_s"] == pytest.approx(0.4)
    env = t["env"]
    assert env["busy"] == pytest.approx(12 / 20) and env["idle"] == pytest.approx(8 / 20)
    assert env["model"] == pytest.approx(5 / 20) and env["acting"] == pytest.approx(2 / 20)
    assert env["allocate"] == pytest.approx(4 / 20) and env["evaluate"] == pytest.approx(0.5 / 20)
    assert t["largest_wait"] == "idle"
    assert t["phases"]["model_s"]["max"] == 5.0 and t["phases"]["model_s"]["share"] == pytest.approx(5 / 12)
    assert t["claim_wait"]["max"] == 6.0 and set(t["domains"]) == {"web", "os"}
    (s,) = t["model_servers"]
    assert s["up"] == pytest.approx(10 / 11) and s["busy"] == pytest.approx(0.5)
    assert s["prefix_hit_rate"] == pytest.approx(0.5) and s["generation_tokens_per_s"] == pytest.approx(900 / 9)
    assert s["queue_wait_mean_s"] == pytest.approx(0.1) and t["model_busy"] == pytest.approx(0.5)
    assert t["gpus"] == [{"gpu": 0, "util_mean": 50.0, "mem_used_max": 2 ** 30}]


def test_a_restarted_server_counter_is_not_counted_as_negative_tokens(tmp_path):
    metrics = [{"t": T0 + i, "server": "http://s", "up": True, "generation_tokens": v}
               for i, v in enumerate([100.0, 200.0, 5.0, 50.0])]
    (s,) = timing_figures(_run(tmp_path, [_line("a-1", "a", T0, 1.0)], metrics))["model_servers"]
    assert s["generation_tokens_per_s"] == pytest.approx((100 + 45) / 3)


_value = st.one_of(st.none(), st.booleans(), st.integers(-10, 10 ** 12), st.floats(allow_nan=True),
                   st.text(max_size=5), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3),
                                                                                            st.integers(), max_size=2))


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.one_of(
    st.builds(_line, st.sampled_from(["a-1", "b-2"]), st.one_of(st.none(), st.text(max_size=3)),
              st.floats(0, 2e9), st.floats(0, 1e6), wait=st.one_of(st.floats(0, 1e4), st.none())),
    st.dictionaries(st.sampled_from(["task_id", "sample", "attempt", "outcome", "phases", "started_at",
                                     "duration_s", "lane", "claim_wait_s", "steps"]), _value),
    st.text(max_size=20)), max_size=8),
    metrics=st.lists(st.one_of(st.dictionaries(st.sampled_from(["t", "server", "up", "running", "kv_usage", "gpu",
                                                                "generation_tokens", "util", "mem_used"]), _value),
                               st.text(max_size=20)), max_size=8))
def test_hostile_lines_never_break_the_figures(tmp_path_factory, lines, metrics):
    t = timing_figures(_run(tmp_path_factory.mktemp("h"), lines, metrics))
    for v in (t["env"] or {}).values():
        assert 0 <= v or v != v  # shares are never negative
    assert t["timed"] <= t["attempts"]
    if t["env"]:
        assert t["largest_wait"] in ("model", "allocate", "evaluate", "idle")


class _Metrics(LoopbackHTTPServer):
    """A model server's /metrics in Prometheus text (vLLM's names), or a status with no metrics."""

    def __init__(self, status=200, text=""):
        super().__init__()
        self.status, self.text = status, text

    def serve(self, handler, method, body):
        self.reply(handler, self.status, "text/plain", self.text.encode())


VLLM_TEXT = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
vllm:num_requests_running{engine="1",model_name="m"} 1.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 4.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 7.0
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{engine="0",le="0.3",model_name="m"} 3.0
vllm:request_queue_time_seconds_bucket{engine="0",le="+Inf",model_name="m"} 3.0
vllm:request_queue_time_seconds_sum{engine="0",model_name="m"} 0.6
vllm:request_queue_time_seconds_count{engine="0",model_name="m"} 3.0
"""


def test_the_sampler_writes_the_fields_the_run_folder_contract_names():
    from cua_cli.fleet.metrics import LOAD
    from cua_cli.runfolder.records import SERVER_SAMPLE
    assert tuple(LOAD) == SERVER_SAMPLE


def test_parse_sums_labels_and_leaves_buckets_out():
    m = load(parse(VLLM_TEXT))
    assert m["running"] == 3 and m["waiting"] == 4 and m["kv_usage"] == 0.25 and m["prefix_hits"] == 7
    assert m["queue_s_sum"] == 0.6 and m["queue_count"] == 3 and m["generation_tokens"] is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('ab_:{}="\\ ,\n#0123456789.eE+-TYPEHELPgaugecounterNaInf')), max_size=80))
def test_parse_takes_any_text_or_says_value_error(text):
    try:
        parse(text)
    except ValueError:
        pass


def test_the_sampler_writes_each_server_and_notes_one_without_metrics_once(tmp_path, capfd):
    closed = f"http://127.0.0.1:{free_port()}/v1"
    with _Metrics(text=VLLM_TEXT) as good, _Metrics(status=404) as none, _Metrics(text="<html>no</html>") as html:
        m = Monitor(tmp_path, [good.url + "/v1", good.url + "/v1/", none.url + "/v1", html.url, closed], 0.05)
        m.start()
        try:
            wait_for(lambda: (tmp_path / "metrics.jsonl").exists() and sum(
                1 for r in read_lines(tmp_path / "metrics.jsonl") if r.get("up")) >= 3, what="three samples")
        finally:
            m.stop()
    lines = read_lines(tmp_path / "metrics.jsonl")
    ok = [r for r in lines if r["server"] == good.url]
    assert ok and all(r["up"] and r["running"] == 3 and r["kv_usage"] == 0.25 for r in ok)
    assert {r["server"] for r in lines} == {good.url, closed.removesuffix("/v1")}
    assert all(not r["up"] for r in lines if r["server"] != good.url)  # the closed port: down, not zero
    err = capfd.readouterr().err
    assert err.count(f"model server {none.url}: its /metrics answers HTTP 404") == 1
    assert err.count(f"model server {html.url}: its /metrics is not Prometheus text") == 1


def test_server_root_drops_v1_and_any_password():
    assert server_root("http://user:secret@10.0.0.5:8000/v1/") == "http://10.0.0.5:8000"
    assert server_root("https://h/base/v1") == "https://h/base"


def test_no_gpus_here_means_no_gpu_samples():
    g = Gpus()
    assert g.count == 0 and g.sample() == []
    g.close()


def test_timing_reads_cua_runs_only_and_compare_refuses_out(tmp_path):
    osworld = tmp_path / "osworld" / "chrome" / "t1"
    osworld.mkdir(parents=True)
    (osworld / "result.txt").write_text("1.0")
    r = run_cua("stats", str(tmp_path / "osworld"), "--timing")
    assert r.returncode == 2 and "records no timings" in r.stderr and "Traceback" not in r.stderr
    run = _run(tmp_path, [_line("a-1", "a", T0, 1.0, model_s=0.5)])
    r = run_cua("compare", str(run), str(run), "--timing", "--out", str(tmp_path / "x.json"))
    assert r.returncode == 2 and "--out" in r.stderr
    r = run_cua("compare", str(run), str(run), "--timing")
    assert r.returncode == 0 and "waiting for the model" in r.stdout and "model" in r.stdout
    r = run_cua("stats", str(run), "--timing", "--format", "csv")
    assert r.returncode == 0 and r.stdout.startswith("figure,run")


def test_a_file_among_the_runs_is_skipped_and_every_run_keeps_its_own_figures(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _run(tmp_path / "a", [_line("a-1", "x", T0, 10.0, model_s=8.0)])
    second = _run(tmp_path / "b", [_line("b-1", "x", T0, 10.0, allocate_s=8.0)])
    stray = tmp_path / "notes.txt"
    stray.write_text("not a run")
    r = run_cua("stats", str(first), str(stray), str(second), "--timing", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert "notes.txt: not a folder, skipped" in r.stderr
    runs = json.loads(r.stdout)["runs"]
    assert [(run["env"]["model"], run["largest_wait"]) for run in runs] == [(0.8, "model"), (0.0, "allocate")]
