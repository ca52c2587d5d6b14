"""The AgentGym stand-ins (tests/helpers/agentgym_standins.py) answer with their real servers' exact shapes."""

import time

import pytest
import requests
from helpers.agentgym_standins import (
    ENVS,
    SUCCESS_REWARD,
    TOOL_ENVS,
    AgentGymStandIn,
    partial_action,
    task_marker,
    winning_action,
)

T = 5  # request timeout, seconds


def post(url, path, body=None, **kw):
    if body is None:
        return requests.post(url + path, timeout=T, **kw)
    return requests.post(url + path, json=body, timeout=T, **kw)


def get(url, path, **params):
    return requests.get(url + path, params=params, timeout=T)


def ok(r):
    assert r.status_code == 200, (r.status_code, r.text)
    assert r.headers["Content-Type"] == "application/json"
    return r.json()


def test_context_manager_gives_the_base_url_and_stops():
    s = AgentGymStandIn("textcraft")
    with s as url:
        assert url == s.url and url.startswith("http://127.0.0.1:")
        assert ok(get(url, "/")) == "This is environment TextCraft."
    with pytest.raises(requests.ConnectionError):
        get(url, "/")


def test_unknown_env_is_refused():
    with pytest.raises(ValueError):
        AgentGymStandIn("nethack")


def test_textcraft_protocol_and_steps_after_done():
    s = AgentGymStandIn("textcraft", tasks=10)
    with s as url:
        r = post(url, "/create")                       # the create body is a required (all-optional) model
        assert r.status_code == 422
        assert r.json() == {"detail": [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]}
        c = ok(post(url, "/create", {}))
        assert set(c) == {"id", "observation", "done", "reward"}
        assert (c["id"], c["done"], c["reward"]) == (0, False, 0)
        assert task_marker(0) in c["observation"]        # create already loads task number `id`
        r = ok(post(url, "/reset", {"id": 0, "data_idx": 13}))
        assert set(r) == {"id", "observation", "done", "reward"} and task_marker(3) in r["observation"]
        assert ok(get(url, "/observation", id=0)) == r["observation"]      # a bare JSON string
        step = ok(post(url, "/step", {"id": 0, "action": "get 1 oak log"}))
        assert step == {"observation": "Could not execute get 1 oak log", "reward": 0, "done": False}
        assert ok(get(url, "/observation", id=0)) == step["observation"]  # the last observation
        win = ok(post(url, "/step", {"id": 0, "action": winning_action("textcraft", 3)}))
        assert set(win) == {"observation", "reward", "done"}
        assert (win["reward"], win["done"]) == (SUCCESS_REWARD["textcraft"], True)
        after = ok(post(url, "/step", {"id": 0, "action": "inventory"}))   # still accepted, done false again
        assert (after["reward"], after["done"]) == (0, False)
        assert ok(post(url, "/step", {"id": 0, "action": "win 3"}))["done"] is True
        assert ok(post(url, "/close", {"id": 0})) is True
        assert ok(post(url, "/close", {"id": 0})) is False
        assert ok(post(url, "/step", {"id": 0, "action": "x"})) == {"error": "The id 0 is not valid."}
        assert ok(get(url, "/observation", id=0)) == {"error": "The id 0 is not valid."}


