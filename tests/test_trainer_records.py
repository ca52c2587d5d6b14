"""Records a trainer can trust: each model call's image processor settings (from the fleet's model folder
and server flags, never guessed) and the sha256 of every image it was sent; proven on a real vLLM fleet
by rebuilding the server's image token counts from the record, and carried whole into ATIF."""

import hashlib
import json
import math

import atif
import pytest
from helpers.cli import run_cua
from helpers.models import TINY_VLLM_MAX_PIXELS
from hypothesis import given, settings
from hypothesis import strategies as st

from cua_cli._util.png import png_size
from cua_cli.fleet.server import processor_kwargs
from cua_cli.models.image_processor import UNKNOWN, ServerProcessors, model_config
from cua_cli.models.image_processor import settings as processor_settings
from cua_cli.runfolder.jsonl import read_lines

QWEN = {"image_processor_type": "Qwen2VLImageProcessor", "patch_size": 14, "merge_size": 2}


def _folder(tmp_path, name, **files):
    d = tmp_path / name
    d.mkdir()
    for file, doc in files.items():
        (d / f"{file}.json").write_text(json.dumps(doc))
    return str(d)


def test_settings_come_from_the_model_folder_under_the_servers_flags(tmp_path):
    legacy = _folder(tmp_path, "legacy", preprocessor_config={**QWEN, "min_pixels": 3136, "max_pixels": 12845056})
    assert processor_settings(legacy, {}) == {
        "resized_by": "server", "config": f"{legacy}/preprocessor_config.json", "server_kwargs": {},
        "type": "Qwen2VLImageProcessor", "rule": "smart_resize", "factor": 28, "min_pixels": 3136,
        "max_pixels": 12845056}
    # transformers 5's layout: the nested image_processor of processor_config.json, its size; flags win, the
    # server's min_pixels/max_pixels over its size, as the processor takes them.
    nested = _folder(tmp_path, "nested", processor_config={"image_processor": {
        **QWEN, "patch_size": 16, "size": {"shortest_edge": 1024, "longest_edge": 65536}}})
    got = processor_settings(nested, {"size": {"shortest_edge": 2048, "longest_edge": 99999}, "max_pixels": 50000})
    assert (got["config"], got["factor"], got["min_pixels"], got["max_pixels"]) == (
        f"{nested}/processor_config.json", 32, 2048, 50000)
    # Unknowns stay null: flags not known (an older fleet file), a processor whose rule cua does not know,
    # two configs that disagree (a server's older transformers would read the other one), no folder.
    assert processor_settings(legacy, None)["min_pixels"] is None
    assert processor_settings(legacy, None)["config"] == f"{legacy}/preprocessor_config.json"
    other = _folder(tmp_path, "other", preprocessor_config={"image_processor_type": "SiglipImageProcessor",
                                                            "size": {"height": 384, "width": 384}})
    assert (processor_settings(other, {})["type"], processor_settings(other, {})["rule"]) == (
        "SiglipImageProcessor", None)
    split = _folder(tmp_path, "split", preprocessor_config={**QWEN, "max_pixels": 100},
                    processor_config={"image_processor": {**QWEN, "max_pixels": 200}})
    assert model_config(split) == (None, None) and processor_settings(split, {}) == dict(UNKNOWN, server_kwargs={})
    assert processor_settings(str(tmp_path / "nowhere"), {}) == dict(UNKNOWN, server_kwargs={})
    assert ServerProcessors().of(None) == UNKNOWN
    assert ServerProcessors().of({"model_dir": "relative/path", "mm_processor_kwargs": {}}) == dict(
        UNKNOWN, server_kwargs={})


def test_the_fleet_file_names_the_servers_processor_flags():
    cmd = ["vllm", "serve", "m", "--port", "1"]
    assert processor_kwargs(cmd) == {}
    assert processor_kwargs(cmd + ["--mm-processor-kwargs", '{"max_pixels": 5}']) == {"max_pixels": 5}
    assert processor_kwargs(cmd + ["--mm_processor_kwargs={\"min_pixels\": 4}"]) == {"min_pixels": 4}
    assert processor_kwargs(cmd + ["--mm-processor-kwargs", '{"a": 1}', "--mm-processor-kwargs", '{"b": 2}']) == {
        "b": 2}
    assert processor_kwargs(cmd + ["--mm-processor-kwargs", "[1]"]) is None
    assert processor_kwargs(cmd + ["--mm-processor-kwargs"]) is None


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner,
                                                                                 max_size=4), max_leaves=12)
KEYS = st.sampled_from(["image_processor_type", "patch_size", "merge_size", "min_pixels", "max_pixels", "size",
                        "shortest_edge", "longest_edge", "image_processor"])
CONFIG = st.dictionaries(KEYS, JSON | st.just("Qwen2VLImageProcessorFast"), max_size=6)


@settings(max_examples=200, deadline=None)
@given(pre=CONFIG | JSON, proc=CONFIG | st.fixed_dictionaries({"image_processor": CONFIG}) | JSON,
       kwargs=st.none() | st.dictionaries(KEYS, JSON, max_size=4))
