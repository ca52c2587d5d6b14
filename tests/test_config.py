"""Bad input gets a clear error naming the file and key, through the real CLI (exit 2)."""

import json
import time

import pytest
import yaml
from helpers.cli import ROOT, run_cua

from cua_cli.config import Config, FleetConfig, for_rollout, load_config, load_fleet_config, vllm_flags
from cua_cli.errors import ConfigError
from cua_cli.kinds import AGENT_MODALITIES, AGENTS, ENV_MODALITIES, ENVS
from cua_cli.tasks import load_tasks

GOOD = """
tasks:
  kind: miniwob
  miniwob: {names: [click-test], seeds: [0, 1]}
runner: {num_envs: 2}
"""


def test_good_config_and_set_override(write):
    cfg = load_config(str(write("c.yaml", GOOD)), ("runner.num_envs=8", "model.temperature=0.7", "run.name=x"))
    assert cfg.runner.num_envs == 8 and cfg.model.temperature == 0.7 and cfg.run.name == "x"
    assert [t.task_id for t in load_tasks(cfg)] == ["click-test@0", "click-test@1"]


@pytest.mark.parametrize("text, expected", [
    ("tasks: [unclosed", "malformed YAML"),
    ("runner: {num_envz: 2}", "unknown key 'runner.num_envz'"),
    ("runner: {num_envs: two}", "runner.num_envs: expected int"),
    ("runner: {num_envs: 0}", "runner.num_envs: must be > 0"),
    ("tasks: {kind: webarena}", "tasks.kind: must be one of"),
    ("model: {provider: openai}", "model.endpoints"),
    ("env: {token_env: 'x y'}", "env.token_env"),
])
def test_bad_config_errors_name_file_and_key(write, text, expected):
    path = write("bad.yaml", text)
    with pytest.raises(ConfigError) as e:
        cfg = load_config(str(path))
        load_tasks(cfg)
    assert str(path) in str(e.value) and expected in str(e.value)