def test_babyai_protocol_score_and_error_after_done():
    s = AgentGymStandIn("babyai")
    with s as url:
        assert ok(post(url, "/create")) == {"id": 0}   # no body needed
        assert ok(get(url, "/observation", id=0)) == {"observation": "Environment not initialized", "reward": 0,
                                                      "score": 0, "done": False, "deleted": False}
        r = ok(post(url, "/reset", {"id": 0, "data_idx": 7}))
        assert set(r) == {"observation", "reward", "score", "deleted", "done"}
        assert r["observation"].startswith("Your goal: go to the red ball 7\n") and task_marker(7) in r["observation"]
        o = ok(get(url, "/observation", id=0))
        assert set(o) == {"observation", "reward", "score", "done", "deleted"} and o["observation"] == r["observation"]
        bad = ok(post(url, "/step", {"id": 0, "action": "fly"}))
        assert set(bad) == {"observation", "reward", "score", "done"}
        assert bad["observation"].startswith("The action is not recognized. Please check valid actions.")
        assert (bad["reward"], bad["score"], bad["done"]) == (0, 0, False)
        win = ok(post(url, "/step", {"id": 0, "action": "Go To Red Ball 7 "}))   # lower-cased and stripped
        assert (win["reward"], win["score"], win["done"]) == (0.8875, SUCCESS_REWARD["babyai"], True)
        assert "The task is completed." in win["observation"]
        finished = {"error": "The task with environment 0 has finished."}
        assert ok(post(url, "/step", {"id": 0, "action": "turn left"})) == finished
        assert ok(get(url, "/observation", id=0)) == finished
        # reset is allowed after done; a turn first costs one more low-level step of the discount
        assert ok(post(url, "/reset", {"id": 0, "data_idx": 1}))["done"] is False
        ok(post(url, "/step", {"id": 0, "action": "turn left"}))
        win = ok(post(url, "/step", {"id": 0, "action": winning_action("babyai", 1)}))
        assert win["score"] == pytest.approx(1 - 0.9 * 9 / 64)
        assert ok(post(url, "/close", {"id": 0})) is True
        assert ok(post(url, "/close", {"id": 0})) is False
        assert ok(post(url, "/reset", {"id": 0, "data_idx": 1})) == {"error": "The id 0 is not valid."}


def test_sciworld_protocol_score_out_of_100_and_close():
    s = AgentGymStandIn("sciworld", tasks=10)
    with s as url:
        assert ok(post(url, "/create")) == {"id": 0}
        assert ok(get(url, "/observation", id=0)) == {"error": "'observation'"}
        assert ok(post(url, "/reset", {"id": 0, "data_idx": 10})) == {"error": "list index out of range"}
        r = ok(post(url, "/reset", {"id": 0, "data_idx": 4}))
        assert set(r) == {"task_name", "var_num", "task_description", "observation", "reward", "score", "deleted",
                          "done"}
        assert task_marker(4) in r["observation"] and (r["score"], r["done"]) == (0, False)
        assert isinstance(ok(get(url, "/observation", id=0)), str)
        half = ok(post(url, "/step", {"id": 0, "action": partial_action(4)}))
        assert half == {"observation": half["observation"], "reward": 50, "score": 50, "done": False}
        win = ok(post(url, "/step", {"id": 0, "action": winning_action("sciworld", 4)}))
        assert (win["reward"], win["score"], win["done"]) == (50, SUCCESS_REWARD["sciworld"], True)
        assert ok(post(url, "/step", {"id": 0, "action": "look"})) == {
            "error": "The task with environment 0 has finished."}
        assert ok(post(url, "/close", {"id": 0})) is True
        assert ok(post(url, "/reset", {"id": 0, "data_idx": 1})) == {
            "error": "The task with environment 0 has been deleted."}
        for iid in (0, 99):                        # closing twice, or an unknown id: uncaught, HTTP 500
            r = post(url, "/close", {"id": iid})
            assert (r.status_code, r.text) == (500, "Internal Server Error")
            assert r.headers["Content-Type"].startswith("text/plain")


def test_alfworld_protocol_and_missing_close():
    s = AgentGymStandIn("alfworld")
    with s as url:
        assert ok(post(url, "/create")) == {"id": 0}
        assert ok(post(url, "/reset", {"id": 0, "game": 2, "world_type": "Txt"})) == {
            "error": 'world_type must be one of "Text", "Embody" and "Hybrid"'}
        r = post(url, "/reset", {"id": 0, "game": 2})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "world_type"]
        r = ok(post(url, "/reset", {"id": 0, "game": 2, "world_type": "Text"}))
        assert set(r) == {"id", "observation", "available_actions", "task_type"} and task_marker(2) in r["observation"]
        assert winning_action("alfworld", 2) in ok(get(url, "/available_actions", id=0))
        step = ok(post(url, "/step", {"id": 0, "action": "look"}))
        assert step == {"observation": "Nothing happens.", "reward": 0.0, "available_actions": r["available_actions"],
                        "done": False}
        win = ok(post(url, "/step", {"id": 0, "action": "win 2"}))
        assert (win["reward"], win["done"]) == (SUCCESS_REWARD["alfworld"], True)
        assert ok(post(url, "/step", {"id": 0, "action": "look"})) == {
            "error": "The task with environment 0 has finished."}
        r = post(url, "/close", {"id": 0})
        assert (r.status_code, r.json()) == (404, {"detail": "Not Found"})
        r = get(url, "/step")
        assert (r.status_code, r.json()) == (405, {"detail": "Method Not Allowed"})


