"""The JSONL reader and writer on hostile files: what a line yields depends on
that line alone, torn writes never swallow the next record, and any text
(lone surrogates too) is written as UTF-8 that reads back the same."""

import json
import re
import tempfile
from pathlib import Path

from hypothesis import assume, example, given
from hypothesis import strategies as st

from cua_cli.runfolder import jsonl
from cua_cli.runfolder.jsonl import append_line, read_from, read_lines

SCALARS = (st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)
RECORDS = st.dictionaries(st.text(max_size=6), VALUES, max_size=4)


def dumps(rec, compact: bool) -> str:
    return json.dumps(rec, ensure_ascii=False, separators=(",", ":") if compact else None)


@st.composite
def lines(draw):
    """One line of a file (no newline) and the records a reader must get from it."""
    kind = draw(st.sampled_from(["record", "record", "record", "garbage", "bytes", "two", "torn", "blank", "deep"]))
    compact = draw(st.booleans())
    if kind == "record":
        rec = draw(RECORDS)
        return dumps(rec, compact).encode(), [rec]
    if kind == "garbage":  # anything that does not start like a record: never a record
        text = draw(st.sampled_from(["[1, 2]", '"text"', "12", "null", "true", '{"a":', '{"a": 1', "}", ""])
                    | st.text(st.characters(exclude_categories=["Cs"], exclude_characters="{\n\r\t "), min_size=1))
        return text.encode(), []
    if kind == "bytes":  # not UTF-8
        return b"\xff" + draw(st.binary(max_size=20)).replace(b"\n", b""), []
    if kind == "two":  # two objects on one line: neither is a line of its own
        sep = draw(st.sampled_from(["", ",", " ", ", "]))
        return (dumps(draw(RECORDS), compact) + sep + dumps(draw(RECORDS), compact)).encode(), []
    if kind == "torn":  # a writer died mid-line, the next one appended its record after the torn bytes
        torn = dumps(draw(RECORDS), compact)
        torn = torn[:draw(st.integers(1, len(torn) - 1))]
        rec = draw(RECORDS)
        return (torn + dumps(rec, compact)).encode(), [rec]
    if kind == "blank":
        return draw(st.sampled_from([b"", b" ", b"\t", b"\r"])), []
    return draw(st.sampled_from([b"[" * 5000, b'{"a":' * 5000, b'{"a":[' * 3000 + b"1"])), []


@st.composite
def files(draw):
    """File bytes, the expected (line number, record) pairs, and whether it ends in a torn last line."""
    body = draw(st.lists(lines(), max_size=12))
    data = b"".join(raw + b"\n" for raw, _ in body)
    tail = draw(st.sampled_from([b"", b'{"task_id": "t", "sam', b'{"a": 1}']))
    expected = [(n, rec) for n, (_, recs) in enumerate(body, 1) for rec in recs]
    return data + tail, expected


def write(data: bytes) -> Path:
    d = tempfile.mkdtemp()
    path = Path(d) / "f.jsonl"
    path.write_bytes(data)
    return path


@given(files())
def test_each_line_yields_its_own_records_whatever_the_others_hold(file):
    data, expected = file
    path = write(data)
    assert read_lines(path, warn=False) == [rec for _, rec in expected]
    records, _, end, _ = jsonl.scan(path)
    assert list(records.items()) == expected
    assert end == data.rfind(b"\n") + 1  # a torn last line is left for the next read



@given(files(), st.integers(1, 64))
def test_a_file_read_a_piece_at_a_time_gives_what_one_read_gives(file, piece):
    data, expected = file
    path = write(data)
    whole = jsonl.scan(path)
    old, jsonl.READ_PIECE = jsonl.READ_PIECE, piece  # pieces that cut lines, UTF-8 characters, anything
    try:
        assert jsonl.scan(path) == whole
    finally:
        jsonl.READ_PIECE = old
    assert list(whole[0].items()) == expected

@given(files(), st.lists(st.integers(0, 10 ** 6), max_size=6))
def test_reading_a_growing_file_in_steps_gives_the_records_of_one_read(file, cuts):
    data, expected = file
    path = write(b"")
    rows, offset, written = [], 0, 0
    for cut in sorted(c % (len(data) + 1) for c in cuts) + [len(data)]:
        with open(path, "ab") as f:
            f.write(data[written:cut])
        written = cut
        new, offset = read_from(path, offset, warn=False)
        rows += new
    assert rows == [rec for _, rec in expected]


