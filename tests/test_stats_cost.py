"""What a run costs (`cua stats --cost`, `cua compare --cost`): env time, desktop memory, model
server busy time and tokens, per success and in money, on run folders made with the run folder's
own writer, with hand-computed numbers."""

import json
import math

import pytest
from helpers.cli import run_cua
from hypothesis import given
from hypothesis import strategies as st

from cua_cli.errors import InputError
from cua_cli.runfolder.jsonl import append_line
from cua_cli.runfolder.records import PHASES
from cua_cli.runfolder.writer import RunDir
from cua_cli.stats.cost import PRICES, cost_figures, delta, memory_cap, parse_prices
from cua_cli.stats.readers import read_run

T0 = 1_790_000_000.0
DESKTOPS = {"env": {"kind": "osworld", "url": "local", "osworld": {"desktops": [], "limits": {
    "memory_gib": 2.0, "enforce": True}}}, "runner": {"sample_s": 1.0}}
PRICED = {"gpu-hour": 3.6, "desktop-hour": 0.36, "mtok": 2.0}


def _phases(**given) -> dict:
    return {p: given.get(p, 0.0) for p in PHASES}


def _attempt(task, domain, outcome, duration, attempt=0, model_s=0.0) -> dict:
    return {"task_id": task, "domain": domain, "sample": 0, "attempt": attempt, "outcome": outcome,
            "score": {"success": 1.0, "failure": 0.0}.get(outcome), "reward": None, "steps": 1,
            "stop_reason": "env_error" if outcome == "error" else "finished", "duration_s": duration,
            "error": None, "traj": None, "phases": _phases(model_s=model_s, other_s=duration - model_s)}


def make_run(root, name, config, scheduled, attempts, metrics=()):
    """A run folder as a rollout writes it: run.json by RunDir, every line appended by the writers' append_line."""
    run = RunDir.create(root, name, config)
    for task, domain in scheduled:
        append_line(run.scheduled, {"task_id": task, "domain": domain, "sample": 0})
    for line in attempts:
        append_line(run.episodes, line)
    for line in metrics:
        append_line(run.path / "metrics.jsonl", line)
    return run.path


def _server(name, t, running, prompt, generation) -> dict:
    return {"t": T0 + t, "server": name, "up": True, "running": running, "waiting": 0, "kv_usage": 0.1,
            "prefix_hits": None, "prefix_queries": None, "prompt_tokens": prompt, "generation_tokens": generation,
            "queue_s_sum": None, "queue_count": None}


# Server s1: 11 samples 1 s apart, a request running in the first five: busy 5 s; its counters rose by
# 10,000 prompt and 1,000 generated tokens. Server s2: busy 2 s (0-2) and 1 s (6-7); down at 4; restarted
# before 6 (its counters drop: no loss counted); then a pause of 93 s (a resumed run: more than
# 2 x max(sample_s 1, 5 s timeout) = 10 s), whose running request and counters count nothing.
# Busy 5 + 3 = 8 s; prompt 10,000 + 500 + 200 = 10,700; generated 1,000 + 50 + 20 = 1,070.
METRICS = [_server("http://s1", i, 1 if i < 5 else 0, 1000.0 * i, 100.0 * i) for i in range(11)] + [
    _server("http://s2", 0, 2, 0.0, 0.0), _server("http://s2", 2, 0, 500.0, 50.0),
    {"t": T0 + 4, "server": "http://s2", "up": False}, _server("http://s2", 6, 3, 100.0, 10.0),
    _server("http://s2", 7, 1, 300.0, 30.0), _server("http://s2", 100, 1, 5000.0, 500.0),
    {"t": T0, "gpu": 0, "util": 90, "mem_used": 1, "mem_total": 2}]
# chrome: a fails over to a success (10 s + 30 s), b fails (20 s), e ends in an infra error (5 s);
# gimp: c succeeds (40 s), d never finished. Model-call time: chrome 30 s, gimp 10 s, so chrome gets 3/4
# of the servers' load.
SCHEDULED = [("a", "chrome"), ("b", "chrome"), ("e", "chrome"), ("c", "gimp"), ("d", "gimp")]
ATTEMPTS = [_attempt("a", "chrome", "error", 10.0), _attempt("a", "chrome", "success", 30.0, 1, model_s=20.0),
            _attempt("b", "chrome", "failure", 20.0, model_s=10.0), _attempt("e", "chrome", "error", 5.0),
            _attempt("c", "gimp", "success", 40.0, model_s=10.0)]


@pytest.fixture
def desktop_run(tmp_path):
    return make_run(tmp_path, "desk", DESKTOPS, SCHEDULED, ATTEMPTS, METRICS)


