"""Every HTTP call cua makes ends by its deadline, however slowly the server answers: model,
env cluster, AgentGym, fleet health and metrics, against servers on loopback whose answers
never end (tests/helpers/servers.py). A timed-out call is its service's error, retried as the
others are; no request outlives the step's or the episode's deadline.

Bounds are generous (the machine may be loaded): they tell an ended call from a hung one."""

import asyncio
import json
import threading
import time

import pytest
from helpers.servers import DripServer

from cua_cli._util.budget import Budget
from cua_cli._util.httpclient import HttpError, Unreachable
from cua_cli._util.retry import with_retries
from cua_cli.actions import Action
from cua_cli.config import load_config
from cua_cli.envs.agentgym import AgentGymEnv
from cua_cli.envs.env_cluster import ClusterEnv, ClusterSession, EnvSettings
from cua_cli.errors import EnvError, EpisodeTimeout, ModelError, Stopped
from cua_cli.fleet import metrics
from cua_cli.fleet.server import ModelServer
from cua_cli.models import Params, make_model
from cua_cli.tasks import Task

ENDED_WITHIN = 10.0  # s, for calls whose own limits add up to about 1 s


class _Clock:
    def __enter__(self):
        self.start = time.monotonic()
        return self

    def __exit__(self, *exc):
        self.took = time.monotonic() - self.start


def _model(tmp_path, url, **extra):
    path = tmp_path / "m.yaml"
    path.write_text(json.dumps({"model": {"provider": "openai", "endpoints": [f"{url}/v1"], "name": "m",
                                          "image_uuids": False, "retries": 1, **extra}}))
    return make_model(load_config(str(path)), {}).session("t", 0)


MESSAGES = [{"role": "user", "content": "Click the button."}]


def test_a_model_server_that_never_finishes_its_answer_is_a_model_error_after_its_retries(tmp_path):
    with DripServer("chunks") as server, _Clock() as clock, pytest.raises(ModelError) as e:
        asyncio.run(_model(tmp_path, server.url).complete(MESSAGES, Params(0, Budget(0.5))))  # 0.5 s a request
    assert clock.took < ENDED_WITHIN and "timed out" in str(e.value)
    assert server.requests == 2  # retried like any other failure of the server


def test_no_model_request_outlives_the_episode_deadline(tmp_path):
    with DripServer("body") as server, _Clock() as clock, pytest.raises((EpisodeTimeout, ModelError)):
        budget = Budget(600.0, time.monotonic() + 0.5)  # a long step limit; the episode ends sooner
        asyncio.run(_model(tmp_path, server.url, timeout_s=600).complete(MESSAGES, Params(0, budget)))
    assert clock.took < ENDED_WITHIN


@pytest.mark.slow  # waits out a dripping server's deadline
def test_an_env_cluster_that_never_finishes_its_answer_is_an_env_error_and_an_action_is_not_repeated():
    with DripServer("continue") as server:
        env = ClusterEnv(EnvSettings(server.url, retries=1, timeout_s=0.5))
        with _Clock() as clock, pytest.raises(EnvError):
            asyncio.run(env.allocate(Task("t", None), Budget(60.0)))
        assert clock.took < ENDED_WITHIN and server.requests == 2
        session = ClusterSession(env, "env-1", {}, Task("t", None))
        with _Clock() as clock, pytest.raises(EnvError):
            asyncio.run(session.observe(Budget(60.0)))
        assert clock.took < ENDED_WITHIN and server.requests == 4
        with _Clock() as clock, pytest.raises(EnvError):  # the click may have landed: never sent twice
            asyncio.run(session.act([Action("click", 1, 1)], Budget(60.0), []))
        assert clock.took < ENDED_WITHIN and server.requests == 5


def test_an_agentgym_server_that_never_finishes_its_answer_is_an_env_error():
    with DripServer("trailers") as server:
        env = AgentGymEnv(server.url, "textcraft", timeout_s=0.5, retries=1)
        with _Clock() as clock, pytest.raises(EnvError):
            env.call("observation", "GET", "observation", Budget(60.0), params={"id": 0})
        assert clock.took < ENDED_WITHIN and server.requests == 2


def test_fleet_health_and_metrics_end_by_their_timeout(tmp_path):
    with DripServer("head") as server:
        port = int(server.url.rsplit(":", 1)[1])
        s = ModelServer(0, [], port, "m", "m", [], {}, tmp_path / "log")
        with _Clock() as clock:
            assert not s.healthy(timeout=0.5)
        assert clock.took < ENDED_WITHIN
        with _Clock() as clock, pytest.raises(HttpError):
            metrics.fetch(server.url, timeout=0.5)
        assert clock.took < ENDED_WITHIN


def test_the_wait_between_retries_ends_at_the_episode_deadline_or_at_a_stop():
    def down(budget):
        def call():
            budget.timeout()  # what every request asks first: EpisodeTimeout once the episode is over
            raise Unreachable("connection failed (ConnectionRefusedError)")
        return call

    budget = Budget(60.0, time.monotonic() + 0.5)
    with _Clock() as clock, pytest.raises(EpisodeTimeout):  # not a minute's backoff first
        with_retries(down(budget), 3, "env", budget.should_stop, base_delay=60, deadline=budget.deadline)
    assert clock.took < ENDED_WITHIN

    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()  # a Ctrl-C during the wait
    budget = Budget(60.0, should_stop=stop.is_set)
    with _Clock() as clock, pytest.raises(Stopped):
        with_retries(down(budget), 3, "env", budget.should_stop, base_delay=60, deadline=budget.deadline)
    assert clock.took < ENDED_WITHIN