@pytest.mark.parametrize("env", ["webshop", "sqlgym"])
def test_webshop_sqlgym_bare_int_ids_and_state_answers(env):
    s = AgentGymStandIn(env, tasks=10)
    reset_key = {"webshop": "session_id", "sqlgym": "item_id"}[env]
    with s as url:
        iid = ok(post(url, "/create"))
        assert isinstance(iid, int) and not isinstance(iid, bool)
        r = ok(post(url, "/reset", {"env_idx": iid, reset_key: 6}))
        assert isinstance(r, list) and len(r) == 2 and r[1] is None and task_marker(6) in r[0]
        assert ok(get(url, "/observation", env_idx=iid)) == r[0]
        step = ok(post(url, "/step", {"env_idx": iid, "action": "search[shoes]"}))
        assert set(step) == {"state", "reward", "done", "info"} and step["reward"] == 0.0
        win = ok(post(url, "/step", {"env_idx": iid, "action": winning_action(env, 6)}))
        assert (win["reward"], win["done"]) == (SUCCESS_REWARD[env], True)
        assert post(url, "/close", {"env_idx": iid}).status_code == 404
        # unknown ids are not caught: the framework's 500
        r = post(url, "/step", {"env_idx": iid + 1, "action": "x"})
        assert (r.status_code, r.text) == (500, "Internal Server Error")
        assert get(url, "/observation", env_idx=iid + 1).status_code == 500
        assert ok(get(url, "/")) == "ok"


def test_sqlgym_every_step_ends_and_the_pool_hands_out_old_ids():
    s = AgentGymStandIn("sqlgym", tasks=10)
    with s as url:
        ids = [ok(post(url, "/create")) for _ in range(10)]
        assert len(set(ids[:8])) == 8 and ids[8:] == ids[:2]     # 8 instances, then existing ids in turn
        assert post(url, "/step", {"env_idx": ids[0], "action": "SELECT 1"}).status_code == 500   # before reset
        assert post(url, "/reset", {"env_idx": ids[0], "item_id": 10}).status_code == 500          # out of range
        ok(post(url, "/reset", {"env_idx": ids[0], "item_id": 1}))
        step = ok(post(url, "/step", {"env_idx": ids[0], "action": "SELECT 1"}))
        assert (step["reward"], step["done"], step["info"]) == (0.0, True, {"ground_truth": "win 1"})


@pytest.mark.parametrize("env", ["searchqa", "weather", "sheet"])
def test_searchqa_and_tool_envs(env):
    s = AgentGymStandIn(env, tasks=10)
    with s as url:
        r = post(url, "/create")
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body"]
        assert post(url, "/create", {"id": 10}).status_code == 500               # no such item
        iid = ok(post(url, "/create", {"id": 2}))
        assert iid == 0
        obs = ok(post(url, "/reset", {"env_idx": iid, "id": 8}))
        assert isinstance(obs, str) and task_marker(8) in obs
        assert ok(get(url, "/observation", env_idx=iid)) == obs
        keys = {"observation", "reward", "done", "info"} if env == "searchqa" else {"observation", "reward", "done"}
        step = ok(post(url, "/step", {"env_idx": iid, "action": "hello"}))
        assert set(step) == keys and (step["reward"], step["done"]) == (0.0, False)
        win = ok(post(url, "/step", {"env_idx": iid, "action": winning_action(env, 8)}))
        assert set(win) == keys and (win["reward"], win["done"]) == (SUCCESS_REWARD[env], True)
        assert post(url, "/step", {"env_idx": 5, "action": "x"}).status_code == 500
        r = post(url, "/close", {"env_idx": iid})
        if env == "searchqa":
            assert ok(r) is True and ok(post(url, "/close", {"env_idx": iid})) is False
        else:
            assert r.status_code == 404


def test_searchqa_search_and_wrong_answer():
    with AgentGymStandIn("searchqa") as url:
        iid = ok(post(url, "/create", {"id": 4}))
        ok(post(url, "/reset", {"env_idx": iid, "id": 4}))
        found = ok(post(url, "/step", {"env_idx": iid, "action": "<search> magic phrase </search>"}))
        assert found["observation"].startswith("<information>") and not found["done"]
        wrong = ok(post(url, "/step", {"env_idx": iid, "action": "<answer> lose </answer>"}))
        assert (wrong["reward"], wrong["done"]) == (0.0, False)
        right = ok(post(url, "/step", {"env_idx": iid, "action": "<answer>The Win 4.</answer>"}))   # normalised
        assert (right["reward"], right["done"]) == (1.0, True)


