"""Property tests: whatever the input, loading a config returns one or raises ConfigError."""

import json
import string
import typing

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError

from cua_cli._util.allowlist import HostAllowList
from cua_cli.config import Config, FleetConfig, load_config, load_fleet_config, vllm_flags
from cua_cli.errors import ConfigError

GOOD = "tasks:\n  kind: miniwob\n  miniwob: {names: [click-test], seeds: [0, 1]}\nrunner: {num_envs: 2}\n"


def _is_section(tp) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _fields(cls, prefix=""):
    """(key path, field, type) of every key of the schema, e.g. ('runner.num_envs', FieldInfo, int)."""
    for name, f in cls.model_fields.items():
        if _is_section(f.annotation):
            yield from _fields(f.annotation, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", f, f.annotation


def _unwrap(tp, metadata=()):
    """Optional[X], list[X] and Annotated[X, ...] -> (X, its constraints, whether optional, whether a list)."""
    optional = is_list = False
    metadata = list(metadata)
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp, *more = typing.get_args(tp)
            metadata += more
        elif origin is typing.Union:
            optional, tp = True, next(a for a in typing.get_args(tp) if a is not type(None))
        elif origin is list:
            is_list, tp, metadata = True, typing.get_args(tp)[0], []
        else:
            return tp, metadata, optional, is_list


class Range(typing.NamedTuple):
    lo: float
    hi: float
    above: bool   # (lo, hi] rather than [lo, hi]


def _range(metadata) -> Range | None:
    bounds = {k: getattr(m, k) for m in metadata for k in ("gt", "ge", "le") if getattr(m, k, None) is not None}
    if "le" not in bounds:
        return None
    return Range(bounds.get("gt", bounds.get("ge")), bounds["le"], "gt" in bounds)


KEYS = [key for key, _, _ in _fields(Config)]
FLEET_KEYS = [key for key, _, _ in _fields(FleetConfig)]

hostile = st.sampled_from([float("nan"), float("inf"), -1, 0, 2 ** 31, 2 ** 63, -2 ** 64, 10 ** 30, "", "a\0b"])
scalars = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30) | st.dates()
           | st.binary(max_size=10) | st.sampled_from(["local", "http://h:1/v1", "openai", "0", "A_B"]) | hostile)


def _nested(children):
    return st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8) | st.integers(), children, max_size=3)


data = st.recursive(scalars, _nested, max_leaves=8)
# Fragments that YAML gives meaning to, with scalars that have broken loaders before.
TOKENS = ["{", "}", "[", "]", ":", ": ", ",", "- ", "? ", "&a ", "&b ", "*a", "*b", "!!int ", "!!bool ", "!!binary ",
          "!!set ", "!!timestamp ", "!!float ", "!foo ", "<<: ", "---\n", "...\n", "#", "'", '"', "\\", "\n", "  ",
          "\t", "|", ">", "%YAML 1.1\n", "runner", "num_envs", "tasks", "miniwob", "seeds", "model", "endpoints",
          "1", "-1", "0x1f", "1:30", "1e400", ".nan", ".inf", "2020-13-45", "null", "~", "yes", "x" * 50,
          "9" * 30, "\x00", "\ud800", "\u2028", "\ufeff", "é"]
yamlish = st.lists(st.sampled_from(TOKENS) | st.text(max_size=5), max_size=60).map("".join)


def _assert_plain(obj):
    """What a loaded config must be: strict JSON (run.json) with 64-bit integers and no NUL."""
    text = json.dumps(obj, allow_nan=False)
    assert "\\u0000" not in text
    stack = [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, dict)):
            stack.extend(v.values() if isinstance(v, dict) else v)
        assert not isinstance(v, int) or -2 ** 63 <= v < 2 ** 63


def _load(path, overrides=()):
    try:
        return load_config(str(path), overrides)
    except ConfigError as e:
        assert str(path) in str(e) and len(str(e)) < 2000
        return None


def _write(tmp_path_factory, text):
    path = tmp_path_factory.getbasetemp() / "properties" / "c.yaml"  # one file, rewritten per example
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    return path


@given(text=yamlish | st.text())
def test_any_text_loads_or_is_refused(tmp_path_factory, text):
    cfg = _load(_write(tmp_path_factory, text))
    assert cfg is None or isinstance(cfg, Config)


@given(doc=st.dictionaries(st.sampled_from(KEYS + ["runner.num_envz", "x", "tasks.miniwob.x.y", ""]),
                           hostile | data, max_size=6))
def test_any_data_at_any_key_loads_or_is_refused(tmp_path_factory, doc):
    nested = {}
    for key, value in doc.items():
        *sections, name = key.split(".")
        node = nested
        for s in sections:
            node = node.setdefault(s, {})
            if not isinstance(node, dict):
                break
        else:
            node[name] = value
    cfg = _load(_write(tmp_path_factory, GOOD + yaml.safe_dump(nested)))
    if cfg is not None:
        _assert_plain(cfg.to_dict())


@given(key=st.sampled_from(KEYS) | st.text(max_size=20), value=yamlish | st.text(max_size=40),
       raw=st.text(max_size=40))
def test_any_set_item_loads_or_is_refused(tmp_path_factory, key, value, raw):
    path = _write(tmp_path_factory, GOOD)
    for item in (f"{key}={value}", raw):
        cfg = _load(path, (item,))
        if cfg is not None:
            _assert_plain(cfg.to_dict())