def test_warnings_name_file_and_line(tmp_path, capsys):
    path = tmp_path / "e.jsonl"
    path.write_bytes(b'{"a": 1}\nnot json\n{"a": 1}{"b": 2}\n[1]\n\xff\xfe\n'
                     + b"[" * 100000 + b'\n{"torn{"c": 3}\n{"x')
    assert read_lines(path) == [{"a": 1}, {"c": 3}]
    err = capsys.readouterr().err
    for n in (2, 3, 4, 5, 6, 7, 8):
        assert f"{path}:{n}: " in err
    assert "not JSON" in err and "not valid UTF-8" in err and "nested too deeply" in err and "torn last line" in err
    # Read from the middle of the file, the warnings still name the right line.
    second = path.read_bytes().index(b"not json")
    read_from(path, second)
    assert f"{path}:2: " in capsys.readouterr().err


def test_append_after_a_torn_last_line_starts_a_new_line(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_bytes(b'{"task_id": "t1", "sam')  # a writer died here
    append_line(path, {"task_id": "t2"})
    append_line(path, {"task_id": "t3"})
    assert path.read_bytes() == b'{"task_id": "t1", "sam\n{"task_id":"t2"}\n{"task_id":"t3"}\n'
    assert read_lines(path, warn=False) == [{"task_id": "t2"}, {"task_id": "t3"}]
    path.write_bytes(b'{"task_id": "t1"}')  # died right before its newline: both records survive
    append_line(path, {"task_id": "t2"})
    assert read_lines(path, warn=False) == [{"task_id": "t1"}, {"task_id": "t2"}]


# st.text() drops most lone surrogates; a list of characters keeps them.
ANY_TEXT = st.lists(st.characters() | st.characters(categories=["Cs"]), max_size=20).map("".join)
# A high surrogate right before a low one is how JSON spells one astral
# character (any JSON reader joins "\ud83d\ude00" into one): not writable apart.
PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


@given(st.dictionaries(ANY_TEXT, ANY_TEXT | st.lists(ANY_TEXT, max_size=3), max_size=4))
def test_any_text_is_written_as_utf8_json_that_reads_back_the_same(rec):
    assume(not any(PAIR.search(s) for k, v in rec.items() for s in [k, *(v if isinstance(v, list) else [v])]))
    path = write(b"")
    append_line(path, rec)
    data = path.read_bytes()
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert json.loads(data.decode("utf-8")) == rec  # strict UTF-8
    assert read_lines(path, warn=False) == [rec]


def test_lone_surrogates_in_a_record(tmp_path):
    path = tmp_path / "e.jsonl"
    rec = {"task_id": "bad\udcff-\ud800", "\udc80": ["x\\\udc81"]}
    append_line(path, rec)
    path.read_bytes().decode("utf-8")
    assert read_lines(path) == [rec]


# -- every reader of a run folder, on hostile lines ---------------------------------

ODD = st.sampled_from([2 ** 64, -1, 10 ** 400, 1e308, -0.0, "\0", "\ud800", "../x", "/etc/passwd", "", "s.png"])
HOSTILE = st.recursive(SCALARS | ODD | st.floats(), lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.sampled_from(["env_s", "x", "y", "type", "response", "guided"]) | st.text(
                           max_size=3), inner, max_size=3), max_leaves=6)
STEP_KEYS = ["step", "screenshot", "response", "thought", "action", "width", "height", "timings", "prompt",
             "prompt_token_ids", "response_token_ids", "response_logprobs", "failed_tries", "sampling",
             "policy_version", "model_version", "error", "observation", "finish_reason", "token_ids", "logprobs"]
EPISODE_KEYS = ["task_id", "domain", "sample", "attempt", "outcome", "reward", "score", "steps", "stop_reason",
                "duration_s", "error", "traj", "instruction", "evaluator_func"]
PROMPTS = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "system", 3]), "content": st.one_of(
    st.text(max_size=4), st.lists(st.sampled_from([{"type": "text", "text": "x"}, {"type": "image_file", "file": "s.png"},
                                                   {"type": "image_file", "file": "../s.png"},
                                                   {"type": "image_file", "file": 5}, {"type": "video"}, 7]),
                                  max_size=3))}), max_size=2)