def test_a_run_hand_computed(desktop_run):
    f = cost_figures(read_run(desktop_run), PRICED)
    assert (f["tasks"], f["pairs"], f["successes"], f["failures"], f["errors"], f["missing"]) == (5, 5, 2, 1, 1, 1)
    assert (f["attempts"], f["error_attempts"], f["untimed_attempts"]) == (5, 2, 0)
    assert f["env_s"] == 105.0 and f["error_env_s"] == 15.0 and f["env_s_per_success"] == 52.5
    assert f["desktop_memory_limit_gib"] == 2.0 and f["desktop_memory_gib_s"] == 210.0
    assert f["desktop_memory_gib_s_per_success"] == 105.0
    assert f["model_busy_s"] == pytest.approx(8.0) and f["model_busy_s_per_success"] == pytest.approx(4.0)
    assert (f["prompt_tokens"], f["generation_tokens"], f["tokens"]) == (10_700, 1_070, 11_770)
    assert f["tokens_per_success"] == 5_885
    # gpu 8 s / 3600 x 3.6 = 0.008; envs 105 s / 3600 x 0.36 = 0.0105; tokens 11,770 / 1e6 x 2 = 0.02354
    assert f["cost_gpu"] == pytest.approx(0.008) and f["cost_env"] == pytest.approx(0.0105)
    assert f["cost_tokens"] == pytest.approx(0.02354) and f["cost"] == pytest.approx(0.04204)
    assert f["cost_per_task"] == pytest.approx(0.04204 / 5) and f["cost_per_success"] == pytest.approx(0.02102)
    assert f["unknown"] == {}


def test_each_domain_has_its_own_env_time_and_its_share_of_the_model_load(desktop_run):
    d = cost_figures(read_run(desktop_run), PRICED)["domains"]
    chrome, gimp = d["chrome"], d["gimp"]
    assert set(d) == {"chrome", "gimp"}
    assert (chrome["tasks"], chrome["successes"], chrome["failures"], chrome["errors"]) == (3, 1, 1, 1)
    assert (chrome["env_s"], chrome["error_env_s"], chrome["attempts"]) == (65.0, 15.0, 4)
    assert (gimp["tasks"], gimp["successes"], gimp["missing"], gimp["env_s"]) == (2, 1, 1, 40.0)
    assert chrome["model_busy_s"] == pytest.approx(6.0) and gimp["model_busy_s"] == pytest.approx(2.0)
    assert chrome["tokens"] == pytest.approx(8_827.5) and gimp["tokens"] == pytest.approx(2_942.5)
    assert gimp["desktop_memory_gib_s"] == 80.0
    # chrome: 0.006 + 0.0065 + 0.017655; gimp: 0.002 + 0.004 + 0.005885
    assert chrome["cost"] == pytest.approx(0.030155) and chrome["cost_per_task"] == pytest.approx(0.030155 / 3)
    assert chrome["cost_per_success"] == pytest.approx(0.030155)
    assert gimp["cost"] == pytest.approx(0.011885) and gimp["cost_per_task"] == pytest.approx(0.011885 / 2)


def test_no_success_gives_n_a_per_success_never_a_division_by_zero(tmp_path):
    run = make_run(tmp_path, "none", DESKTOPS, [("a", "web"), ("b", "web")],
                   [_attempt("a", "web", "failure", 4.0, model_s=1.0), _attempt("b", "web", "error", 2.0)], METRICS)
    f = cost_figures(read_run(run), PRICED)
    assert f["successes"] == 0 and f["env_s"] == 6.0 and f["cost"] == pytest.approx(0.008 + 0.0006 + 0.02354)
    assert f["cost_per_task"] == pytest.approx(f["cost"] / 2)
    assert all(f[k] is None for k in f if k.endswith("_per_success"))
    r = run_cua("stats", str(run), "--price", "gpu-hour=3.6,desktop-hour=0.36,mtok=2")
    assert r.returncode == 0, r.stderr
    per_success = [line.split("│")[2].strip() for line in r.stdout.splitlines() if "per success" in line]
    assert len(per_success) == 5 and set(per_success) == {"n/a"}