def test_cli_exit_code_2_for_bad_config(write, tmp_path):
    path = write("bad.yaml", "runner: {num_envz: 2}\n")
    r = run_cua("rollout", str(path))
    assert r.returncode == 2
    assert "bad.yaml" in r.stderr and "runner.num_envz" in r.stderr
    r = run_cua("rollout", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "missing.yaml" in r.stderr
    r = run_cua("rollout", str(write("ok.yaml", GOOD)), "--set", "runner.max_steps=-1")
    assert r.returncode == 2 and "runner.max_steps" in r.stderr
    assert not (tmp_path / "results").exists(), "no run folder for bad input"


def test_cli_names_missing_token_variable(write):
    path = write("tok.yaml", GOOD + "env: {token_env: CUA_TEST_NOT_SET_TOKEN}\n")
    r = run_cua("rollout", str(path))
    assert r.returncode == 2 and "CUA_TEST_NOT_SET_TOKEN" in r.stderr


def test_cli_refuses_a_token_that_cannot_travel_as_a_bearer_token(write, monkeypatch):
    path = write("tok2.yaml", GOOD + "env: {token_env: CUA_TEST_BAD_TOKEN}\n")
    for value in ("s3cr3t\nX-Evil: 1", "s3cr\u00e9t", "two words"):
        monkeypatch.setenv("CUA_TEST_BAD_TOKEN", value)
        r = run_cua("rollout", str(path))
        assert r.returncode == 2 and "CUA_TEST_BAD_TOKEN" in r.stderr and "Traceback" not in r.stderr
        assert value.split()[0] not in r.stderr  # never shown


def _osworld(write, listing, examples):
    write("ow/test_all.json", json.dumps(listing))
    for (domain, tid), body in examples.items():
        write(f"ow/examples/{domain}/{tid}.json", json.dumps(body))
    return write("ow.yaml", "tasks:\n  kind: osworld\n  osworld: {task_list: ow/test_all.json, examples_dir: ow/examples}\n")


def test_osworld_tasks_load(write):
    evaluator = {"func": "exact_match", "result": {"type": "vm_command_line", "command": "cat f"},
                 "expected": {"type": "rule", "rules": {"expected": "x"}}}
    ex = {"instruction": "Open the file", "config": [{"type": "launch", "parameters": {"command": ["gedit"]}}],
          "evaluator": evaluator}
    path = _osworld(write, {"chrome": ["t1", "t2"]}, {("chrome", "t1"): ex, ("chrome", "t2"): ex})
    tasks = load_tasks(load_config(str(path)))
    assert [(t.task_id, t.domain, t.instruction) for t in tasks] == [
        ("t1", "chrome", "Open the file"), ("t2", "chrome", "Open the file")]
    assert tasks[0].evaluator == evaluator


def test_osworld_shared_and_traversal_ids(write):
    """An id two domains share (OSWorld's own test_all.json has one) becomes <domain>/<id>; a path is refused."""
    ex = {"instruction": "x", "evaluator": {"func": "infeasible"}}
    path = _osworld(write, {"chrome": ["t1"], "gimp": ["t1"]}, {("chrome", "t1"): ex, ("gimp", "t1"): ex})
    assert [t.task_id for t in load_tasks(load_config(str(path)))] == ["chrome/t1", "gimp/t1"]
    path = _osworld(write, {"chrome": ["../secret"]}, {})
    r = run_cua("rollout", str(path))
    assert r.returncode == 2 and "'../secret' is not a plain file name" in r.stderr


def test_jsonl_tasks_keep_any_id(write):
    write("t.jsonl", '{"task_id": "../x", "domain": "d", "config": {"miniwob": "click-test", "seed": 0}}\n'
                     '{"task_id": "a/b"}\n')
    cfg = load_config(str(write("j.yaml", "tasks: {kind: jsonl, jsonl: t.jsonl}\n")))
    assert [t.task_id for t in load_tasks(cfg)] == ["../x", "a/b"]
    write("dup.jsonl", '{"task_id": "a"}\n{"task_id": "a"}\n')
    with pytest.raises(ConfigError, match="duplicate task id 'a'"):
        load_tasks(load_config(str(write("d.yaml", "tasks: {kind: jsonl, jsonl: dup.jsonl}\n"))))


# --- Input that must be refused cleanly: ConfigError naming file and key, quickly ---

# Nine levels of nine aliases each: ~400 bytes that expand to 9**9 values.
BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))


def _merged(*texts) -> str:
    """The YAML documents merged key by key (a config may not give a key twice)."""
    def merge(a, b):
        return {**a, **{k: merge(a[k], v) if isinstance(v, dict) and isinstance(a.get(k), dict) else v
                        for k, v in b.items()}}
    out = {}
    for text in texts:
        out = merge(out, yaml.safe_load(text))
    return yaml.safe_dump(out)


def _refused(path, overrides=()):
    start = time.monotonic()
    with pytest.raises(ConfigError) as e:
        load_config(str(path), overrides)
    assert time.monotonic() - start < 10  # refused at once, not after a blow-up (generous: a loaded machine)
    assert str(path) in str(e.value)
    return str(e.value)


def test_non_utf8_file_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"run:\n  name: caf\xe9\n")
    msg = _refused(path)
    assert "line 2" in msg and "UTF-8" in msg


def test_oversized_file(write):
    assert "larger than" in _refused(write("big.yaml", "# " + "x" * (300 << 10) + "\n"))


@pytest.mark.parametrize("item, expected", [
    ("runner.num_envs=[1", "malformed YAML"),
    ("runner.num_envs={a: &a [*a]}", "recursive"),
    ("runner.num_envs=" + "[" * 100, "nested deeper"),
    ("runner..num_envs=1", "expected KEY.PATH=VALUE"),
    ("=1", "expected KEY.PATH=VALUE"),
    ("runner num_envs=1", "expected KEY.PATH=VALUE"),
    ("runner.num_envs=!!bool maybe", "runner.num_envs"),
])
def test_bad_set_item_is_named(write, item, expected):
    msg = _refused(write("c.yaml", GOOD), (item,))
    assert "--set" in msg and item[:15] in msg and expected in msg


