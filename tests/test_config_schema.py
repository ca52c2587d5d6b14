"""The config's JSON Schema and `cua config`: the committed schemas are current, every key is described,
every example config is valid, and `cua config show` prints what cua reads."""

import json
import re
import shutil

import pytest
import yaml
from helpers.cli import ROOT, run_cua

from cua_cli.config import fleet_json_schema, json_schema, load_config, load_fleet_config
from cua_cli.errors import ConfigError

SCHEMAS = {"cua-config.schema.json": ((), json_schema), "cua-fleet-config.schema.json": (("--fleet",),
                                                                                            fleet_json_schema)}
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
MODELINE = re.compile(r"# yaml-language-server: \$schema=\.\./(cua-(?:fleet-)?config\.schema\.json)\n")


@pytest.mark.parametrize("name", SCHEMAS)
def test_the_committed_schema_is_what_cua_config_schema_prints(name):
    args, function = SCHEMAS[name]
    r = run_cua("config", "schema", *args)
    assert r.returncode == 0, r.stderr
    assert (ROOT / name).read_text() == r.stdout, f"stale: run `cua config schema {' '.join(args)} > {name}`"
    assert json.loads(r.stdout) == function()


def _properties(schema: dict):
    """(path, property) of every key of every object of the schema."""
    objects = [("", schema)] + [(f"$defs.{name}.", d) for name, d in schema.get("$defs", {}).items()]
    for where, obj in objects:
        for key, prop in obj.get("properties", {}).items():
            yield where + key, prop


@pytest.mark.parametrize("function", [json_schema, fleet_json_schema])
def test_every_key_and_section_has_a_description(function):
    schema = function()
    found = list(_properties(schema))
    assert len(found) >= 10
    defs = schema.get("$defs", {})

    def description(prop):  # a section's own, or (pydantic leaves out a copy) its model's
        return prop.get("description") or defs.get(prop.get("$ref", "").rsplit("/", 1)[-1], {}).get("description")
    assert [path for path, prop in found if not (description(prop) or "").strip()] == []
    assert [name for name, d in schema.get("$defs", {}).items() if not d.get("description")] == []
    assert schema["description"] and schema["title"]


def test_schema_shows_ranges_kinds_and_closed_sections():
    schema = json_schema()
    defs = schema["$defs"]
    assert all(d.get("additionalProperties") is False for d in defs.values()) and \
        schema["additionalProperties"] is False
    num_envs = defs["RunnerConfig"]["properties"]["num_envs"]
    assert (num_envs["exclusiveMinimum"], num_envs["maximum"], num_envs["default"]) == (0, 100_000, 4)
    assert defs["EnvConfig"]["properties"]["kind"]["enum"] == ["cluster", "agentgym", "osworld"]
    assert "webshop" in defs["AgentgymEnv"]["properties"]["env"]["enum"]
    assert defs["ModelConfig"]["properties"]["image_uuids"]["enum"] == ["auto", True, False]


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_example_config_names_its_schema_and_is_valid(path):
    m = MODELINE.match(path.read_text())
    assert m, f"{path.name}: the first line must be `# yaml-language-server: $schema=../cua-config.schema.json`"
    if m.group(1) == "cua-config.schema.json":
        load_config(str(path))
    else:
        load_fleet_config(str(path))


def test_config_show_prints_every_key_with_defaults_and_masks_passwords(write):
    path = write("c.yaml", "tasks: {miniwob: {names: [click-test]}}\n"
                           "model: {provider: openai, endpoints: ['http://user:s3cret-pw@h:8000/v1'], "
                           "fleet: missing/fleet.json}\n")
    r = run_cua("config", "show", str(path), "--set", "runner.num_envs=8")
    assert r.returncode == 0, r.stderr
    assert "s3cret" not in r.stdout and "http://***@h:8000/v1" in r.stdout
    shown = yaml.safe_load(r.stdout)
    cfg = load_config(str(path), ("runner.num_envs=8",))
    expected = cfg.to_dict()
    expected["model"]["endpoints"] = ["http://***@h:8000/v1"]
    assert shown == expected  # every key, defaults filled in; the fleet file need not exist
    assert shown["runner"]["num_envs"] == 8 and shown["agent"]["history_images"] == 5
    # What it prints is itself a config, read back the same.
    again = load_config(str(write("again.yaml", r.stdout)))
    assert again.to_dict() == expected


def test_config_show_refuses_a_bad_config_naming_the_key(write):
    r = run_cua("config", "show", str(write("bad.yaml", "runner: {num_envz: 2}\n")))
    assert r.returncode == 2 and "bad.yaml: unknown key 'runner.num_envz'" in r.stderr
    assert "Traceback" not in r.stderr and "pydantic" not in r.stderr
    r = run_cua("config", "show", str(write("ok.yaml", "")), "--set", "agent.history_images=0")
    assert r.returncode == 2 and "agent.history_images: must be > 0 and <= 100, got 0" in r.stderr


def test_config_help_has_examples():
    for args in (("config",), ("config", "show"), ("config", "schema")):
        r = run_cua(*args, "--help")
        assert r.returncode == 0 and "Example" in r.stdout, args