def test_the_table_shows_totals_per_success_money_and_domains(desktop_run):
    r = run_cua("stats", str(desktop_run), "--cost", "--price", "gpu-hour=3.6, desktop-hour=0.36, mtok=2",
                "--by", "domain")
    assert r.returncode == 0, r.stderr
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in r.stdout.splitlines()
            if line.count("│") == 3}
    assert rows["env s"] == "105.0" and rows["env s per success"] == "52.5" and rows["successes"] == "2"
    assert rows["attempts ended by an infra error"] == "2" and rows["env s of those infra-error attempts"] == "15.0"
    assert rows["model busy s"] == "8.0" and rows["tokens (prompt + generated)"] == "11,770"
    assert rows["desktop memory GiB-s, at most"] == "210.0"
    assert rows["cost"] == "0.042" and rows["cost per success"] == "0.021" and rows["cost of envs"] == "0.0105"
    chrome = next(line for line in r.stdout.splitlines() if "│ chrome" in line)
    assert "1 / 3" in chrome and "65.0" in chrome and "0.03" in chrome
    assert "retries and infrastructure errors included" in r.stdout and "cap (2 GiB)" in r.stdout
    assert "gpu-hour prices an hour of one model server busy" in r.stdout


def test_json_and_csv_carry_the_figures(desktop_run):
    r = run_cua("stats", str(desktop_run), "--price", "mtok=2", "--format", "json")
    out = json.loads(r.stdout)
    (f,) = out["runs"]
    assert out["prices"] == {"mtok": 2.0}
    assert f["cost"] == pytest.approx(0.02354) and f["cost_gpu"] is None and f["cost_env"] is None
    assert f["domains"]["gimp"]["env_s"] == 40.0
    r = run_cua("stats", str(desktop_run), "--cost", "--format", "csv", "--by", "domain")
    head, chrome, gimp = r.stdout.strip().splitlines()
    fields = head.split(",")
    assert fields[:2] == ["run", "domain"] and dict(zip(fields, gimp.split(",")))["env_s"] == "40.0"


@pytest.mark.parametrize("text, named", [
    ("gpu-hour=abc", "gpu-hour='abc'"), ("gpu-hour=-1", "gpu-hour='-1'"), ("mtok=nan", "mtok='nan'"),
    ("mtok=inf", "mtok='inf'"), ("mtok=1e400", "mtok='1e400'"), ("gpu-hr=1", "'gpu-hr'"),
    ("desktop-hour", "'desktop-hour' is not KEY=PRICE"), ("=1", "'=1' is not KEY=PRICE"),
    ("mtok=1,,gpu-hour=2", "an empty entry"), ("mtok=1,mtok=2", "mtok is given twice"), ("", "an empty entry")])
def test_bad_prices_are_one_line_naming_them(text, named):
    with pytest.raises(InputError, match="^--price: ") as e:
        parse_prices(text)
    assert named in str(e.value) and "\n" not in str(e.value)


def test_a_bad_price_on_the_command_line_exits_2_with_one_line(tmp_path):
    for args in (["stats", str(tmp_path), "--price", "gpu-hour=-0.5"], ["compare", "x", "y", "--price", "cpu=1"]):
        r = run_cua(*args)
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("Error: --price: ") and "Traceback" not in r.stderr


_KEYS = st.lists(st.sampled_from(list(PRICES)), unique=True, min_size=1)
_PRICE = st.floats(min_value=0, max_value=1e300, allow_nan=False, allow_infinity=False)


@given(st.data())
def test_prices_read_back_exactly_whatever_the_spacing(data):
    prices = {k: data.draw(_PRICE) for k in data.draw(_KEYS)}
    space = data.draw(st.sampled_from(["", " ", "  "]))
    text = ",".join(f"{space}{k}{space}={space}{v!r}{space}" for k, v in prices.items())
    assert parse_prices(text) == prices


@given(st.text(alphabet=st.sampled_from(list("gpu-hourdesktopmtk=,.0123456789eE+-_ naif\n")), max_size=40))
def test_any_price_text_is_prices_or_one_input_error(text):
    try:
        prices = parse_prices(text)
    except InputError as e:
        assert str(e).startswith("--price: ") and "\n" not in str(e)
    else:
        assert set(prices) <= set(PRICES) and all(0 <= v < math.inf for v in prices.values())


_DOMAIN = st.sampled_from(["web", "os", "office"])


@given(lines=st.lists(st.tuples(st.sampled_from("abcdef"), st.sampled_from(["success", "failure", "error"]),
                                st.floats(0, 1e4), st.floats(0, 1)), max_size=12),
       busy=st.lists(st.integers(0, 3), min_size=2, max_size=8), prices=st.dictionaries(
           st.sampled_from(list(PRICES)), _PRICE.filter(lambda v: v < 1e6)))