@pytest.mark.parametrize("text, key, expected", [
    ("runner: " + "[" * 5000 + "]" * 5000, "runner", "nested deeper"),
    ("runner: {num_envs: " + "1" * 5000 + "}", "runner.num_envs", "longer than 100"),
    ("runner: {num_envs: 0x" + "f" * 90 + "}", "runner.num_envs", "beyond 64 bits"),
    ("tasks: {miniwob: {seeds: [2020-13-45]}}", "tasks.miniwob.seeds[0]", "cannot read"),
    ("model: {name: !!bool maybe}", "model.name", "cannot read"),
    ("run: &a {name: *a}", "run.name", "recursive"),
    (BOMB, "e[0]", "aliases are expanded"),
])
def test_hostile_yaml_names_file_and_key(write, text, key, expected):
    msg = _refused(write("hostile.yaml", text))
    assert expected in msg and key in msg


def test_alias_bomb_through_the_cli(write, tmp_path):
    path = write("bomb.yaml", BOMB + "runner: {num_envs: *i}\n")
    r = run_cua("rollout", str(path), timeout=30)
    assert r.returncode == 2 and "bomb.yaml" in r.stderr and "aliases are expanded" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "results").exists()
    # Aliases as such stay allowed.
    cfg = load_config(str(write("a.yaml", GOOD + "model: {endpoints: &e [http://h:1/v1], provider: openai}\n")))
    assert cfg.model.endpoints == ["http://h:1/v1"]


@pytest.mark.parametrize("text, key", [
    ("runner: {step_timeout_s: .nan}", "runner.step_timeout_s"),
    ("runner: {episode_timeout_s: .inf}", "runner.episode_timeout_s"),
    ("env: {timeout_s: -1}", "env.timeout_s"),
    ("env: {timeout_s: 0}", "env.timeout_s"),
    ("env: {retries: -1}", "env.retries"),
    ("model: {retries: 1000}", "model.retries"),
    ("env: {allocate_wait_s: -0.5}", "env.allocate_wait_s"),
    ("env: {local: {port: 65536}}", "env.local.port"),
    ("env: {local: {port: -1}}", "env.local.port"),
    ("env: {local: {max_envs: 100000}}", "env.local.max_envs"),
    ("agent: {history_images: 0}", "agent.history_images"),
    ("agent: {history_images: 1000}", "agent.history_images"),
    ("agent: {parse_retries: -1}", "agent.parse_retries"),
    ("runner: {num_envs: 100001}", "runner.num_envs"),
    ("runner: {processes: 5000}", "runner.processes"),
    ("runner: {max_attempts: 1000}", "runner.max_attempts"),
    ("runner: {max_steps: 1000000}", "runner.max_steps"),
    ("runner: {lease_ttl_s: .nan}", "runner.lease_ttl_s"),
    ("runner: {poll_s: 0}", "runner.poll_s"),
    ("tasks: {rollout_n: 1000000}", "tasks.rollout_n"),
    ("tasks: {limit: -1}", "tasks.limit"),
    ("tasks: {miniwob: {seeds: [0, -1]}}", "tasks.miniwob.seeds[1]"),
    ("tasks: {miniwob: {seeds: [4294967296]}}", "tasks.miniwob.seeds[0]"),
    ("tasks: {miniwob: {episode_max_time: 0}}", "tasks.miniwob.episode_max_time"),
    ("model: {temperature: .nan}", "model.temperature"),
    ("model: {temperature: -0.1}", "model.temperature"),
    ("model: {max_tokens: 0}", "model.max_tokens"),
    ("model: {timeout_s: .inf}", "model.timeout_s"),
    ("run: {name: ''}", "run.name"),
    ("run: {name: " + "x" * 300 + "}", "run.name"),
    ('run: {results_dir: "a\\0b"}', "run.results_dir"),
    ("model: {name: '  '}", "model.name"),
    ("model: {fleet: ''}", "model.fleet"),
    ("model: {provider: openai, endpoints: [ftp://h/v1]}", "model.endpoints[0]"),
    ("model: {provider: openai, endpoints: ['http://h:99999/v1']}", "model.endpoints[0]"),
    ("model: {provider: openai, endpoints: [localhost:8000]}", "model.endpoints[0]"),
    ("env: {url: 'localhost:8100'}", "env.url"),
])
def test_values_out_of_range_are_refused(write, text, key):
    msg = _refused(write("range.yaml", _merged(GOOD, text)))
    assert f"range.yaml: {key}:" in msg