def test_tool_env_finish_ends_the_episode_without_reward_and_reward_sticks():
    with AgentGymStandIn("weather") as url:
        iid = ok(post(url, "/create", {"id": 1}))
        ok(post(url, "/reset", {"env_idx": iid, "id": 1}))
        unparsed = ok(post(url, "/step", {"env_idx": iid, "action": 'finish with Action Input: {"answer": "x"}'}))
        assert unparsed["observation"].startswith("Observation: ERROR | TypeError") and not unparsed["done"]
        lost = ok(post(url, "/step", {"env_idx": iid, "action": 'Action: finish with Action Input: {"answer": "x"}'}))
        assert (lost["reward"], lost["done"]) == (0.0, True)
        ok(post(url, "/reset", {"env_idx": iid}))                                 # no id: the same task again
        ok(post(url, "/step", {"env_idx": iid, "action": winning_action("weather", 1)}))
        later = ok(post(url, "/step", {"env_idx": iid, "action": "Thought: done"}))   # format error; reward stays
        assert (later["reward"], later["done"]) == (1.0, False)


@pytest.mark.parametrize("env", ["maze", "wordle"])
def test_lmrlgym_routes_live_under_their_base_path(env):
    s = AgentGymStandIn(env, tasks=10, max_steps=2)
    base = "/" + env
    reset_key = {"maze": "game", "wordle": "seed"}[env]
    with s as url:
        assert ok(get(url, "/")) == "This is environment LMRL-Gym."
        assert post(url, "/create").status_code == 404
        c = ok(post(url, base + "/create"))
        assert c == {"id": 0}
        r = ok(post(url, base + "/reset", {"id": 0, reset_key: 3}))
        assert set(r) == ({"observation"} if env == "maze" else {"id", "observation"})
        assert task_marker(3) in r["observation"]
        assert ok(get(url, base + "/observation", id=0)) == r["observation"]
        step = ok(post(url, base + "/step", {"id": 0, "action": "move up"}))
        assert set(step) == {"observation", "reward", "done"} and (step["reward"], step["done"]) == (0, False)
        win = ok(post(url, base + "/step", {"id": 0, "action": winning_action(env, 3)}))
        assert (win["reward"], win["done"]) == (SUCCESS_REWARD[env], True)
        assert ok(post(url, base + "/step", {"id": 0, "action": "x"})) == {
            "error": "The task with environment 0 has finished."}
        assert post(url, base + "/close", {"id": 0}).status_code == 404
        if env == "maze":
            assert ok(post(url, base + "/reset", {"id": 0, "game": 10})) == {"error": "The game 10 is not valid."}
            ok(post(url, base + "/reset", {"id": 0, "game": 1}))
            for _ in range(2):
                ok(post(url, base + "/step", {"id": 0, "action": "move up"}))
            fail = ok(post(url, base + "/step", {"id": 0, "action": "move up"}))
            assert fail == {"observation": "Failure\n", "reward": -1.0, "done": True}


def test_wordle_ends_after_six_tries_with_zero_reward():
    with AgentGymStandIn("wordle") as url:
        ok(post(url, "/wordle/create"))
        ok(post(url, "/wordle/reset", {"id": 0, "seed": 1}))
        answers = [ok(post(url, "/wordle/step", {"id": 0, "action": "c r a n e"})) for _ in range(6)]
        assert answers[0] == {"observation": "b b b b b\n", "reward": 0, "done": False}
        assert (answers[-1]["reward"], answers[-1]["done"]) == (0, True)


