"""GPU specs, vLLM flags and metrics parsing: pure functions, and the CLI's errors."""

import json
import signal
import subprocess
import sys

import psutil
import pytest
from helpers.cli import run_cua
from helpers.processes import kill_group

from cua_cli.config import vllm_flags
from cua_cli.errors import GpuSpecError
from cua_cli.fleet.gpus import group_gpus, parse_gpus
from cua_cli.fleet.metrics import parse


@pytest.mark.parametrize("spec, gpus", [("0-7", list(range(8))), ("0,2,4", [0, 2, 4]),
                                        ("0-3,6", [0, 1, 2, 3, 6]), ("5", [5])])
def test_gpu_specs(spec, gpus):
    assert parse_gpus(spec) == gpus


@pytest.mark.parametrize("spec, msg", [("3-1", "runs backwards"), ("0,0", "listed twice"),
                                       ("a-b", "not a number"), ("", "not a number"), ("1,,2", "not a number")])
def test_bad_gpu_specs(spec, msg):
    with pytest.raises(GpuSpecError, match=msg):
        parse_gpus(spec)


def test_groups_of_tp():
    assert group_gpus([0, 1, 2, 3], 2) == [[0, 1], [2, 3]]
    with pytest.raises(GpuSpecError, match="groups of --tp 3"):
        group_gpus([0, 1, 2, 3], 3)


def test_vllm_flags_from_yaml_values():
    assert vllm_flags({"max-model-len": 4096, "enforce_eager": True, "trust-remote-code": False,
                       "limit-mm-per-prompt": {"image": 5}}) == [
        "--max-model-len", "4096", "--enforce-eager", "--limit-mm-per-prompt", '{"image": 5}']


def test_metrics_parse_sums_labels():
    text = """# HELP vllm:num_requests_running x
vllm:num_requests_running{model_name="m",engine="0"} 3.0
vllm:num_requests_waiting{model_name="m"} 1.0
vllm:prefix_cache_queries_total{model_name="m"} 100.0
vllm:prefix_cache_hits_total{model_name="m"} 40.0
vllm:prefix_cache_hits_total{model_name="m",engine="1"} 2.0
"""
    m = parse(text)
    assert m["vllm:num_requests_running"] == 3 and m["vllm:prefix_cache_hits_total"] == 42


def test_cli_rejects_bad_fleet_input(write):
    r = run_cua("start-models", "--gpus", "0-3", "--tp", "3", "--model", "m")
    assert r.returncode == 2 and "groups of --tp 3" in r.stderr
    r = run_cua("start-models", "--gpus", "0", "--cpu", "1", "--model", "m")
    assert r.returncode == 2 and "exactly one of" in r.stderr
    bad = write("f.yaml", "vllm_args: {a: 1}\nbogus: 2\n")
    r = run_cua("start-models", "--cpu", "1", "--config", str(bad))
    assert r.returncode == 2 and "unknown key 'bogus'" in r.stderr
    r = run_cua("stop-models", "--fleet", str(bad.parent / "nope.json"))
    assert r.returncode == 1 and "no fleet file" in r.stderr


def test_gpu_specs_beyond_any_host_are_refused_at_once():
    import pytest

    from cua_cli.fleet.gpus import parse_gpus
    for spec in ("0-100000000000", "7,99999", "0-" + "9" * 5000):
        with pytest.raises(GpuSpecError):
            parse_gpus(spec)
    assert parse_gpus("0-3,1023") == [0, 1, 2, 3, 1023]


def test_bad_fleet_files_are_named_not_a_traceback(tmp_path):
    cfg = tmp_path / "exp.yaml"
    cfg.write_text("tasks: {kind: miniwob, miniwob: {names: [click-test]}}\n")
    odd = tmp_path / "odd: name #1"
    odd.mkdir()
    for i, body in enumerate(['{"servers": [{"url": 5}]}', "[" * 100_000, '{"servers": [7]}', "\xff"]):
        fleet = odd / f"fleet{i}.json"
        fleet.write_text(body, encoding="latin-1")
        r = run_cua("rollout", str(cfg), "--fleet", str(fleet), timeout=60)
        assert r.returncode == 2 and str(fleet) in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = run_cua("rollout", str(cfg), "--fleet", str(odd), timeout=60)  # a folder
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr


def test_stop_models_stops_only_the_groups_the_fleet_started(tmp_path):
    """A fleet file that outlived its fleet names a pid the system gave to another process since: that
    group is left alone; a group whose leader is the very process the file names is stopped."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    try:
        fleet = tmp_path / "fleet.json"
        when = psutil.Process(other.pid).create_time()
        for leader_started, stopped in ((when - 3600, False), (when, True)):
            fleet.write_text(json.dumps({"supervisor_pid": None, "servers": [], "pgids": [other.pid],
                                         "pgid_started": {str(other.pid): leader_started}}))
            r = run_cua("stop-models", "--fleet", str(fleet), timeout=120)
            assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
            assert (other.poll() is not None) == stopped, leader_started
        assert other.returncode == -signal.SIGTERM
    finally:
        kill_group(other)
