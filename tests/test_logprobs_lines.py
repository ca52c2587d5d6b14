"""`cua check-logprobs` reading a run: a malformed model call is named with its file and line, and the
others are compared (issue 33, part 5). No model is loaded here: which calls are compared is decided
before one is (tests/test_logprobs_check.py runs the command on the tiny model)."""

import contextlib
import io
import json
import math
import tempfile
from pathlib import Path

import pytest
from helpers.hostile import HOSTILE, line_with
from hypothesis import given
from hypothesis import strategies as st

from cua_cli.errors import CuaError
from cua_cli.logprobs_check import TOKEN_FIELDS, _recorded_calls, check_run, malformed

CALL = {"prompt_token_ids": [1, 2, 3], "response_token_ids": [4, 5], "response_logprobs": [-0.1, -0.2]}


def valid(record: dict) -> bool:
    """What a call must hold to be compared, said apart from the code under test."""
    ids = [record.get(k) for k in TOKEN_FIELDS[:2]]
    logprobs = record.get("response_logprobs")
    return (all(type(x) is list and x and all(type(t) is int and t >= 0 for t in x) for x in ids)
            and type(logprobs) is list and len(logprobs) == len(ids[1])
            and all(type(v) in (int, float) and abs(v) < math.inf for v in logprobs))


@given(values=st.dictionaries(st.sampled_from(TOKEN_FIELDS), HOSTILE, max_size=3))
def test_a_call_is_malformed_exactly_when_its_token_fields_are_unusable(values):
    try:
        record = json.loads(line_with(CALL, values))
    except RecursionError:  # nested beyond what a run folder's reader parses: that line is skipped
        return
    problem = malformed(record)
    assert (problem is None) == valid(record), (record, problem)


def _run(root: Path, steps: list[str]) -> Path:
    run = root / "run"
    traj = run / "trajectories" / "t" / "0_0"
    traj.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"format_version": 2, "run_id": "run"}))
    (run / "scheduled.jsonl").write_text(json.dumps({"task_id": "t", "domain": "d", "sample": 0}) + "\n")
    (run / "episodes.jsonl").write_text(json.dumps({
        "task_id": "t", "domain": "d", "sample": 0, "attempt": 0, "outcome": "success", "reward": 1.0, "score": 1.0,
        "steps": len(steps), "stop_reason": "finished", "duration_s": 1.0, "error": None,
        "traj": "trajectories/t/0_0"}) + "\n")
    (traj / "traj.jsonl").write_text("".join(s + "\n" for s in steps))
    return run


def _step(n: int, **fields) -> dict:
    return {"step": n, "screenshot": None, "response": "Action: wait()", "prompt": [{"role": "user", "content": "go"}],
            "sampling": {"guided": False}, **CALL, "failed_tries": [{"response": "no", **CALL}], **fields}


STEP_FIELDS = ("failed_tries", "prompt", "sampling", "image_processor", *TOKEN_FIELDS)


@given(values=st.dictionaries(st.sampled_from(STEP_FIELDS), HOSTILE, min_size=1, max_size=3),
       in_try=st.booleans())
def test_a_malformed_line_is_named_and_the_others_are_compared(values, in_try):
    """Step 1 is hostile (its fields, or its failed try's); steps 0 and 2 are whole: their calls are all
    there, as two tries each. What of step 1 is not compared is named with traj.jsonl's line 2."""
    good = [json.dumps(_step(0)), json.dumps(_step(2))]
    step = _step(1)
    bad = (line_with(step, {"failed_tries": f"[{line_with(step['failed_tries'][0], values)}]"}) if in_try
           else line_with(step, values))
    err = io.StringIO()
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stderr(err):
        run = _run(Path(tmp), [good[0], bad, good[1]])
        calls = _recorded_calls(run)
    text = err.getvalue()
    assert [(c.step, c.try_, c.malformed) for c in calls if c.step != 1] == [
        (0, 0, None), (0, 1, None), (2, 0, None), (2, 1, None)], text
    for c in calls:
        assert (c.malformed is None) == valid(c.record)
        if c.malformed:
            assert f"traj.jsonl:2: step 1 try {c.try_}: malformed: {c.malformed}; not compared" in text
    try:
        tries = json.loads(bad).get("failed_tries")
    except RecursionError:  # nested too deeply to read: the line is skipped, and named
        assert "traj.jsonl:2: skipped a line nested too deeply" in text
        return
    if type(tries) is list:
        for i, t in enumerate(tries):
            if type(t) is not dict:
                assert f"traj.jsonl:2: step 1 try {i}: malformed: failed_tries[{i}] is not an object" in text
    elif tries is not None:
        assert "traj.jsonl:2: step 1: read without what is malformed: failed_tries is " in text


def test_failed_tries_that_are_no_list_of_objects(tmp_path):
    """failed_tries a number, true, an object: the line is named and the step's own answer is compared;
    an entry that is no object is named and the others keep their place (try numbers as export's)."""
    steps = [json.dumps(_step(0, failed_tries=3)), json.dumps(_step(1, failed_tries=True)),
             json.dumps(_step(2, failed_tries={"response": "x"}, prompt={"role": "user"})),
             json.dumps(_step(3, failed_tries=[7, {"response": "no", **CALL, "response_token_ids": [True]}, {**CALL}])),
             json.dumps(_step(4, response_logprobs=[-0.1]))]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        calls = _recorded_calls(_run(tmp_path, steps))
    assert [(c.step, c.try_, c.malformed) for c in calls] == [
        (0, 0, None), (1, 0, None), (2, 0, None),
        (3, 1, "response_token_ids is not a non-empty list of integers >= 0"), (3, 2, None), (3, 3, None),
        (4, 0, None), (4, 1, "2 response tokens but 1 logprobs")]
    text = err.getvalue()
    for line, problem in ((1, "failed_tries is a number, not a list"), (2, "failed_tries is a boolean, not a list"),
                          (3, "failed_tries is an object, not a list"), (3, "prompt is an object, not a list"),
                          (4, "step 3 try 0: malformed: failed_tries[0] is not an object; not compared"),
                          (4, "step 3 try 1: malformed: response_token_ids is not"),
                          (5, "step 4 try 1: malformed: 2 response tokens but 1 logprobs; not compared")):
        assert f"traj.jsonl:{line}: " in text and problem in text, (line, problem, text)


def test_a_run_whose_every_call_is_malformed_is_refused_before_a_model_loads(tmp_path):
    run = _run(tmp_path, [json.dumps(_step(0, failed_tries=None, prompt_token_ids=[]))])
    with contextlib.redirect_stderr(io.StringIO()) as err, pytest.raises(CuaError, match="each is malformed"):
        check_run(run, tmp_path / "no-model-here", 1e-3, None, "float32", "cpu", print)
    assert "traj.jsonl:1: step 0 try 0: malformed: prompt_token_ids is not a non-empty list" in err.getvalue()