def test_webarena_protocol():
    s = AgentGymStandIn("webarena", tasks=10)
    with s as url:
        assert ok(post(url, "/create", {})) == {"env_idx": 0}
        r = ok(post(url, "/reset", {"env_idx": 0, "seed": 0, "idx": 3}))
        assert set(r) == {"observation", "sites", "object"} and isinstance(r["sites"], list)
        assert task_marker(3) in r["object"]
        assert r["observation"].startswith("OBSERVATION:\n") and "\nOBJECTIVE: " + r["object"] in r["observation"]
        assert r["observation"].endswith("\nPREVIOUS ACTION: None")
        assert ok(get(url, "/observation", env_idx=0)) == r["observation"]
        nofence = ok(post(url, "/step", {"env_idx": 0, "action": "click [4]"}))
        assert nofence == {"observation": "Cannot parse action from response click [4]", "reward": 0,
                           "terminated": False, "truncated": False, "info": None}
        click = ok(post(url, "/step", {"env_idx": 0, "action": "So ```click [4]```"}))
        assert set(click) == {"observation", "reward", "terminated", "truncated", "info"}
        assert (click["reward"], click["terminated"]) == (1.0, False)       # the browser action ran; no evaluation
        assert click["observation"].endswith("PREVIOUS ACTION: click [4] where [4] is button 'Submit'")
        miss = ok(post(url, "/step", {"env_idx": 0, "action": "```click [99]```"}))
        assert (miss["reward"], miss["terminated"]) == (0.0, False) and miss["info"]["fail_error"]
        lost = ok(post(url, "/step", {"env_idx": 0, "action": "```stop [lose]```"}))
        assert (lost["reward"], lost["terminated"]) == (0.0, True)
        ok(post(url, "/reset", {"env_idx": 0, "seed": 0, "idx": 3}))
        win = ok(post(url, "/step", {"env_idx": 0, "action": winning_action("webarena", 3)}))
        assert (win["reward"], win["terminated"], win["truncated"]) == (SUCCESS_REWARD["webarena"], True, False)
        unknown = ok(post(url, "/step", {"env_idx": 7, "action": "```scroll [down]```"}))
        assert (unknown["observation"], unknown["reward"], unknown["info"]) == ("7", 0, None)
        timeout = {"observation": "TimeoutError", "sites": "Error", "object": "Error"}
        assert ok(post(url, "/reset", {"env_idx": 7, "seed": 0, "idx": 3})) == timeout    # unknown env
        assert ok(post(url, "/reset", {"env_idx": 0, "seed": 0, "idx": 10})) == timeout   # no such task
        for bad in ({"env_idx": 0, "seed": 0}, None):                  # Quart: no 422, an uncaught error
            r = post(url, "/reset", bad) if bad else post(url, "/reset", data="x")
            assert r.status_code == 500 and r.headers["Content-Type"].startswith("text/html")
        assert post(url, "/step", {"env_idx": 0}).status_code == 500
        assert get(url, "/observation").status_code == 500
        assert ok(post(url, "/close", {"env_idx": 0})) == {"closed": "closed"}
        assert ok(post(url, "/close", {"env_idx": 0})) == {"closed": "closed"}
        assert post(url, "/nope").status_code == 404


@pytest.mark.parametrize("env", ["textcraft", "babyai", "webshop", "searchqa", "maze"])
def test_fastapi_422_shapes(env):
    s = AgentGymStandIn(env)
    base, idf = s.base, s.id_field
    with s as url:
        step = url + base + "/step"
        r = requests.post(step, json={idf: 0}, timeout=T)
        assert r.status_code == 422
        assert r.json() == {"detail": [{"type": "missing", "loc": ["body", "action"], "msg": "Field required",
                                        "input": {idf: 0}}]}
        r = requests.post(step, json={idf: "abc", "action": "x"}, timeout=T)
        assert r.json()["detail"] == [{"type": "int_parsing", "loc": ["body", idf],
                                       "msg": "Input should be a valid integer, unable to parse string as an integer",
                                       "input": "abc"}]
        r = requests.post(step, json={idf: 1.5, "action": 3}, timeout=T)
        assert [e["type"] for e in r.json()["detail"]] == ["int_from_float", "string_type"]
        r = requests.post(step, data=b"{bad", headers={"Content-Type": "application/json"}, timeout=T)
        assert r.json()["detail"][0]["type"] == "json_invalid" and r.json()["detail"][0]["loc"] == ["body", 1]
        r = requests.post(step, json=[1, 2], timeout=T)
        assert r.json()["detail"][0]["type"] == "model_attributes_type"
        r = requests.get(url + base + "/observation", timeout=T)
        assert r.status_code == 422
        assert r.json() == {"detail": [{"type": "missing", "loc": ["query", idf], "msg": "Field required",
                                        "input": None}]}


