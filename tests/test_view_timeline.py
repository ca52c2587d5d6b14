"""The timeline page of `cua view` without a browser: a run of 10,000 episodes keeps to the page's size
bound and its bands add up, a mid-sized run is drawn attempt by attempt, an old run says why it has no
lanes, and hostile lines never break the page. test_view.py renders it from a real rollout in Chromium."""

import base64
import io
import json
import random
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from cua_cli.runfolder.reader import RunReader
from cua_cli.stats.timing import read_metrics
from cua_cli.view import curves, lanes
from cua_cli.view.timeline import timeline_page
from cua_cli.view.timespan import BINS, is_time

T0 = 1_790_000_000.0
MAX_PAGE = 1_500_000  # bytes: the page of any run, however many episodes and lanes


def lane_name(i: int) -> str:
    return f"node{i // 64}/{4000 + i // 16}/{i % 16}"


def make_run(run, episodes: int, lanes_n: int, servers: int = 2, sample_s: float = 0.5, steps=(1, 15), seed=0):
    """A run folder as a rollout of `episodes` attempts over `lanes_n` slots leaves it (no trajectories),
    with `servers` model servers sampled every `sample_s` s; the episode lines."""
    rng = random.Random(seed)
    run.mkdir(parents=True)
    clocks = [T0 + rng.uniform(0, 5) for _ in range(lanes_n)]
    lines = []
    for i in range(episodes):
        slot = min(range(lanes_n), key=clocks.__getitem__)  # the slot that frees first claims the next pair
        wait = rng.uniform(0, 0.5)
        n = rng.randint(*steps)
        ph = {"allocate_s": rng.uniform(1, 10), "setup_s": rng.uniform(0, 4), "observe_s": 0.3 * n,
              "model_s": rng.uniform(0.5, 3) * n, "act_s": 0.4 * n, "evaluate_s": rng.uniform(0.1, 2),
              "release_s": 0.2, "other_s": 0.05 * n}
        duration = sum(ph.values())
        win = rng.random() < 0.4
        lines.append({"task_id": f"task-{i:05d}", "domain": f"d{i % 12}", "sample": 0, "attempt": 0,
                      "outcome": "success" if win else "failure", "score": float(win), "reward": float(win),
                      "steps": n, "stop_reason": "finished", "duration_s": duration, "error": None, "traj": None,
                      "started_at": clocks[slot] + wait, "phases": ph, "lane": lane_name(slot),
                      "claim_wait_s": wait})
        clocks[slot] += wait + duration
    (run / "scheduled.jsonl").write_text("".join(
        json.dumps({"task_id": r["task_id"], "domain": r["domain"], "sample": 0}) + "\n" for r in lines))
    (run / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    end = max(clocks)
    with open(run / "metrics.jsonl", "w") as f:
        for k in range(int((end - T0) / sample_s)):
            for s in range(servers):
                f.write(json.dumps({"t": T0 + k * sample_s, "server": f"http://10.0.0.{s}:8000", "up": True,
                                    "running": rng.randint(0, 16), "waiting": rng.randint(0, 40),
                                    "kv_usage": rng.random()}) + "\n")
    return lines


def page(run) -> str:
    reader = RunReader(run, keep_attempts=True).refresh()
    return timeline_page(reader, read_metrics(run)[0])


def svgs(html_text: str) -> list:
    """Every SVG of the page, parsed as XML: a crafted text that broke the markup fails here."""
    found = re.findall(r"<svg\b.*?</svg>", html_text, flags=re.S)
    return [ET.fromstring(s.encode("utf-8", "backslashreplace")) for s in found]


def titles(html_text: str, cls: str) -> list[str]:
    return [t.findtext("{http://www.w3.org/2000/svg}title") or t.findtext("title")
            for svg in svgs(html_text) for t in svg.iter() if cls in (t.get("class") or "").split()]


@pytest.mark.slow  # 10,000 episodes drawn twice
@pytest.mark.parametrize("lanes_n", [64, 1000])
def test_a_run_of_10000_episodes_is_drawn_in_bands_within_the_size_bound(tmp_path, lanes_n):
    lines = make_run(tmp_path / "run", 10_000, lanes_n)
    text = page(tmp_path / "run")
    assert len(text.encode()) < MAX_PAGE
    assert 'data-mode="bands"' in text and "too many attempts" in text.lower()
    rows = titles(text, "band")
    assert len(rows) == min(lanes_n, lanes.MAX_ROWS)
    assert len(titles(text, "server")) == 2
    # A row's busy share is the share of its slots' time its attempts took.
    t0 = min(r["started_at"] - r["claim_wait_s"] for r in lines)
    span = max(r["started_at"] + r["duration_s"] for r in lines) - t0
    size = -(-lanes_n // lanes.MAX_ROWS)
    first = {lane_name(i) for i in range(size)}
    busy = sum(r["duration_s"] for r in lines if r["lane"] in first) / (span * size)
    shown = float(re.search(r"busy ([\d.]+)%", rows[0]).group(1)) / 100
    assert shown == pytest.approx(busy, abs=0.001)
    model = sum(r["phases"]["model_s"] for r in lines if r["lane"] in first) / (span * size)
    assert float(re.search(r"model ([\d.]+)%", rows[0]).group(1)) / 100 == pytest.approx(model, abs=0.001)
    # The bands' image: one column per slice, the first row's band as much model colour as its share.
    (url,) = re.findall(r'<image class="bands" href="data:image/png;base64,([^"]+)"', text)
    img = Image.open(io.BytesIO(base64.b64decode(url))).convert("RGB")
    assert img.size == (BINS, len(rows) * lanes.ROW_H)
    band = np.asarray(img)[1:1 + lanes.BAND_H]
    blue = np.all(band == [int(lanes.COLOURS["model"][i:i + 2], 16) for i in (1, 3, 5)], axis=2).mean()
    assert blue == pytest.approx(model, abs=0.03)  # each column rounds its stack to pixels


@pytest.mark.slow  # a run too large to draw step by step
def test_a_run_too_long_for_its_steps_is_drawn_attempt_by_attempt_from_phase_totals(tmp_path):
    lines = make_run(tmp_path / "run", lanes.MAX_BARS, 8, servers=curves.MAX_PANELS + 1, steps=(10, 15))
    text = page(tmp_path / "run")
    assert len(text.encode()) < MAX_PAGE  # the most attempts drawn one by one, the most servers
    assert len(titles(text, "server")) == curves.MAX_PANELS and "1 more model server is not drawn" in text
    assert 'data-mode="bars"' in text and "summed over its steps" in text
    drawn = titles(text, "attempt")
    assert sorted(t.splitlines()[0] for t in drawn) == sorted(f"{r['task_id']} · sample 0 · attempt 0" for r in lines)
    assert len(titles(text, "lane")) == 8


def test_an_old_run_without_phases_says_so_and_draws_what_it_can(tmp_path):
    run = tmp_path / "run"
    lines = make_run(run, 6, 2)
    old = [{k: v for k, v in r.items() if k not in ("started_at", "phases", "lane", "claim_wait_s")} for r in lines]
    (run / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    (run / "metrics.jsonl").unlink()
    text = page(run)
    assert "written before cua timed each attempt" in text and "No model server samples" in text
    assert "tl-plot" not in text
    # Newer lines among them are drawn; the old ones counted as not drawn.
    (run / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old[:2] + lines[2:]))
    text = page(run)
    assert "2 of 6 attempts have no start time" in text and len(titles(text, "attempt")) == 4
    # A line with a start and a duration but no phases is drawn as untimed.
    (run / "episodes.jsonl").write_text("".join(json.dumps({**r, "phases": None}) + "\n" for r in lines))
    assert "6 attempts have a start and a duration but no phases" in page(run)


def test_lanes_in_natural_order_and_crafted_ones_shown_as_text(tmp_path):
    run = tmp_path / "run"
    lines = make_run(run, 5, 5)
    names = ["h/1/10", "h/1/9", '<b title="x">&amp;\x01', "9" * 5000, "h/01/2"]
    (run / "episodes.jsonl").write_text("".join(json.dumps({**r, "lane": n}) + "\n" for r, n in zip(lines, names)))
    by_class = {svg.get("class"): svg for svg in svgs(page(run))}
    svg_labels, plot = by_class["tl-labels"], by_class["tl-plot"]
    shown = [g.get("data-lane") for g in plot.iter("g") if g.get("class") == "lane"]
    assert shown == ["9" * 297 + "...", '<b title="x">&amp;\ufffd', "h/01/2", "h/1/9", "h/1/10"]
    assert [t.text for t in svg_labels.iter("text")][1] == '<b title="x">&amp;\ufffd'


_value = st.one_of(st.none(), st.booleans(), st.integers(-10, 2 ** 70), st.floats(allow_nan=True),
                   st.sampled_from([T0, T0 + 1.5, 0, 1e11, 1e12]), st.text(max_size=6),
                   st.lists(st.integers(), max_size=2))
_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]) | st.sampled_from(
    ["<", "&", '"', "\x01", "\ud800", "/", "]", ">", "\n"]), max_size=12)


