"""GPU specs, vLLM flags and metrics parsing: pure functions, and the CLI's errors."""

import pytest

from conftest import run_cua
from cua_cli.config import vllm_flags
from cua_cli.fleet.gpus import GpuSpecError, group_gpus, parse_gpus
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