def test_a_config_error_is_one_line_in_cua_words(write):
    """Never pydantic's own report: one line, file first, the key path, what was expected, the value."""
    cases = {
        "runner: {num_envs: two}": "runner.num_envs: expected int, got str 'two'",
        "runner: {num_envs: 1.5}": "runner.num_envs: expected int, got float 1.5",
        "model: {guided: 1}": "model.guided: expected bool, got int 1",
        "runner: [1]": "runner: expected a mapping, got list",
        "model: {endpoints: x}": "model.endpoints: expected a list, got str",
        "env: {kind: desktop}": "env.kind: must be one of cluster, agentgym, osworld, got 'desktop'",
        "model: {routing: random}": "model.routing: must be one of sticky, round_robin, got 'random'",
        "tasks: {miniwob: {seeds: [0, -1]}}": "tasks.miniwob.seeds[1]: must be >= 0 and <= 2147483647, got -1",
        "env: {timeout_s: .inf}": "env.timeout_s: must be a finite number, got inf",
        "env: {token_env: 'x y'}": "env.token_env: must name an environment variable, got 'x y'",
        "run: {results_dir: '  '}": "run.results_dir: must not be empty",
        "model: {name: \"a\\0b\"}": "model.name: string with a NUL or an unpaired surrogate character",
        "runner: {backend: ray}": "env.url: 'local' starts an env server on this host only",
        "tasks: {kind: miniwob, x: 1, rollout_n: 0}": "unknown key 'tasks.x' (known: kind, miniwob,",
        "runner: {max_steps: 0}\nrunner2: 1": "unknown key 'runner2'",
        "agent: {history_images: 0, parse_retries: -1}": "agent.history_images: must be > 0",  # the first in the file
    }
    for text, expected in cases.items():
        path = write("e.yaml", text + "\n")
        with pytest.raises(ConfigError) as e:
            load_config(str(path))
        assert str(e.value).startswith(f"{path}: ") and expected in str(e.value), (text, str(e.value))
        assert "\n" not in str(e.value) and "pydantic" not in str(e.value)


def test_config_tasks_counts_what_a_rollout_would_play_and_says_why_not_the_others(tmp_path):
    examples = tmp_path / "examples"
    shutil.copytree(ROOT / "tests" / "data" / "osworld" / "evaluation_examples" / "examples" / "os", examples / "os")
    shutil.copytree(ROOT / "tests" / "data" / "osworld" / "calc", examples / "libreoffice_calc")
    base = json.loads((examples / "os" / "cua-os-idle-delay.json").read_text())
    (examples / "chrome").mkdir()
    tabs = dict(base, id="cua-tabs", related_apps=["chrome"],
                config=[{"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://example.com/a"]}}])
    (examples / "chrome" / "cua-tabs.json").write_text(json.dumps(tabs))
    drive = dict(base, id="cua-drive", config=[{"type": "googledrive", "parameters": {
        "settings_file": "evaluation_examples/settings/googledrive/settings.yml", "operation": ["delete"]}}])
    (examples / "os" / "cua-drive.json").write_text(json.dumps(drive))
    config = tmp_path / "c.yaml"
    config.write_text(f"tasks: {{kind: osworld, osworld: {{task_list: {examples}}}}}\n"
                      "env: {kind: osworld, url: local}\nagent: {kind: osworld}\n")

    r = run_cua("config", "tasks", str(config), "--set", "env.osworld.apps=[]", "--format", "json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert (plan["tasks"], plan["playable"], plan["needs_credentials"], plan["needs_network"]) == (8, 5, 1, 1)
    assert {d["domain"]: (d["tasks"], d["playable"]) for d in plan["domains"]} == {
        "chrome": (1, 0), "libreoffice_calc": (1, 0), "os": (6, 5)}
    missing = {r["task_id"]: r["missing"] for r in plan["refused"]}
    assert missing.keys() == {"cua-tabs", "cua-calc-row-totals", "cua-drive"}
    # cua's own desktops have no network: a page the task opens would not load there
    assert {"app 'chrome' (not on these desktops)",
            "network (step 'chrome_open_tabs' opens example.com)"} <= set(missing["cua-tabs"])
    assert missing["cua-calc-row-totals"] == ["app 'libreoffice_calc' (not on these desktops)"]
    assert missing["cua-drive"] == ["step 'googledrive' (needs credentials: a Google account)"]
    # ... unless they are given the web, through their proxy
    web = run_cua("config", "tasks", str(config), "--set", "env.osworld.apps=[]", "--set", "env.osworld.network=allow",
                  "--set", "env.osworld.allow_hosts=[example.com]", "--format", "json")
    assert web.returncode == 0, web.stderr
    assert json.loads(web.stdout)["needs_network"] == 0
    assert not any(m.startswith("network") for r in json.loads(web.stdout)["refused"] for m in r["missing"])
    # Desktops with every app and the web (OSWorld's VMs): only what cua itself lacks is left.
    table = run_cua("config", "tasks", str(config), "--set", "env.url=http://10.0.0.5:50003")
    assert table.returncode == 0, table.stderr
    assert re.search(r"total\s+8\s+7\s+1\s+0\s+0", table.stdout), table.stdout
    assert "needs credentials" in table.stdout and "not on these desktops" not in table.stdout
    assert "network (" not in table.stdout
    bad = run_cua("config", "tasks", str(config), "--set", "env.osworld.apps=[notepad]")
    assert bad.returncode == 2 and "env.osworld.apps" in bad.stderr and "Traceback" not in bad.stderr