def _mostly(good):
    """A field usually of its type (two times in three), sometimes anything."""
    return st.one_of(good, good, _value.map(lambda v: v))  # mapped: one branch, not _value's seven


_phases = _mostly(st.fixed_dictionaries({p: st.floats(0, 100) for p in lanes.PHASES}))
_line = st.fixed_dictionaries(
    {"task_id": _text, "sample": st.integers(0, 2), "attempt": st.integers(0, 2),
     "outcome": st.sampled_from(["success", "failure", "error"]), "score": st.sampled_from([0.0, 1.0, None]),
     "started_at": _mostly(st.floats(T0, T0 + 100)), "duration_s": _mostly(st.floats(0, 50)), "phases": _phases,
     "lane": _mostly(_text), "traj": st.sampled_from(["t", "t", "t", "../t", "/etc", "t/traj.jsonl", 5, None])},
    optional={"claim_wait_s": _mostly(st.floats(0, 5)), "steps": _value, "error": st.one_of(_text, _value),
              "stop_reason": _value})
_server = st.fixed_dictionaries(
    {"t": _mostly(st.floats(T0, T0 + 100)), "server": _mostly(st.sampled_from(["http://a", "b"]) | _text),
     "up": _mostly(st.booleans())},
    optional={"running": _mostly(st.integers(0, 9)), "waiting": _mostly(st.integers(0, 9)),
              "kv_usage": _mostly(st.floats(0, 1))})