@pytest.mark.parametrize("key, ok, bad", [
    ("env.local.port", 0, -1), ("env.local.port", 65535, 65536),
    ("tasks.miniwob.seeds", "[2147483647]", "[2147483648]"),
    ("tasks.limit", 0, -1), ("agent.history_images", 1, 0), ("agent.history_images", 100, 101),
    ("runner.num_envs", 100000, 100001), ("env.retries", 0, -1), ("model.retries", 10, 11),
    ("env.allocate_wait_s", 0, -0.5), ("env.timeout_s", 0.001, 0), ("runner.episode_timeout_s", 86400, 86401),
    ("env.url", "https://envs.example:8100", "https://envs.example:0x1"), ("model.temperature", 2.0, ".nan"),
])
def test_range_edges(write, key, ok, bad):
    path = write("edge.yaml", GOOD)
    load_config(str(path), (f"{key}={ok}",))
    assert f"edge.yaml: {key}" in _refused(path, (f"{key}={bad}",))


def test_every_numeric_key_has_a_range():
    """Walks the JSON Schema, which pydantic writes from the very constraints it checks."""
    def walk(schema, defs, where):
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]] if "$ref" in schema else schema
        for name, prop in schema.get("properties", {}).items():
            for alt in prop.get("anyOf", [prop]):  # Optional[X]: X or null
                alt = alt.get("items", alt) if alt.get("type") == "array" else alt
                if "$ref" in alt:
                    yield from walk(alt, defs, f"{where}{name}.")
                elif alt.get("type") in ("integer", "number"):
                    yield f"{where}{name}", ("minimum" in alt or "exclusiveMinimum" in alt) and "maximum" in alt
    found = [f for model in (Config, FleetConfig) for schema in [model.model_json_schema()]
             for f in walk(schema, schema.get("$defs", {}), "")]
    assert len(found) > 25
    assert [key for key, ranged in found if not ranged] == []


@pytest.mark.parametrize("text, key", [
    ("tp: 0", "tp"), ("base_port: 70000", "base_port"), ("cpu: -1", "cpu"), ("cpu: 100000", "cpu"),
    ("ready_timeout_s: .nan", "ready_timeout_s"), ("check_interval_s: 0", "check_interval_s"),
    ("vllm_args: {'max model len': 1}", "vllm_args"), ("vllm_args: {max-model-len: .inf}", "vllm_args"),
    ("vllm_args: {x: 2020-01-01}", "vllm_args"), ("vllm_args: {x: !!set {a}}", "vllm_args"),
    ("vllm_args: {x: {1: 2}}", "vllm_args"), ("env: {FOO: [1]}", "env"), ("env: {'A=B': 1}", "env"),
    ("env: {FOO: .nan}", "env"), ('env: {FOO: "a\\0b"}', "env"), ("model: ''", "model"),
])
def test_bad_fleet_config_values(write, text, key):
    path = write("fleet.yaml", text + "\n")
    with pytest.raises(ConfigError) as e:
        load_fleet_config(str(path))
    assert f"fleet.yaml: {key}:" in str(e.value)


