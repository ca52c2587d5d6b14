"""AgentGym's WebArena protocol on `cua env-server`: real Chromium, real MiniWoB, real HTTP."""

import re
import time

import pytest
import requests
from click.testing import CliRunner
from helpers.envserver import UNSET_TOKEN_ENV, start_env_server, stop_env_server

from cua_cli.cli import main
from cua_cli.envserver.agentgym_webarena import KIND, WebArenaRoutes, parse_action, parse_seeds, parse_tasks

TASKS = ["click-test", "enter-text", "choose-list"]
N_SEEDS = 5  # idx = task_index * 5 + seed


def idx(task, seed):
    return TASKS.index(task) * N_SEEDS + seed


def node(observation, pattern):
    """The id of the listed node whose line matches `pattern` (after its "[id] ")."""
    return int(re.search(r"\[(\d+)\] " + pattern, observation).group(1))


def tree(observation):
    """The id lines of an observation, without its PREVIOUS ACTION."""
    return re.findall(r"^\t*\[\d+\] .*$", observation.split("\nURL: ")[0], re.M)


# Before the module's server exists, so no more than 2 browsers live at once.
@pytest.mark.slow  # the env server's headless Chromium
def test_shutdown_quits_the_browsers_of_agentgym_envs():
    server, url = start_env_server(max_envs=1, token_env=UNSET_TOKEN_ENV, agentgym_tasks=["click-test"],
                        agentgym_seeds=[range(1)])
    try:
        env = requests.post(f"{url}/create").json()["env_idx"]
        driver = server.pool.use_session(f"{KIND}-{env}", lambda s: s.browser.driver, KIND)
        assert driver.service.process.poll() is None
        assert requests.post(f"{url}/create").status_code == 503  # one browser, taken
    finally:
        stop_env_server(server)
    assert driver.service.process.poll() is not None


@pytest.fixture(scope="module")
def env():
    server, url = start_env_server(max_envs=2, token_env=UNSET_TOKEN_ENV, agentgym_tasks=TASKS,
                        agentgym_seeds=[range(N_SEEDS)])
    http = requests.Session()
    yield server, url, http
    http.close()
    stop_env_server(server)


def create(url, http):
    r = http.post(f"{url}/create")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json", r.text
    body = r.json()
    assert list(body) == ["env_idx"] and type(body["env_idx"]) is int
    return body["env_idx"]


def reset(url, http, env_idx, task, seed):
    r = http.post(f"{url}/reset", json={"env_idx": env_idx, "seed": 0, "idx": idx(task, seed)})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"observation", "sites", "object"}, body
    return body


def step(url, http, env_idx, action):
    r = http.post(f"{url}/step", json={"env_idx": env_idx, "action": action})
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == ["observation", "reward", "terminated", "truncated", "info"]
    assert body["truncated"] is False
    return body


def close(url, http, env_idx):
    r = http.post(f"{url}/close", json={"env_idx": env_idx})
    assert r.status_code == 200 and r.json() == {"closed": "closed"}


@pytest.mark.slow  # the env server's headless Chromium
def test_routes_and_observation_shape(env):
    server, url, http = env
    r = http.get(f"{url}/")
    assert r.status_code == 200 and r.text == "ok"
    e = create(url, http)
    assert e in http.get(f"{url}/list_envs").json()
    body = reset(url, http, e, "click-test", 0)
    assert body["sites"] == ["miniwob"] and body["object"] == "Click the button."
    obs = body["observation"]
    assert re.fullmatch(
        r"OBSERVATION:\nTab 0 \(current\): Click Test Task\n\n"
        r"\[1\] RootWebArea 'Click Test Task' focused: True\n"
        r"\t\[2\] StaticText 'Click the button\.'\n"
        r"\t\[3\] button 'Click Me!'\n"
        r"URL: file://\S+/miniwob/click-test\.html\n"
        r"OBJECTIVE: Click the button\.\n"
        r"PREVIOUS ACTION: None", obs), obs
    r = http.get(f"{url}/observation", params={"env_idx": e})
    assert r.status_code == 200 and r.json() == obs
    # The ids map back to the page's elements.
    tag = server.pool.use_session(f"{KIND}-{e}", lambda s: s.browser.driver.execute_script(
        "return document.querySelector('#subbtn').dataset.cuaId"), KIND)
    assert tag == "3"
    close(url, http, e)
    assert e not in http.get(f"{url}/list_envs").json()
    r = http.get(f"{url}/observation", params={"env_idx": e})
    assert r.status_code == 500 and f"unknown env_idx {e}" in r.json()["error"]