@pytest.mark.parametrize("env", ["textcraft", "babyai", "sciworld", "alfworld", "maze", "wordle"])
def test_unknown_id_is_an_error_object_with_http_200(env):
    s = AgentGymStandIn(env)
    with s as url:
        r = post(url, s.base + "/step", {"id": 42, "action": "x"})
        assert (r.status_code, r.json()) == (200, {"error": "The id 42 is not valid."})
        r = get(url, s.base + "/observation", id="42")        # query ints are parsed
        assert (r.status_code, r.json()) == (200, {"error": "The id 42 is not valid."})


def test_fault_knobs_and_log():
    s = AgentGymStandIn("babyai")
    with s as url:
        s.fail_next("/create", 2)
        for _ in range(2):
            r = post(url, "/create")
            assert (r.status_code, r.text) == (500, "Internal Server Error")
        assert ok(post(url, "/create")) == {"id": 0}              # the failures never reached the env
        s.fail_next("reset", None, status=422)                    # until cleared
        for _ in range(3):
            r = post(url, "/reset", {"id": 0, "data_idx": 1})
            assert r.status_code == 422 and r.json()["detail"][0]["msg"] == "Field required"
        s.clear_faults()
        ok(post(url, "/reset", {"id": 0, "data_idx": 1}))
        s.fail_next("step", 1, status=503)
        assert post(url, "/step", {"id": 0, "action": "x"}).json() == {"detail": "Service Unavailable"}
        s.delay("observation", 0.3)
        t0 = time.monotonic()
        ok(get(url, "/observation", id=0))
        assert time.monotonic() - t0 >= 0.3
        s.delay("observation", 0)
        resets = s.requests_to("/reset")
        assert len(resets) == 4 and resets[-1].body == {"id": 0, "data_idx": 1} and resets[-1].method == "POST"
        obs = s.requests_to("observation", method="GET")[0]
        assert (obs.path, obs.query, obs.body) == ("/observation", {"id": "0"}, None)
        assert [r.path for r in s.log][:3] == ["/create"] * 3


def test_fault_knobs_webarena_and_base_paths():
    s = AgentGymStandIn("webarena")
    with s as url:
        ok(post(url, "/create", {}))
        s.timeout_next_reset()
        body = {"env_idx": 0, "seed": 0, "idx": 1}
        assert ok(post(url, "/reset", body))["observation"] == "TimeoutError"
        assert ok(post(url, "/reset", body))["observation"].startswith("OBSERVATION:")
        s.fail_next("step")
        r = post(url, "/step", {"env_idx": 0, "action": "```scroll [down]```"})
        assert r.status_code == 500 and "<title>500 Internal Server Error</title>" in r.text
    m = AgentGymStandIn("maze")
    with m as url:
        m.fail_next("/maze/create")
        assert post(url, "/maze/create").status_code == 500
        assert ok(post(url, "/maze/create")) == {"id": 0}
        assert len(m.requests_to("create")) == 2


@pytest.mark.parametrize("env", ENVS)
def test_every_env_wins_with_its_winning_action(env):
    """One full episode per env, the way a client drives it: create, reset task 2, a neutral step, the win."""
    s = AgentGymStandIn(env, tasks=10)
    idf, b = s.id_field, s.base
    create_body = {"id": 0} if env == "searchqa" or env in TOOL_ENVS else {}
    reset_body = {"textcraft": {"data_idx": 2}, "babyai": {"data_idx": 2}, "sciworld": {"data_idx": 2},
                  "alfworld": {"game": 2, "world_type": "Text"}, "webshop": {"session_id": 2},
                  "sqlgym": {"item_id": 2}, "maze": {"game": 2}, "wordle": {"seed": 2},
                  "webarena": {"seed": 0, "idx": 2}}.get(env, {"id": 2})
    with s as url:
        c = ok(post(url, b + "/create", create_body))
        iid = c if isinstance(c, int) else c[idf]
        ok(post(url, b + "/reset", {idf: iid, **reset_body}))
        obs = ok(get(url, b + "/observation", **{idf: iid}))
        assert task_marker(2) in (obs["observation"] if isinstance(obs, dict) else obs)
        win = ok(post(url, b + "/step", {idf: iid, "action": winning_action(env, 2)}))
        done = win.get("terminated", win.get("done"))
        reward = win["score"] if env in ("babyai", "sciworld") else win["reward"]
        assert (reward, done) == (SUCCESS_REWARD[env], True)