def test_fleet_config_bomb_through_the_cli_and_shipped_config(write):
    path = write("fleet.yaml", BOMB + "vllm_args: {x: *i}\n")
    r = run_cua("start-models", "--config", str(path), "--cpu", "1", "--model", "m", timeout=30)
    assert r.returncode == 2 and "fleet.yaml" in r.stderr and "aliases are expanded" in r.stderr
    fc = load_fleet_config(str(ROOT / "configs/fleet-cpu.yaml"))
    assert vllm_flags(fc.vllm_args)[:2] == ["--dtype", "float32"] and fc.base_port == 8300


def test_a_key_given_twice_is_refused_but_merges_may_be_overridden(write):
    twice = write("twice.yaml", "runner: {num_envs: 2}\nrunner: {num_envs: 8}\n")
    with pytest.raises(ConfigError, match=r"twice.yaml: .*'runner' given twice"):
        load_config(str(twice))
    merged = write("merged.yaml", "base: &b {num_envs: 2, max_steps: 5}\n".replace("base", "x-base") +
                   "runner: {<<: *b, num_envs: 8}\n")
    with pytest.raises(ConfigError, match="unknown key 'x-base'"):  # the anchor's key itself is unknown
        load_config(str(merged))
    ok = write("ok.yaml", "runner: &r {num_envs: 2, max_steps: 5}\nagent: {parse_retries: 1}\n")
    assert load_config(str(ok)).runner.num_envs == 2


@pytest.mark.parametrize("key, value", [
    ("env.url", '"http://user:pa/ss#w?rd@h:notaport/x"'),
    ("model.endpoints", '["http://u:s3cret-pw@h:99999999/v1"]'),
])
def test_a_malformed_url_in_an_error_message_keeps_its_password_masked(write, key, value):
    path = write("c.yaml", "tasks: {kind: miniwob, miniwob: {names: [click-test], seeds: [0]}}\n"
                           "model: {provider: openai, endpoints: ['http://127.0.0.1:8000/v1']}\n")
    with pytest.raises(ConfigError) as e:
        load_config(str(path), (f"{key}={value}",))
    assert key in str(e.value) and "***@h" in str(e.value)
    assert "pa/ss" not in str(e.value) and "s3cret" not in str(e.value)


def test_a_run_name_may_hold_any_character_but_nul(write):
    path = write("c.yaml", "tasks: {kind: miniwob, miniwob: {names: [click-test], seeds: [0]}}\n")
    assert load_config(str(path), ('run.name="a/../b \\ud800 é"',)).run.name == "a/../b \ud800 é"
    with pytest.raises(ConfigError) as e:
        load_config(str(path), ('run.name="a\\0b"',))
    assert "run.name" in str(e.value) and "NUL" in str(e.value)


# --- What `cua rollout` accepts beyond a valid config (config.for_rollout): each refusal names the key ---

AGENTGYM_LOCAL = "tasks: {kind: agentgym}\nenv: {kind: agentgym, url: local}\nagent: {kind: react}\n"


@pytest.mark.parametrize("texts, watch, expected", [
    (["env: {kind: agentgym, url: 'http://127.0.0.1:9'}"], False,
     "agent.kind: uitars plays gui envs, but env.kind agentgym is a text env"),
    (["agent: {kind: react}"], False, "agent.kind: react plays text envs, but env.kind cluster is a gui env"),
    (["tasks: {adaptive: {rounds: 2}}"], False, "tasks.adaptive: adaptive rounds run as a service: add --watch"),
    ([AGENTGYM_LOCAL, "env: {agentgym: {env: textcraft}}"], False,
     "env.agentgym.env: the local env server speaks AgentGym's webarena protocol only, not textcraft"),
    ([AGENTGYM_LOCAL], False, "env.local.agentgym_tasks: list the MiniWoB tasks the local server's AgentGym routes"),
    (["model: {fleet: missing.json}"], True, "model.fleet: "),
    (["agent: {observation: a11y_tree}"], False, "agent.observation: a11y_tree is a desktop's accessibility tree: "
                                                 "it needs agent.kind osworld on env.kind osworld"),
    (["env: {kind: osworld}", "agent: {kind: uitars, observation: screenshot_a11y_tree}"], False,
     "agent.observation: screenshot_a11y_tree is a desktop's accessibility tree"),
])
def test_rollout_refuses_what_it_cannot_play_naming_the_key(write, texts, watch, expected):
    path = write("r.yaml", _merged(GOOD, *texts))
    cfg = load_config(str(path))  # a valid config: other commands read it
    with pytest.raises(ConfigError) as e:
        for_rollout(cfg, watch)
    assert str(e.value).startswith(f"{path}: ") and expected in str(e.value)