flag_names = st.text(string.ascii_letters + "-_= ", max_size=12)


@given(doc=st.fixed_dictionaries({}, optional={k: data | st.dictionaries(flag_names, data, max_size=3)
                                              for k in FLEET_KEYS}))
def test_any_fleet_config_loads_or_is_refused(tmp_path_factory, doc):
    path = _write(tmp_path_factory, yaml.safe_dump(doc))
    try:
        fc = load_fleet_config(str(path))
    except ConfigError as e:
        assert str(path) in str(e)
        return
    _assert_plain([vllm_flags(fc.vllm_args), fc.vllm_args, {k: str(v) for k, v in fc.env.items()}])


clean_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=20)
candidates = (clean_text | st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True) | st.just("local")
              | st.builds("http{}://{}:{}/v1".format, st.sampled_from(["", "s"]),
                          st.sampled_from(["127.0.0.1", "host", "[::1]"]), st.integers(1, 65535)))


def _valid(tp, metadata=()):
    """Values of type `tp` (with the field's constraints) that the field accepts."""
    base, metadata, optional, is_list = _unwrap(tp, metadata)
    if typing.get_origin(base) is typing.Literal:
        values = st.sampled_from(typing.get_args(base))
    elif base is bool:
        values = st.booleans()
    elif base in (int, float):
        r = _range(metadata)
        values = st.integers(r.lo + r.above, r.hi) if base is int else st.floats(r.lo, r.hi, exclude_min=r.above)
    else:
        check = TypeAdapter(typing.Annotated[(base, *metadata)] if metadata else base)

        def accepted(v):
            try:
                check.validate_python(v, strict=True)
                return True
            except ValidationError:
                return False
        values = candidates.filter(accepted)
    values = st.lists(values, max_size=3) if is_list else values
    return st.none() | values if optional else values


def _documents(cls):
    """YAML documents for `cls` that set any subset of its keys to valid values."""
    optional = {name: _documents(f.annotation) if _is_section(f.annotation) else _valid(f.annotation, f.metadata)
                for name, f in cls.model_fields.items()}
    return st.fixed_dictionaries({}, optional=optional)


def _fix_provider(doc):
    """Keys that depend on each other: the provider's own settings, and the env server of a Ray backend."""
    model = doc.get("model", {})
    if model.get("provider") == "openai" and not model.get("endpoints") and not model.get("fleet"):
        model["endpoints"] = ["http://127.0.0.1:8000/v1"]
    if model.get("provider") == "replay" and not model.get("replay_run"):
        model["replay_run"] = "runs/x"
    if model.get("provider") == "script" and not model.get("script"):
        model["script"] = "answers.json"
    if model.get("reload_from") == "mysql":  # reloads need the database and a fleet to reload
        model["fleet"] = model.get("fleet") or "fleet/fleet.json"
        mysql = doc.setdefault("storage", {}).setdefault("mysql", {})
        mysql["url_env"] = mysql.get("url_env") or "DART_DB_URL"
    if doc.get("runner", {}).get("backend") == "ray" and doc.get("env", {}).get("url", "local") == "local":
        doc.setdefault("env", {})["url"] = "http://127.0.0.1:8100"  # Ray's nodes cannot reach a local env server
    env = doc.get("env", {})
    if env.get("osworld", {}).get("desktops") and env.get("url", "local") != "local":
        env["osworld"]["desktops"] = []  # a list of desktops, or an env server: not both
    osworld = env.get("osworld", {})
    if "allow_hosts" in osworld:  # only host[:port] patterns, and network allow names at least one
        osworld["allow_hosts"] = [h for h in osworld["allow_hosts"] if _is_host_pattern(h)]
    if osworld.get("network") == "allow" and not osworld.get("allow_hosts"):
        osworld["allow_hosts"] = ["*.wikipedia.org", "127.0.0.1:8000"]
    return doc


def _is_host_pattern(text: str) -> bool:
    try:
        HostAllowList([text])
        return True
    except ValueError:
        return False


valid_configs = st.deferred(lambda: _documents(Config).map(_fix_provider))


def _merged(base: dict, doc: dict) -> dict:
    out = dict(base)
    for k, v in doc.items():
        out[k] = _merged(base[k], v) if isinstance(v, dict) else v
    return out


NUMERIC = [(key, _range(meta), is_list) for key, f, tp in _fields(Config)
           for base, meta, _, is_list in [_unwrap(tp, f.metadata)] if base in (int, float)]


@pytest.mark.slow  # a long property run
@given(doc=valid_configs, past=st.sampled_from(NUMERIC), above=st.booleans())
def test_valid_config_round_trips_and_every_bound_holds(tmp_path_factory, doc, past, above):
    cfg = load_config(str(_write(tmp_path_factory, yaml.safe_dump(doc))))
    assert cfg.to_dict() == _merged(Config().to_dict(), doc)
    path = _write(tmp_path_factory, yaml.safe_dump(cfg.to_dict()))
    assert load_config(str(path)).to_dict() == cfg.to_dict()
    # One step past either end of any numeric range is refused, naming the key.
    key, r, is_list = past
    value = r.hi + 1 if above else r.lo - (0 if r.above else 1)
    with pytest.raises(ConfigError) as e:
        load_config(str(path), (f"{key}={[value] if is_list else value}",))
    assert str(path) in str(e.value) and key in str(e.value)