@pytest.mark.slow  # the env server's headless Chromium
def test_click_reaches_reward_and_a_later_step_changes_nothing(env):
    server, url, http = env
    e = create(url, http)
    obs = reset(url, http, e, "click-test", 1)["observation"]
    button = node(obs, "button 'Click Me!'")
    r = step(url, http, e, "Let's think step-by-step. The button is there. "
                           f"In summary, the next action I will perform is ```click [{button}]```")
    assert r["terminated"] is True and r["reward"] == 1.0
    assert r["info"]["miniwob"] == {"task": "click-test", "seed": 1, "done": True, "raw_reward": 1.0}
    assert r["observation"].endswith(f"PREVIOUS ACTION: click [{button}] where [{button}] is button 'Click Me!'")
    again = step(url, http, e, f"```click [{button}]```")
    assert again["terminated"] is True and again["reward"] == 1.0 and "episode is over" in again["info"]["error"]
    assert again["observation"] == r["observation"]
    close(url, http, e)


@pytest.mark.slow  # the env server's headless Chromium
def test_enter_text_and_ids_stay_put(env):
    server, url, http = env
    e = create(url, http)
    first = reset(url, http, e, "enter-text", 2)
    obs = first["observation"]
    word = re.search(r'OBJECTIVE: Enter "(.+)" into', obs).group(1)
    assert first["object"] == f'Enter "{word}" into the text field and press Submit.'
    box, submit = node(obs, "textbox ''"), node(obs, "button 'Submit'")

    r = step(url, http, e, f"```type [{box}] [{word}] [0]```")
    assert r["terminated"] is False and r["reward"] == 0.0
    assert f"[{box}] textbox '' focused: True required: False value: {word!r}" in r["observation"]
    # Same elements, same ids: only the typed value and the focus changed.
    strip = [re.sub(r" (focused: True|value: .*)", "", line) for line in tree(r["observation"])]
    assert strip == [re.sub(r" focused: True", "", line) for line in tree(obs)]
    assert r["observation"].endswith(f"PREVIOUS ACTION: type [{box}] [{word}] where [{box}] is textbox '' "
                                     "required: False")

    r = step(url, http, e, f"```click [{submit}]```")
    assert r["terminated"] is True and r["reward"] == 1.0

    # The same idx again: the same page, the same ids.
    assert reset(url, http, e, "enter-text", 2) == first
    # Enter after typing (the default) submits nothing here; a wrong word fails: reward 0, MiniWoB's -1 in info.
    r = step(url, http, e, f"```type [{box}] [not {word}]```")
    assert r["terminated"] is False and f"value: 'not {word}'" in r["observation"]
    r = step(url, http, e, f"```click [{submit}]```")
    assert r["terminated"] is True and r["reward"] == 0.0 and r["info"]["miniwob"]["raw_reward"] == -1.0
    close(url, http, e)


@pytest.mark.slow  # the env server's headless Chromium
def test_choose_an_option(env):
    server, url, http = env
    e = create(url, http)
    obs = reset(url, http, e, "choose-list", 0)["observation"]
    wanted = re.search(r"OBJECTIVE: Select (.+) from the list", obs).group(1)
    shown = re.search(r"combobox '' value: (.+)", obs).group(1)
    assert shown != repr(wanted)  # this seed starts on another option
    option = node(obs, f"option {wanted!r}")
    # A hover must not select it.
    assert f"combobox '' value: {shown}\n" in step(url, http, e, f"```hover [{option}]```")["observation"]
    r = step(url, http, e, f"```click [{option}]```")
    assert f"combobox '' focused: True value: {wanted!r}\n" in r["observation"]
    assert f"[{option}] option {wanted!r} selected: True" in r["observation"]
    r = step(url, http, e, f"```click [{node(obs, 'button .Submit.')}]```")
    assert r["terminated"] is True and r["reward"] == 1.0
    close(url, http, e)