_metric = st.one_of(_server, _server,
    st.fixed_dictionaries({"t": st.floats(T0, T0 + 100), "gpu": _value}, optional={"util": _value}),
    st.text(max_size=10))
_step = st.fixed_dictionaries({"step": st.integers(0, 3), "time": _mostly(st.floats(T0, T0 + 100)), "timings": _mostly(
    st.fixed_dictionaries({k: st.floats(0, 10) for k in ("env_s", "model_s", "act_s")}))})


def _dumps(v) -> str:
    return v if isinstance(v, str) else json.dumps(v)


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.one_of(_line, st.text(max_size=10)), max_size=8), metrics=st.lists(_metric, max_size=12),
       steps=st.lists(st.one_of(_step, st.text(max_size=5)), max_size=4))
def test_hostile_lines_never_break_the_page(tmp_path_factory, lines, metrics, steps):
    run = tmp_path_factory.mktemp("h")
    (run / "t").mkdir()
    (run / "t" / "traj.jsonl").write_text("".join(_dumps(s) + "\n" for s in steps))
    (run / "scheduled.jsonl").write_text("")
    (run / "episodes.jsonl").write_text("".join(_dumps(r) + "\n" for r in lines), errors="surrogatepass")
    (run / "metrics.jsonl").write_text("".join(_dumps(m) + "\n" for m in metrics), errors="surrogatepass")
    reader = RunReader(run, keep_attempts=True).refresh()
    text = timeline_page(reader, read_metrics(run)[0])
    svgs(text)
    timed = [r for r in reader.attempts if is_time(r.get("started_at")) and r.get("duration_s") is not None]
    assert text.count('<g class="attempt ') == len(timed)  # each attempt with a start and a duration: drawn