def test_domains_add_up_to_the_run_and_per_success_times_successes_is_the_total(tmp_path_factory, lines, busy,
                                                                                 prices):
    domain_of = {t: ["web", "os", "office"][i % 3] for i, t in enumerate("abcdef")}
    attempts, tried = [], {}
    for task, outcome, duration, model_share in lines:
        tried[task] = tried.get(task, -1) + 1
        attempts.append(_attempt(task, domain_of[task], outcome, duration, tried[task], duration * model_share))
    metrics = [_server("http://s", i, n, 10.0 * i, 1.0 * i) for i, n in enumerate(busy)]
    run = make_run(tmp_path_factory.mktemp("p"), "p", DESKTOPS, list(domain_of.items()), attempts, metrics)
    f = cost_figures(read_run(run), prices)
    domains = f["domains"].values()
    for key in ("pairs", "successes", "failures", "errors", "missing", "attempts", "error_attempts"):
        assert sum(d[key] for d in domains) == f[key]
    for key in ("env_s", "error_env_s", "desktop_memory_gib_s"):
        assert math.fsum(d[key] for d in domains) == pytest.approx(f[key], rel=1e-9, abs=1e-9)
    shared = any(d["model_busy_s"] is not None for d in domains)
    assert shared == (math.fsum(a["phases"]["model_s"] for a in attempts) > 0)
    for key in ("model_busy_s", "tokens") + (("cost",) if prices else ()):
        if shared:
            assert math.fsum(d[key] for d in domains) == pytest.approx(f[key], rel=1e-9, abs=1e-9)
    for scope in (f, *domains):
        n = scope["successes"]
        for key in ("env_s", "model_busy_s", "tokens", "cost"):
            per = scope[f"{key}_per_success"]
            assert per is None if not n or scope[key] is None else per * n == pytest.approx(scope[key], abs=1e-9)
    assert (f["cost"] is None) == (not prices)


def test_compare_shows_both_runs_and_the_difference(tmp_path, desktop_run):
    # B: the same tasks, every attempt twice as long, and c fails: one success.
    slower = [{**a, "duration_s": 2 * a["duration_s"]} for a in ATTEMPTS[:-1]]
    slower.append(_attempt("c", "gimp", "failure", 80.0, model_s=10.0))
    b = make_run(tmp_path, "slow", DESKTOPS, SCHEDULED, slower, METRICS)
    r = run_cua("compare", str(desktop_run), str(b), "--cost", "--format", "json")
    out = json.loads(r.stdout)
    assert out["run_b"]["env_s"] == 210.0 and out["delta"]["env_s"] == 105.0
    assert out["delta"]["successes"] == -1 and out["delta"]["env_s_per_success"] == 210.0 - 52.5
    assert out["run_b"]["domains"]["gimp"]["env_s_per_success"] is None
    r = run_cua("compare", str(desktop_run), str(b), "--price", "desktop-hour=0.36")
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if "│ env s per success " in line)
    assert [c.strip() for c in row.split("│")[2:5]] == ["52.5", "210.0", "+157.5"]
    money = next(line for line in r.stdout.splitlines() if "│ cost of envs " in line)
    assert [c.strip() for c in money.split("│")[2:5]] == ["0.0105", "0.021", "+0.0105"]
    gimp = next(line for line in r.stdout.splitlines() if "│ gimp " in line)
    assert "40.0" in gimp and "n/a" in gimp


def test_delta_leaves_out_what_either_run_lacks():
    assert delta({"env_s": 1.0, "tokens": None, "run": "a"}, {"env_s": 3.5, "tokens": 5.0, "run": "b"}) == {
        "env_s": 2.5}


@pytest.mark.parametrize("config, why", [
    ({}, "run.json records no env config"),
    ({"env": {"kind": "cluster", "url": "local"}}, "env.kind cluster: no desktops"),
    ({"env": {"kind": "osworld", "url": "http://10.0.0.5:8080"}}, "not cua's own"),
    ({"env": {"kind": "osworld", "url": "local", "osworld": {"desktops": ["http://10.0.0.5:5000"]}}}, "not cua's own"),
    ({"env": {"kind": "osworld", "url": "local", "osworld": {"limits": {"memory_gib": 2, "enforce": False}}}},
     "without limits"),
    ({"env": {"kind": "osworld", "url": "local", "osworld": {"limits": {"memory_gib": "2", "enforce": True}}}},
     "no env.osworld.limits.memory_gib")])
def test_desktop_memory_is_n_a_with_the_reason_unless_cua_capped_the_desktops(config, why):
    cap, reason = memory_cap(config)
    assert cap is None and why in reason