def hostile_line(keys, base: dict):
    """A line that is mostly a record of its kind, with some fields replaced by hostile values."""
    fields = st.dictionaries(st.sampled_from(keys), HOSTILE | PROMPTS, max_size=4)
    return st.one_of(fields.map(lambda f: json.dumps({**base, **f}).encode()), lines().map(lambda x: x[0]),
                     st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")),
                     st.just(b'{"a": ' * 5000), st.just(b"1" * 5000), st.just(b'{"step": 0, "resp'))


GOOD_STEP = {"step": 0, "screenshot": "s.png", "response": "Action: wait()", "width": 4, "height": 4,
             "action": [{"type": "click", "x": 1, "y": 1}], "timings": {"env_s": 1.0}, "prompt_token_ids": [1],
             "response_token_ids": [2], "response_logprobs": [-1.0],
             "prompt": [{"role": "user", "content": [{"type": "image_file", "file": "s.png"}]}]}
GOOD_EPISODE = {"task_id": "t", "domain": "d", "sample": 0, "attempt": 0, "outcome": "success", "score": 1.0,
                "reward": 1.0, "steps": 1, "traj": "trajectories/t/0_0"}


@given(episode_lines=st.lists(hostile_line(EPISODE_KEYS, GOOD_EPISODE), min_size=1, max_size=4),
       step_lines=st.lists(hostile_line(STEP_KEYS, GOOD_STEP), max_size=4), torn=st.booleans())
@example(episode_lines=[json.dumps(GOOD_EPISODE).encode()],  # a huge integer has no float to print
         step_lines=[json.dumps({**GOOD_STEP, "timings": {"env_s": 10 ** 400}}).encode()], torn=False)
@example(episode_lines=[json.dumps(GOOD_EPISODE).encode()],  # fields that are lists or objects, as something else
         step_lines=[json.dumps({**GOOD_STEP, "failed_tries": 3}).encode(),
                     json.dumps({**GOOD_STEP, "step": 1, "failed_tries": True}).encode(),
                     json.dumps({**GOOD_STEP, "step": 2, "prompt": {"role": "user"}}).encode()], torn=False)
def test_every_reader_warns_about_hostile_lines_and_never_raises(episode_lines, step_lines, torn):
    """Stats, export (each format), view, check-logprobs' reading, the replay provider and
    the sinks' trajectory reader read any lines: a bad line is a warning, never an exception."""
    from cua_cli.export import ExportOptions, export_runs
    from cua_cli.logprobs_check import _recorded_calls
    from cua_cli.models.replay import Replay
    from cua_cli.runfolder.reader import RunReader, read_steps
    from cua_cli.stats.figures import run_figures
    from cua_cli.stats.readers import read_run
    from cua_cli.view.report import RunReport

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        folder = run / "trajectories" / "t" / "0_0"
        folder.mkdir(parents=True)
        (folder / "s.png").write_bytes(b"\x89PNG\r\n\x1a\n")
        (run / "run.json").write_text('{"run_id": "r"}')
        (run / "scheduled.jsonl").write_bytes(b"\n".join(episode_lines) + b"\n")
        end = b"" if torn else b"\n"
        (run / "episodes.jsonl").write_bytes(b"\n".join(episode_lines) + end)
        (folder / "traj.jsonl").write_bytes(b"\n".join(step_lines) + end)
        assert isinstance(run_figures(read_run(run)), dict)
        for fmt in ("jsonl", "sft"):
            summary = export_runs([run], Path(tmp) / f"out.{fmt}", fmt, ExportOptions(failed_tries=True))
            assert summary["runs"] == 1 and Path(summary["out"]).is_file(), summary
        page = RunReport(run, Path(tmp) / "view").build()
        assert Path(page).name == "index.html" and Path(page).is_file()
        assert all(call.trajectory == "t/0_0" for call in _recorded_calls(run))
        replay = Replay(run)
        final = RunReader(run).refresh().final
        for pair in final:
            assert isinstance(pair, tuple) and isinstance(final[pair], dict)
            replay.session(*pair)
        records, warnings, path = read_steps(str(folder))
        assert path == str(folder / "traj.jsonl") and all(isinstance(rec, dict) for _, rec in records)
        for _, rec in records:  # a step read has the types of the run folder's contract, or is skipped
            assert all(not isinstance(rec.get(k), (bool, int, float, str)) for k in ("failed_tries", "prompt",
                                                                                      "action", "timings"))
        # a line skipped is not read; a line read with a warning has its malformed fields left out
        read = {n for n, _ in records}
        assert all(n not in read for n, text in warnings if text.startswith("skipped"))
        assert all("malformed" in text for n, text in warnings if n in read)