@pytest.mark.slow  # the env server's headless Chromium
@pytest.mark.parametrize("action, says", [
    ("I would click the button.", "No action found in your response"),
    ("```   ```", "fence in your response is empty"),
    ("```click [999]```", 'Attempt to perform "click" on element "[999]" but no matching element found'),
    ("```click [" + "9" * 3_000 + "]```", 'on element "[' + "9" * 40 + '...]" but no matching element found'),
    ("```push [3]```", 'unknown action "push"'),
    ("```click 3```", "write it as ```click [id]```"),
    ("```type [3]```", "write it as ```type [id] [text] [0|1]```"),
    ("```type [3] [a\u0007b] [0]```", "U+0007 cannot be typed"),
    ("```press [Hyper+x]```", 'unknown key "Hyper"'),
    ("```scroll [left]```", "write it as ```scroll [up|down]```"),
    ("```goto [https://example.com/]```", "goto [https://example.com/] was refused"),
    ("```go_back```", "go_back did nothing"),
    ("```new_tab```", "tabs are not supported"),
    ("```tab_focus [1]```", "tabs are not supported"),
    ("```close_tab```", "tabs are not supported"),
    (["click [3]"], "The action must be text"),
])
def test_bad_actions_are_observations(env, action, says):
    server, url, http = env
    e = create(url, http)
    obs = reset(url, http, e, "click-test", 3)["observation"]
    assert node(obs, "button 'Click Me!'") == 3
    r = step(url, http, e, action)
    assert r["reward"] == 0.0 and r["terminated"] is False
    previous = r["observation"].split("\nPREVIOUS ACTION: ")[1]
    assert says in previous, previous
    assert tree(r["observation"]) == tree(obs)  # still the page, unchanged
    assert server.pool.use_session(f"{KIND}-{e}", lambda s: s.browser.driver.current_url, KIND).endswith(
        "/miniwob/click-test.html")
    # Nothing happened to the page: the button still ends the episode.
    assert step(url, http, e, "```click [3]```")["reward"] == 1.0
    close(url, http, e)