def test_hostile_folders_never_break_the_figures(tmp_path):
    run = make_run(tmp_path, "bad", {}, [("a", "web"), ("b", None)], [])
    (run / "run.json").write_text("[1, 2")
    (run / "episodes.jsonl").write_text(
        '{"task_id": "a", "sample": 0, "attempt": 0, "outcome": "success", "score": 1, "duration_s": "x"}\n'
        '{"task_id": "a", "sample": 0, "attempt": 1, "outcome": "success", "score": 1, "duration_s": 4, '
        '"phases": [1]}\n[]\nnot json\n{"task_id": "b", "sample": 0, "attempt": 0, "outcome": "error", '
        '"duration_s": 1e308}\n')
    (run / "metrics.jsonl").write_text('{"t": 1, "server": "s", "up": true, "running": "x"}\n{"t": "a"}\n\xff\n'
                                       '{"t": 2, "server": "s", "up": true, "running": 1, "prompt_tokens": -5}\n')
    r = run_cua("stats", str(run), "--price", "gpu-hour=1,mtok=1", "--format", "json")
    assert r.returncode == 0 and "Traceback" not in r.stderr and "episodes.jsonl:3" in r.stderr
    (f,) = json.loads(r.stdout)["runs"]
    assert (f["successes"], f["errors"], f["attempts"], f["untimed_attempts"], f["env_s"]) == (1, 1, 3, 2, 4.0)
    assert f["model_busy_s"] is None and f["cost"] is None and f["tokens"] is None
    assert set(f["unknown"]) == {"model_busy_s", "tokens", "desktop_memory_gib_s"}
    (run / "metrics.jsonl").write_text("".join(json.dumps(_server("s", t, 1, 1.7e308 * (t % 2), 0.0)) + "\n"
                                               for t in range(4)))  # counters that rise past a float
    r = run_cua("stats", str(run), "--cost", "--format", "json")
    (f,) = json.loads(r.stdout)["runs"]
    assert f["model_busy_s"] is None and f["tokens"] is None and "damaged" in f["unknown"]["tokens"]
    (run / "metrics.jsonl").unlink()
    (run / "metrics.jsonl").mkdir()  # a folder where the file is due
    r = run_cua("stats", str(run), "--cost")
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert "model busy s, tokens n/a: no model server was sampled" in r.stdout
    assert "2 of 3 attempts record no duration" in r.stdout


def test_money_beyond_a_float_is_n_a_with_the_reason(tmp_path):
    run = make_run(tmp_path, "long", DESKTOPS, [("a", "web")], [_attempt("a", "web", "success", 1e9)])
    f = cost_figures(read_run(run), {"desktop-hour": 1e308})
    assert f["env_s"] == 1e9 and f["cost_env"] is None and f["cost"] is None and f["cost_per_success"] is None
    assert "check --price" in f["unknown"]["cost"]


_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-10, 10 ** 12), st.floats(allow_nan=True),
                  st.text(max_size=5), st.lists(st.integers(), max_size=2))


@given(lines=st.lists(st.dictionaries(st.sampled_from(["task_id", "sample", "attempt", "outcome", "score", "domain",
                                                       "duration_s", "phases"]), _VALUE), max_size=6),
       metrics=st.lists(st.dictionaries(st.sampled_from(["t", "server", "up", "running", "prompt_tokens",
                                                         "generation_tokens"]), _VALUE), max_size=6),
       config=st.dictionaries(st.sampled_from(["env", "runner"]), st.one_of(_VALUE, st.just(DESKTOPS["env"]))))
def test_hostile_lines_give_numbers_or_none_never_an_exception(tmp_path_factory, lines, metrics, config):
    run = make_run(tmp_path_factory.mktemp("h"), "h", config, [("a", None)], lines, metrics)
    f = cost_figures(read_run(run), PRICED)
    for scope in (f, *f["domains"].values()):
        for v in scope.values():
            assert v is None or isinstance(v, (str, dict)) or (math.isfinite(v) and v >= 0)


def test_cost_reads_cua_runs_and_refuses_what_it_does_not_go_with(tmp_path, desktop_run):
    osworld = tmp_path / "osworld" / "chrome" / "t1"
    osworld.mkdir(parents=True)
    (osworld / "result.txt").write_text("1.0")
    run, report = str(desktop_run), str(osworld / "result.txt")
    for args, said in [(["stats", str(tmp_path / "osworld"), "--cost"], "records no timings: --cost reads cua runs"),
                       (["stats", run, "--cost", "--timing"], "two views"),
                       (["stats", run, "--cost", "--by", "task"], "--by task does not go with --cost"),
                       (["stats", run, "--price", "mtok=1", "--exclude-broken", report],
                        "--exclude-broken does not go with --cost"),
                       (["compare", run, run, "--cost", "--out", str(tmp_path / "o.json")],
                        "--out does not go with --cost")]:
        r = run_cua(*args)
        assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