@pytest.mark.parametrize("texts, watch", [
    (["tasks: {adaptive: {rounds: 2}}"], True),
    ([AGENTGYM_LOCAL, "env: {local: {agentgym_tasks: [click-test]}}"], False),
    ([AGENTGYM_LOCAL, "env: {url: 'http://127.0.0.1:9', agentgym: {env: textcraft}}"], False),
    (["env: {kind: osworld}", "agent: {kind: osworld, observation: a11y_tree}"], False),
])
def test_rollout_accepts_what_it_can_play(write, texts, watch):
    cfg = load_config(str(write("r.yaml", _merged(GOOD, *texts))))
    before = cfg.to_dict()
    for_rollout(cfg, watch)  # no refusal, and without a fleet nothing to rewrite
    assert cfg.to_dict() == before


@pytest.mark.parametrize("fleet, expected", [
    (None, "no fleet file (start one with `cua start-models`)"),
    ("{not json", "not a fleet file"),
    ('{"servers": [{"pid": 1}]}', "servers[0] needs a 'url' string"),
    ('{"supervisor_pid": 1, "servers": []}', "lists no healthy server"),
])
def test_rollout_refuses_a_missing_or_unhealthy_fleet(write, tmp_path, fleet, expected):
    if fleet is not None:
        write("fleet/fleet.json", fleet)
    cfg = load_config(str(write("r.yaml", GOOD + "model: {fleet: fleet/fleet.json}\n")))
    with pytest.raises(ConfigError) as e:
        for_rollout(cfg, watch=False)
    assert "r.yaml: model.fleet: " in str(e.value) and expected in str(e.value)


def test_a_fleet_becomes_the_model_endpoints_for_a_rollout_only(write):
    write("fleet/fleet.json", json.dumps({"supervisor_pid": 1, "servers": [
        {"url": "http://127.0.0.1:8301/", "pid": 2, "gpus": [], "model": "m", "served_model_name": "tiny"},
        {"url": "http://127.0.0.1:8302", "pid": 3, "gpus": [], "model": "m", "served_model_name": "tiny"}]}))
    cfg = load_config(str(write("r.yaml", GOOD + "model: {fleet: fleet/fleet.json, name: other}\n")))
    assert (cfg.model.provider, cfg.model.endpoints, cfg.model.name) == ("random", [], "other")  # not read yet
    for_rollout(cfg, watch=False)
    assert cfg.model.provider == "openai" and cfg.model.name == "tiny"
    assert cfg.model.endpoints == ["http://127.0.0.1:8301/v1", "http://127.0.0.1:8302/v1"]


def test_cli_refuses_a_missing_fleet_before_anything_starts(write, tmp_path):
    path = write("r.yaml", GOOD + f"run: {{results_dir: {tmp_path}/results}}\n")
    r = run_cua("rollout", str(path), "--fleet", str(tmp_path / "nowhere.json"))
    assert r.returncode == 2 and "r.yaml: model.fleet: " in r.stderr and "nowhere.json" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "results").exists()


def test_every_env_and_agent_kind_has_a_modality():
    assert set(ENV_MODALITIES) == set(ENVS) and set(AGENT_MODALITIES) == set(AGENTS)
    assert set(ENV_MODALITIES.values()) | set(AGENT_MODALITIES.values()) == {"gui", "text"}
