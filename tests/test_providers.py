"""Model providers without a server: replay (every model call of a recorded step, in order,
nothing read outside the run) and the random baseline."""

import asyncio
import functools
import json

import pytest

from cua_cli._util.budget import Budget
from cua_cli._util.httpclient import BadAnswer
from cua_cli.agents.uitars import END_ANSWER as _END
from cua_cli.agents.uitars import parse_response, random_answer
from cua_cli.models import AnswerFormat, Params
from cua_cli.models.random_actions import RandomActions
from cua_cli.models.replay import Replay

# What the UI-TARS agent hands a model for a 100x100 screenshot.
_ANSWERS = AnswerFormat(random=functools.partial(random_answer, width=100, height=100, coord_mode="qwen25vl"),
                        end=_END)


def _run(tmp_path, traj, steps):
    run = tmp_path / "run"
    (run / traj).mkdir(parents=True, exist_ok=True)
    line = {"task_id": "t", "domain": None, "sample": 0, "attempt": 0, "outcome": "failure", "reward": 0.0,
            "score": 0.0, "steps": len(steps), "stop_reason": "max_steps", "duration_s": 1.0, "error": None,
            "traj": traj}
    (run / "episodes.jsonl").write_text(json.dumps(line) + "\n")
    (run / traj / "traj.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    return run


def _ask(episode, step):
    return asyncio.run(episode.complete([], Params(step, Budget(10.0), _ANSWERS))).text


def test_replays_failed_tries_before_the_steps_answer(tmp_path):
    run = _run(tmp_path, "trajectories/t/0_0", [
        {"step": 0, "response": "B", "failed_tries": [{"response": "A", "error": "parse: x"}]},
        {"step": 1, "response": None, "error": "model server failed"},  # a step the model never answered
    ])
    ep = Replay(run).session("t", 0)
    assert [_ask(ep, 0), _ask(ep, 0), _ask(ep, 0)] == ["A", "B", _END]
    assert _ask(ep, 1) == _END


def test_a_traj_outside_the_run_is_never_read(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "traj.jsonl").write_text(json.dumps({"step": 0, "response": "Action: click(start_box='(1,1)')"}) + "\n")
    run = _run(tmp_path, "trajectories/t/0_0", [])
    line = json.loads((run / "episodes.jsonl").read_text())
    (run / "episodes.jsonl").write_text(json.dumps(dict(line, traj="../elsewhere")) + "\n")
    assert _ask(Replay(run).session("t", 0), 0) == _END


def test_random_baseline_takes_any_task_id_and_repeats_itself():
    first = [_ask(RandomActions(7).session("bad\udcffid", 0), step) for step in range(5)]
    again = [_ask(RandomActions(7).session("bad\udcffid", 0), step) for step in range(5)]
    assert first == again
    assert all(parse_response(text, 100, 100).actions for text in first)


class _Answer:
    """What the HTTP client gives the OpenAI provider: the JSON, and the body an error quotes."""

    status, content = 200, b"{...}"

    def __init__(self, payload):
        self.payload = payload

    def json(self):
        return self.payload


def _completion(logprobs, token_ids=None, prompt_token_ids=None, names=False):
    content = [{"token": f"token_id:{t}" if names else "x", "logprob": lp} for t, lp in zip(token_ids or [], logprobs)]
    return {"prompt_token_ids": prompt_token_ids,
            "choices": [{"message": {"content": "Action: wait()"}, "finish_reason": "stop", "token_ids": token_ids,
                         "logprobs": {"content": content}}]}


def test_the_openai_provider_reads_token_ids_and_logprobs_as_vllm_returns_them():
    from cua_cli.models.openai_chat import _reply

    reply = _reply(_Answer(_completion([-0.5, -1.0], [7, 8], [1, 2, 3])), "ids")
    assert (reply.prompt_token_ids, reply.token_ids, reply.logprobs, reply.finish_reason) == \
        ([1, 2, 3], [7, 8], [-0.5, -1.0], "stop")
    assert reply.token_fields() == {"prompt_token_ids": [1, 2, 3], "response_token_ids": [7, 8],
                                    "response_logprobs": [-0.5, -1.0], "finish_reason": "stop"}
    named = _reply(_Answer(_completion([-0.5], [7], names=True)), "names")
    assert named.token_fields() == {"token_ids": [7], "logprobs": [-0.5]}
    # Logprobs that do not line up with the tokens, or that are not numbers, make a malformed answer.
    for bad in ([-0.5], [7, 8], [1]), ([float("nan"), -1.0], [7, 8], [1]), ([-0.5], [7], None), ([-0.5], [-7], [1]):
        with pytest.raises(BadAnswer):
            _reply(_Answer(_completion(*bad)), "ids")
