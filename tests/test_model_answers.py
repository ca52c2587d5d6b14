"""A model server's 200 that is not a chat completion is the server's failure (ModelError),
retried like a 500 on each endpoint and then on the next; a chat completion whose text does
not parse stays the agent's. Against a real HTTP server on loopback (tests/helpers/servers.py)."""

import asyncio
import json
import time

import pytest
from helpers.servers import ClusterStandIn, ModelStandIn, completion
from hypothesis import given
from hypothesis import strategies as st

from cua_cli._util import retry
from cua_cli._util.budget import Budget
from cua_cli.agents import Turn
from cua_cli.agents.uitars import UITarsAgent
from cua_cli.config import load_config
from cua_cli.envs import Observation
from cua_cli.errors import ModelError
from cua_cli.models import Params, Reply, make_model

MESSAGES = [{"role": "user", "content": "Click the button."}]


def _model(tmp_path, urls, **extra):
    path = tmp_path / f"m-{time.monotonic_ns()}.yaml"
    path.write_text(json.dumps({"model": {"provider": "openai", "endpoints": [f"{u}/v1" for u in urls], "name": "m",
                                          "image_uuids": False, **extra}}))
    return make_model(load_config(str(path)), {})


@pytest.fixture
def no_backoff(monkeypatch):
    """Tries follow one another at once: these tests count the tries, the pause between them is
    the retry module's (tests/test_deadlines.py and tests/test_faults.py wait it out)."""
    monkeypatch.setattr(retry, "pause", lambda *args, **kwargs: None)


def _choice(**fields) -> bytes:
    return json.dumps({"choices": [fields]}).encode()


NOT_COMPLETIONS = {
    "not JSON": b"<html>Bad gateway</html>",
    "empty body": b"",
    "not UTF-8": b'{"choices": "\xff"}',
    "a JSON list": b"[1, 2]",
    "a JSON string": b'"Thought: x"',
    "no choices": b'{"object": "error", "message": "out of memory"}',
    "choices empty": b'{"choices": []}',
    "choices null": b'{"choices": null}',
    "choices a dict": b'{"choices": {"0": {"message": {"content": "x"}}}}',
    "a choice not an object": b'{"choices": ["Thought: x"]}',
    "no message": _choice(index=0, finish_reason="stop"),
    "message null": _choice(message=None),
    "message a string": _choice(message="Thought: x"),
    "no content": _choice(message={"role": "assistant"}),
    "content null": completion(None),
    "content empty": completion(""),
    "content a number": completion(7),
    "content a list": completion([{"type": "text", "text": "x"}]),
}


@pytest.mark.parametrize("body", [None, *NOT_COMPLETIONS.values()], ids=["HTTP 500 (the yardstick)", *NOT_COMPLETIONS])
def test_a_200_that_is_not_a_chat_completion_is_retried_on_every_endpoint_like_a_500(tmp_path, body, no_backoff):
    with ModelStandIn() as server:
        if body is None:
            server.status = 500
        else:
            server.body = body
        session = _model(tmp_path, [server.url, server.url], retries=1).session("t", 0)
        with pytest.raises(ModelError) as e:
            asyncio.run(session.complete(MESSAGES, Params(0, Budget(30.0))))
        assert server.requests["/v1/chat/completions"] == 4  # each of the two endpoints: one try and one retry
    assert body is None or "not a chat completion" in str(e.value)


def test_after_bad_answers_a_good_one_is_the_reply(tmp_path, no_backoff):
    with ModelStandIn() as bad, ModelStandIn("Thought: t\nAction: wait()") as good:
        bad.body = completion(None)
        session = _model(tmp_path, [bad.url, good.url], retries=1).session("t", 0)
        reply = asyncio.run(session.complete(MESSAGES, Params(0, Budget(30.0))))
        assert reply.text == "Thought: t\nAction: wait()" and reply.endpoint == f"{good.url}/v1"
        assert bad.requests["/v1/chat/completions"] == 2


def _ask(session):
    """One UI-TARS step against `session`: the turn it filled."""
    obs = Observation(ClusterStandIn.PNG, 1, 1)
    obs.file = "step_0000.png"
    turn = Turn()
    asyncio.run(UITarsAgent(parse_retries=2).start("Click the button.", session).ask(obs, turn, Budget(30.0)))
    return turn


def test_a_chat_completion_whose_text_does_not_parse_is_the_agents_mistake_and_a_bad_body_is_not(tmp_path):
    with ModelStandIn("I would rather not click anything.") as server:
        turn = _ask(_model(tmp_path, [server.url], retries=1).session("t", 0))
        assert turn.stop == "parse_error" and turn.tries == 3  # asked again, as parse_retries says
        assert server.requests["/v1/chat/completions"] == 3
        # Each failed try says why the server stopped: "length" would mean model.max_tokens cut it.
        assert [t["finish_reason"] for t in turn.failed_tries] == ["stop", "stop"]
        server.body = completion("")
        with pytest.raises(ModelError):  # no answer at all: the server's, however often the agent might ask
            _ask(_model(tmp_path, [server.url], retries=1).session("t", 0))
        assert server.requests["/v1/chat/completions"] == 3 + 2  # retried like a 500, never parsed


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                   max_size=4),
                     max_leaves=20)
_near = st.fixed_dictionaries({"choices": st.one_of(_json, st.lists(st.fixed_dictionaries(
    {"message": st.one_of(_json, st.fixed_dictionaries({"content": _json | st.text(max_size=30)}))},
    optional={"logprobs": _json, "token_ids": _json, "finish_reason": _json}), max_size=2))},
    optional={"prompt_token_ids": _json})


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """One model server, and a provider for it in each of the answer-reading modes."""
    tmp = tmp_path_factory.mktemp("hostile")
    with ModelStandIn() as server:
        yield server, [_model(tmp, [server.url], retries=0, **mode).session("t", 0)
                       for mode in ({}, {"record_logprobs": True}, {"record_tokens": True})]


@pytest.mark.slow  # a long property run
@given(body=st.one_of(_json.map(json.dumps), _near.map(json.dumps), st.binary(max_size=200)), mode=st.integers(0, 2))
def test_any_body_answered_with_200_is_a_reply_or_a_model_error(hostile, body, mode):
    server, sessions = hostile
    server.body = body if isinstance(body, bytes) else body.encode()
    try:
        reply = asyncio.run(sessions[mode].complete(MESSAGES, Params(0, Budget(30.0))))
    except ModelError:
        return
    assert isinstance(reply, Reply) and isinstance(reply.text, str) and reply.text