def test_hostile_configs_give_numbers_or_nulls_never_an_error(tmp_path_factory, pre, proc, kwargs):
    d = tmp_path_factory.mktemp("hostile")
    (d / "preprocessor_config.json").write_text(json.dumps(pre))
    (d / "processor_config.json").write_text(json.dumps(proc))
    got = processor_settings(str(d), kwargs)
    assert set(got) == set(UNKNOWN) and json.loads(json.dumps(got, allow_nan=False)) == got
    for key in ("factor", "min_pixels", "max_pixels"):
        assert got[key] is None or type(got[key]) is int and got[key] > 0
    assert got["rule"] in (None, "smart_resize")
    assert got["rule"] is None or got["type"].startswith("Qwen2VLImageProcessor") and kwargs is not None


# ---------------------------------------------------------------- a real fleet

MAX_PIXELS = TINY_VLLM_MAX_PIXELS  # the shared fleet's: a 160x210 MiniWoB screen becomes 84x112, 12 image tokens


@pytest.fixture(scope="module")
def fleet_run(tiny_vllm, tmp_path_factory):
    """A MiniWoB rollout recording tokens through the suite's fleet: a tiny Qwen2-VL served by real vLLM
    with --mm-processor-kwargs."""
    work = tmp_path_factory.mktemp("records")
    (work / "exp.yaml").write_text(f"""
run: {{name: records, results_dir: {work}/results}}
tasks:
  kind: miniwob
  miniwob: {{names: [click-test, click-button], seeds: [0], episode_max_time: 120}}
env: {{url: local, local: {{max_envs: 1}}}}
model: {{provider: openai, fleet: {tiny_vllm}, guided: true, max_tokens: 64, retries: 1, timeout_s: 60,
        record_tokens: true}}
agent: {{history_images: 2}}
runner: {{num_envs: 1, max_steps: 3}}
""")
    r = run_cua("rollout", str(work / "exp.yaml"), timeout=600)
    assert r.returncode == 0, r.stderr
    (run,) = (work / "results").iterdir()
    return tiny_vllm.parent, run  # the fleet's folder holds its model


@pytest.mark.slow
def test_the_record_rebuilds_the_servers_image_tokens(fleet_run):
    """From a step's record alone (its images' files, checked by sha256, and its processor settings), the
    number of image tokens the server put in the prompt: what a trainer's processor must reproduce."""
    from transformers import AutoTokenizer
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    work, run = fleet_run
    pad = AutoTokenizer.from_pretrained(work / "tiny-vlm").convert_tokens_to_ids("<|image_pad|>")
    calls = 0
    for rec in read_lines(run / "episodes.jsonl"):
        for step in read_lines(run / rec["traj"] / "traj.jsonl"):
            p = step["image_processor"]
            assert p == {"resized_by": "server", "config": str(work / "tiny-vlm" / "processor_config.json"),
                         "server_kwargs": {"max_pixels": MAX_PIXELS}, "type": "Qwen2VLImageProcessor",
                         "rule": "smart_resize", "factor": 28, "min_pixels": 56 * 56, "max_pixels": MAX_PIXELS}
            expected = 0
            for image in step["images"]:
                data = (run / rec["traj"] / image["file"]).read_bytes()
                assert hashlib.sha256(data).hexdigest() == image["sha256"]
                width, height = png_size(data)
                h, w = smart_resize(height, width, p["factor"], p["min_pixels"], p["max_pixels"])
                expected += h * w // p["factor"] ** 2
            assert step["prompt_token_ids"].count(pad) == expected == 12 * len(step["images"])
            calls += 1
    assert calls >= 2


@pytest.mark.slow
def test_atif_of_a_real_vllm_rollout_keeps_every_token(fleet_run, tmp_path):
    work, run = fleet_run
    out = tmp_path / "atif"
    r = run_cua("export", str(run), "--format", "atif", "--out", str(out))
    assert r.returncode == 0, r.stderr
    finals = read_lines(run / "episodes.jsonl")
    files = sorted(out.rglob("trajectory.json"))
    assert len(files) == len(finals) == 2
    for f in files:
        doc = atif.Trajectory.model_validate_json(f.read_bytes())
        steps = read_lines(run / doc.extra["traj"] / "traj.jsonl")
        assert len(doc.steps) == len(steps) + 1
        for step, line in zip(doc.steps[1:], steps):
            m = step.metrics
            assert (m.prompt_token_ids, m.completion_token_ids, m.logprobs) == (
                line["prompt_token_ids"], line["response_token_ids"], line["response_logprobs"])
            assert all(math.isfinite(x) for x in m.logprobs) and m.extra == {"finish_reason": line["finish_reason"]}
            assert step.extra["image_processor"] == line["image_processor"]
            assert step.model_name == str(work / "tiny-vlm") and step.extra["policy_version"] == line["policy_version"]
            for image in step.extra["images"]:
                assert hashlib.sha256((f.parent / image["path"]).read_bytes()).hexdigest() == image["sha256"]