@pytest.mark.slow  # the env server's headless Chromium
def test_unknown_envs_and_bad_bodies(env):
    server, url, http = env
    r = step(url, http, 12345, "```click [3]```")
    assert r["reward"] == 0.0 and r["terminated"] is False and r["info"] is None
    assert "unknown env_idx 12345" in r["observation"]
    r = http.post(f"{url}/reset", json={"env_idx": 12345, "seed": 0, "idx": 0})
    assert r.status_code == 200 and r.json()["observation"] == "TimeoutError"
    assert r.json()["sites"] == "Error" and "unknown env_idx" in r.json()["error"]
    for query in ({"env_idx": 12345}, {"env_idx": "x"}, {}):
        r = http.get(f"{url}/observation", params=query)
        assert r.status_code == 500 and "unknown env_idx" in r.json()["error"]
    close(url, http, 12345)  # AgentGym's server says "closed" too

    e = create(url, http)
    r = step(url, http, e, "```click [3]```")
    assert "has not been reset" in r["observation"] and r["terminated"] is False
    r = http.get(f"{url}/observation", params={"env_idx": e})
    assert r.status_code == 500 and "has not been reset" in r.json()["error"]
    for bad in (3 * N_SEEDS, -1, "0", 1.0, None):
        r = http.post(f"{url}/reset", json={"env_idx": e, "seed": 0, "idx": bad})
        assert r.status_code == 200 and r.json()["observation"] == "TimeoutError"
        assert f"idx must be an integer in [0, {3 * N_SEEDS})" in r.json()["error"]
    for route, body in (("reset", {"env_idx": e}), ("step", {"env_idx": e}), ("step", {"action": "x"}),
                        ("close", {}), ("reset", [1])):
        r = http.post(f"{url}/{route}", json=body)
        assert r.status_code == 500 and "body must be" in r.json()["error"], (route, r.text)
    r = http.post(f"{url}/step", data=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert http.get(f"{url}/create").status_code == 405
    close(url, http, e)


@pytest.mark.slow  # the env server's headless Chromium
def test_agentgym_envs_share_the_pool_and_hide_from_server_list(env, monkeypatch):
    server, url, http = env
    a, b = create(url, http), create(url, http)
    r = http.post(f"{url}/create")
    assert r.status_code == 503 and "all 2 envs busy" in r.json()["error"]
    r = http.post(f"{url}/server/getAvailableAndLock", json={"config": {"miniwob": "click-test", "seed": 0}})
    assert r.status_code == 503
    assert http.get(f"{url}/server/list").json() == {"data": []}  # DART's close_all_envs must not see them
    close(url, http, a)

    r = http.post(f"{url}/server/getAvailableAndLock", json={"config": {"miniwob": "click-test", "seed": 0}})
    sid = r.json()["data"]["server_id"]
    listed = http.get(f"{url}/server/list").json()["data"]
    assert [(s["server_id"], s["service_id"]) for s in listed] == [(sid, sid)]
    # The two protocols cannot reach each other's envs.
    assert http.post(f"{url}/server/execute/{KIND}-{b}", json={"action": "DONE"}).status_code == 404
    assert http.post(f"{url}/server/release/{sid}").status_code == 200

    # An AgentGym env nobody uses is released like any other.
    monkeypatch.setattr(server.pool, "idle_timeout_s", 0.2)
    time.sleep(0.3)
    server.pool.expire_idle()
    assert b not in http.get(f"{url}/list_envs").json()
    assert "unknown env_idx" in step(url, http, b, "```click [3]```")["observation"]


def test_token_guards_the_agentgym_routes(monkeypatch):
    monkeypatch.setenv("CUA_TEST_TOKEN", "tok")
    server, url = start_env_server(token_env="CUA_TEST_TOKEN", agentgym_tasks=["click-test"])
    try:
        for method, route in (("GET", "/"), ("POST", "/create"), ("POST", "/step"), ("GET", "/list_envs")):
            assert requests.request(method, url + route).status_code == 401
        assert requests.get(url, headers={"Authorization": "Bearer nope"}).status_code == 401
        assert requests.get(url, headers={"Authorization": "Bearer tok"}).text == "ok"
        assert requests.get(f"{url}/list_envs", headers={"Authorization": "tok"}).json() == []
    finally:
        stop_env_server(server)


def test_routes_are_off_without_tasks():
    server, url = start_env_server(token_env=UNSET_TOKEN_ENV)
    try:
        for method, route in (("GET", "/"), ("POST", "/create"), ("POST", "/reset"), ("GET", "/observation")):
            r = requests.request(method, url + route, json={})
            assert r.status_code == 404 and "without --agentgym-tasks" in r.json()["error"]
        assert requests.get(f"{url}/server/list").json() == {"data": []}
    finally:
        stop_env_server(server)


def test_idx_is_task_major():
    routes = WebArenaRoutes(None, ["a", "b"], parse_seeds("0-2,10,20-21"))
    assert routes.size == 12
    assert [routes.pair(i) for i in range(12)] == [(t, s) for t in "ab" for s in (0, 1, 2, 10, 20, 21)]
    for bad in (12, -1, True, "1"):
        with pytest.raises(ValueError, match=r"\[0, 12\)"):
            routes.pair(bad)


def test_seed_and_task_lists():
    assert parse_seeds(" 5 ,0-1") == [range(5, 6), range(0, 2)]
    for bad in ("", "1-", "a", "3-1", "0-5,5", "0-9,3-4", "-1", str(2**53)):
        with pytest.raises(ValueError):
            parse_seeds(bad)
    assert parse_tasks("click-test, enter-text") == ["click-test", "enter-text"]
    for bad in ("nope", "click-test,click-test", "click-test,", "flight.AA"):
        with pytest.raises(ValueError):
            parse_tasks(bad)


def test_cli_refuses_bad_agentgym_options():
    runner = CliRunner()
    r = runner.invoke(main, ["env-server", "--agentgym-seeds", "0-9"])
    assert r.exit_code == 2 and "needs --agentgym-tasks" in r.output
    r = runner.invoke(main, ["env-server", "--agentgym-tasks", "click-test,nope"])
    assert r.exit_code == 2 and "unknown MiniWoB task 'nope'" in r.output
    r = runner.invoke(main, ["env-server", "--agentgym-tasks", "click-test", "--agentgym-seeds", "9-1"])
    assert r.exit_code == 2 and "bad seed list '9-1'" in r.output
    shown = " ".join(runner.invoke(main, ["env-server", "--help"]).output.split())  # however click wraps it
    assert "idx = task_index * n_seeds + seed_index" in shown


@pytest.mark.parametrize("response, verb, element, arg, enter", [
    ("In summary, the next action I will perform is ```click [1234]```", "click", 1234, "", False),
    ("```\ntype [7] [hello world] [0]\n``` and ```click [1]```", "type", 7, "hello world", False),
    ("```type [7] [a] b]```", "type", 7, "a] b", True),
    ("```scroll down```", "scroll", 0, "down", False),
    ("```press [Control+a]```", "press", 0, "Control+a", False),
    ("```stop```", "stop", 0, "", False),
    ("```stop [$279.49]```", "stop", 0, "$279.49", False),
])
def test_parse_action_reads_the_first_fence_as_webarena_does(response, verb, element, arg, enter):
    action = parse_action(response)
    assert (action.verb, action.element, action.arg, action.enter) == (verb, element, arg, enter)


def test_press_names_keys_as_webarena_does():
    assert parse_action("```press [Control+a]```").keys == ("ctrl", "a")
    assert parse_action("```press [Meta+v]```").keys == ("ctrl", "v")  # Meta is Control off a Mac
    assert parse_action("```press [ArrowDown]```").keys == ("down",)
    assert parse_action("```press [+]```").keys == ("+",)
