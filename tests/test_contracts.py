"""Contract suites for the three seams: every Env kind, Agent kind and Model
provider must pass them, against real parts (the built-in MiniWoB++ env
server, real vLLM on the CPU).

A new implementation joins by adding one line to ENV_CASES, AGENT_CASES or
MODEL_CASES, naming a factory that builds it; the registry checks below fail
until it does.
"""

import asyncio
import hashlib
import io
import json
import math
import os
import random
import time
from dataclasses import dataclass

import pytest
from helpers.agentgym_standins import AgentGymStandIn
from PIL import Image as PILImage

from cua_cli._util.budget import Budget
from cua_cli.actions import Action
from cua_cli.agents import Turn, make_agent
from cua_cli.agents.uitars import parse_response
from cua_cli.config import Config, load_config
from cua_cli.envs import Evaluation, Observation, StepResult, make_env
from cua_cli.errors import BadTask, EnvError, EpisodeTimeout, ModelError, Stopped
from cua_cli.kinds import AGENTS, ENVS, PROVIDERS
from cua_cli.models import AnswerFormat, Image, Params, Reply, make_model
from cua_cli.models.image_processor import UNKNOWN
from cua_cli.osworld.a11y_tree import parse as parse_tree
from cua_cli.osworld.a11y_tree import table as tree_table
from cua_cli.rollout.envserver_process import EnvServerProcess
from cua_cli.runfolder.records import turn_fields
from cua_cli.tasks import Task


def _config(tmp_path, text: str):
    path = tmp_path / f"contract-{time.monotonic_ns()}.yaml"
    path.write_text(text)
    return load_config(str(path))


def _png(width=160, height=210) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (width, height), "white").save(out, "PNG")
    return out.getvalue()


# ---------------------------------------------------------------- Env

@dataclass
class EnvCase:
    env: object          # built through make_env
    task: Task           # a task the env can play
    bad_task: Task       # a task the env cannot set up
    harmless: list       # actions that change nothing much (e.g. wait)
    unreachable: object  # the same kind of env pointed at nothing
    a11y_tree: bool = False  # its observations carry the desktop's accessibility tree (agent.observation)


@pytest.fixture(scope="module")
def env_server(tmp_path_factory):
    """The built-in MiniWoB++ env server: the real thing the cluster env speaks to."""
    log = tmp_path_factory.mktemp("contract-env") / "env-server.log"
    server = EnvServerProcess(2, 0, None, log)
    url = server.start()
    yield url
    server.stop()


def cluster_case(request, tmp_path) -> EnvCase:
    url = request.getfixturevalue("env_server")
    cfg = _config(tmp_path, "env: {kind: cluster, retries: 0, allocate_wait_s: 0}\n")
    return EnvCase(make_env(cfg, url, {}),
                   Task("click-test@0", "miniwob", None, {"miniwob": "click-test", "seed": 0}),
                   Task("nope@0", "miniwob", None, {"miniwob": "no-such-task", "seed": 0}),
                   [Action("wait")], make_env(cfg, "http://127.0.0.1:9", {}))


@pytest.fixture(scope="module")
def textcraft_server():
    """A stand-in of AgentGym's TextCraft server (the real one cannot run here): tests/helpers/agentgym_standins.py."""
    with AgentGymStandIn("textcraft") as url:
        yield url


def agentgym_case(request, tmp_path) -> EnvCase:
    url = request.getfixturevalue("textcraft_server")
    cfg = _config(tmp_path, "env: {kind: agentgym, retries: 0, agentgym: {env: textcraft}}\n")
    def task(env):
        return Task(f"{env}@3", env, None, {"agentgym": {"env": env, "idx": 3}})

    return EnvCase(make_env(cfg, url, {}), task("textcraft"), task("babyai"), ["look"],
                   make_env(cfg, "http://127.0.0.1:9", {}))


@pytest.fixture(scope="module")
def desktop_server(tmp_path_factory):
    """cua's own desktop server (`cua env-server --backend desktop`): real X desktops, allocated through
    DART's protocol, each with OSWorld's in-VM API."""
    log = tmp_path_factory.mktemp("contract-desktops") / "env-server.log"
    server = EnvServerProcess(2, 0, "CUA_CONTRACT_DESKTOP_TOKEN", log, 0.0, ["--backend", "desktop"],
                            {**os.environ, "CUA_CONTRACT_DESKTOP_TOKEN": "contract-token"})
    url = server.start()
    yield url
    server.stop()


def osworld_case(request, tmp_path, observation: str = "screenshot") -> EnvCase:
    url = request.getfixturevalue("desktop_server")
    cfg = _config(tmp_path, "env: {kind: osworld, retries: 0, allocate_wait_s: 0, osworld: {pause_s: 0}}\n"
                            f"agent: {{kind: osworld, observation: {observation}}}\n")
    steps = [{"type": "execute", "parameters": {"command": "echo ready > ~/ready.txt", "shell": True}}]
    evaluator = {"func": "exact_match", "result": {"type": "vm_command_line", "command": "cat ~/ready.txt",
                                                   "shell": True},
                 "expected": {"type": "rule", "rules": {"expected": "ready\n"}}}
    task = Task("os-ready", "os", "Leave the file as it is.", {"config": steps}, evaluator)
    bad = Task("os-drive", "os", "x", {"config": [{"type": "googledrive", "parameters": {}}]}, evaluator)
    return EnvCase(make_env(cfg, url, {"env": "contract-token"}), task, bad, ["WAIT"],
                   make_env(cfg, "http://127.0.0.1:9", {"env": "contract-token"}), observation != "screenshot")


def osworld_a11y_case(request, tmp_path) -> EnvCase:
    return osworld_case(request, tmp_path, "a11y_tree")


# kind, or kind/variant
ENV_CASES = {"cluster": cluster_case, "agentgym": agentgym_case, "osworld": osworld_case,
             "osworld/a11y_tree": osworld_a11y_case}


def test_every_env_kind_has_a_contract_case():
    assert {k.split("/")[0] for k in ENV_CASES} == set(ENVS)


# the cluster case plays on the built-in env server's headless Chromium
@pytest.fixture(params=[pytest.param(n, marks=pytest.mark.slow) if n.split("/")[0] in ("cluster", "osworld") else n
                        for n in sorted(ENV_CASES)])
def env_case(request, tmp_path) -> EnvCase:
    return ENV_CASES[request.param](request, tmp_path)


def test_env_plays_an_episode(env_case):
    asyncio.run(_plays_an_episode(env_case))


async def _plays_an_episode(env_case):
    budget = Budget(60.0, time.monotonic() + 120)
    session = await env_case.env.allocate(env_case.task, budget)
    try:
        assert session.instruction is None or isinstance(session.instruction, str)
        obs = await session.observe(budget)
        assert isinstance(obs, Observation) and (obs.screenshot is not None or obs.text is not None)
        if obs.screenshot is not None:  # the size is the image's own
            assert PILImage.open(io.BytesIO(obs.screenshot)).size == (obs.width, obs.height)
        if obs.text is not None:
            assert isinstance(obs.text, str)
        # The desktop's accessibility tree exactly when the agent reads one, as XML.
        assert (obs.a11y_tree is not None) == env_case.a11y_tree
        if obs.a11y_tree is not None:
            assert parse_tree(obs.a11y_tree).tag == "desktop-frame"
        sent = []
        result = await session.act(env_case.harmless, budget, sent)
        assert isinstance(result, StepResult) and isinstance(result.done, bool)
        assert len(sent) == len(env_case.harmless)  # what reached the env, one message per action
        assert (await session.observe(budget)).width == obs.width
        ev = await session.evaluate(budget.unhurried())
        assert isinstance(ev, Evaluation) and math.isfinite(ev.reward) and 0.0 <= ev.score <= 1.0
    finally:
        await session.release(budget.unhurried())
    with pytest.raises(EnvError):  # a released env is gone: the env's answer, not a crash
        await session.observe(budget)


def test_env_refuses_a_task_it_cannot_set_up_as_a_bad_task(env_case):
    with pytest.raises(BadTask):
        asyncio.run(env_case.env.allocate(env_case.bad_task, Budget(60.0)))


def test_env_calls_stop_when_the_run_stops_or_the_deadline_passes(env_case):
    with pytest.raises(Stopped):
        asyncio.run(env_case.env.allocate(env_case.task, Budget(60.0, should_stop=lambda: True)))
    with pytest.raises(EpisodeTimeout):
        asyncio.run(env_case.env.allocate(env_case.task, Budget(60.0, deadline=time.monotonic() - 1)))


def test_an_unreachable_env_is_an_env_error(env_case):
    with pytest.raises(EnvError):
        asyncio.run(env_case.unreachable.allocate(env_case.task, Budget(5.0)))


# ---------------------------------------------------------------- Agent

@dataclass
class AgentCase:
    agent: object        # built through make_agent
    retries: int         # its re-ask limit
    observation: Observation
    good: str            # an answer it acts on
    bad: str             # an answer it cannot parse


def uitars_case(tmp_path) -> AgentCase:
    cfg = _config(tmp_path, "agent: {kind: uitars, parse_retries: 2, history_images: 2}\n")
    return AgentCase(make_agent(cfg), 2, Observation(_png(), 160, 210, file="step_0000.png"),
                     "Thought: the button.\nAction: click(start_box='(10,20)')", "I would rather not.")


def react_case(tmp_path) -> AgentCase:
    cfg = _config(tmp_path, "env: {kind: agentgym, agentgym: {env: textcraft}}\n"
                            "agent: {kind: react, parse_retries: 1, history_chars: 2000}\n")
    obs = "Crafting commands: craft 1 stick using 2 planks.\nGoal: craft stick."
    return AgentCase(make_agent(cfg), 1, Observation(text=obs), "Thought: I need planks.\nAction: get 2 planks",
                     "Thought: hmm\nAction: get 1 a\nAction: get 1 b")


def webarena_case(tmp_path) -> AgentCase:
    cfg = _config(tmp_path, "env: {kind: agentgym}\nagent: {kind: webarena}\n")
    obs = ("OBSERVATION:\n[3] RootWebArea 'Click Test Task'\n  [4] button 'Click Me!'\nURL: file:///click-test.html\n"
           "OBJECTIVE: Click the button.\nPREVIOUS ACTION: None")
    return AgentCase(make_agent(cfg), 2, Observation(text=obs),
                     "The button is [4]. In summary, the next action I will perform is ```click [4]```",
                     "I will click the button.")


def osworld_agent_case(tmp_path, observation: str = "screenshot") -> AgentCase:
    cfg = _config(tmp_path, "agent: {kind: osworld, parse_retries: 1, history_images: 2, "
                            f"observation: {observation}}}\n")
    tree = None if observation == "screenshot" else (
        '<desktop-frame xmlns:st="https://accessibility.ubuntu.example.org/ns/state" '
        'xmlns:cp="https://accessibility.ubuntu.example.org/ns/component"><push-button name="Click Me!" '
        'st:showing="true" st:visible="true" st:enabled="true" cp:screencoord="(10, 20)" cp:size="(40, 20)"/>'
        '</desktop-frame>')
    return AgentCase(make_agent(cfg), 1, Observation(_png(), 160, 210, file="step_0000.png", a11y_tree=tree),
                     "The button.\n```python\npyautogui.click(10, 20)\n```", "I would rather not.")


# kind, or kind/variant
AGENT_CASES = {"uitars": uitars_case, "react": react_case, "webarena": webarena_case, "osworld": osworld_agent_case,
               "osworld/a11y_tree": lambda tmp_path: osworld_agent_case(tmp_path, "a11y_tree"),
               "osworld/screenshot_a11y_tree": lambda tmp_path: osworld_agent_case(tmp_path, "screenshot_a11y_tree")}


def test_every_agent_kind_has_a_contract_case():
    assert {k.split("/")[0] for k in AGENT_CASES} == set(AGENTS)


@pytest.fixture(params=sorted(AGENT_CASES))
def agent_case(request, tmp_path) -> AgentCase:
    return AGENT_CASES[request.param](tmp_path)


class Script:
    """A model session that gives the answers it was handed, and remembers what it was asked."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked: list[tuple[list, Params]] = []

    async def complete(self, messages, params):
        self.asked.append((messages, params))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return Reply(answer, "script")

    def close(self):
        pass


def _ask(case: AgentCase, *answers, refusals: int = 0):
    model = Script(*answers)
    episode = case.agent.start("Click the button.", model)
    turn = Turn()

    async def asking():
        await episode.ask(case.observation, turn, Budget(60.0))
        for _ in range(refusals):
            await episode.refused(turn, "HTTP 400: no such element", Budget(60.0))

    asyncio.run(asking())
    return turn, model


def _parts(message):
    return [message["content"]] if isinstance(message["content"], str) else message["content"]


def _text(part) -> str:
    return part if isinstance(part, str) else part.get("text", "") if isinstance(part, dict) else ""


def test_agent_acts_on_a_good_answer(agent_case):
    turn, model = _ask(agent_case, agent_case.good)
    assert turn.error is None and turn.tries == 1 and not turn.failed_tries
    assert turn.actions and all(isinstance(a, dict) for a in turn.actions)
    assert turn.reply.text == agent_case.good and turn.model_s >= 0
    ((messages, params),) = model.asked
    assert messages == turn.prompt and params.step == 0 and isinstance(params.answers, AnswerFormat)
    for m in messages:
        assert m["role"] in ("system", "user", "assistant")
        assert all(isinstance(p, (str, Image)) or p.get("type") == "text" for p in _parts(m))
    # The current observation is in the last message: the screenshot, the text, or the tree as OSWorld's table.
    obs, last = agent_case.observation, _parts(messages[-1])
    assert any(isinstance(p, Image) and p.png == obs.screenshot and p.file == obs.file for p in last) \
        or any(obs.text and obs.text in str(p) for p in last) \
        or any(obs.a11y_tree and tree_table(obs.a11y_tree) in _text(p) for p in last)
    if obs.a11y_tree is not None:  # whatever else it shows, an agent given a tree shows its table
        assert any(tree_table(obs.a11y_tree) in _text(p) for p in last)


def test_a_step_records_the_images_its_model_was_sent(agent_case):
    """The run folder's `images`: each image of the prompt, in order, with the sha256 of its bytes."""
    turn, model = _ask(agent_case, agent_case.bad, agent_case.good)
    sent = [p for m in model.asked[-1][0] for p in _parts(m) if isinstance(p, Image)]
    fields = turn_fields(turn)
    if not sent:  # text agents
        assert "images" not in fields
        return
    assert fields["images"] == [{"file": p.file, "sha256": hashlib.sha256(p.png).hexdigest()} for p in sent]
    assert [p for m in model.asked[0][0] for p in _parts(m) if isinstance(p, Image)] == sent, "every try the same"


def test_agent_asks_again_after_a_bad_answer_up_to_its_limit(agent_case):
    n = agent_case.retries + 1
    turn, model = _ask(agent_case, *[agent_case.bad] * n)
    assert len(model.asked) == n and turn.tries == n
    assert turn.stop == "parse_error" and turn.error and turn.actions is None
    assert [t["response"] for t in turn.failed_tries] == [agent_case.bad] * (n - 1)
    assert all(t["error"] for t in turn.failed_tries)

    turn, model = _ask(agent_case, agent_case.bad, agent_case.good)
    assert turn.error is None and turn.tries == 2 and turn.actions
    assert [t["response"] for t in turn.failed_tries] == [agent_case.bad]


def test_agent_asks_again_when_the_env_refuses_its_action(agent_case):
    turn, model = _ask(agent_case, agent_case.good, agent_case.good, refusals=1)
    assert turn.error is None and turn.tries == 2 and turn.actions
    assert "no such element" in turn.failed_tries[0]["error"] and "commands" in turn.failed_tries[0]

    n = agent_case.retries + 1
    turn, model = _ask(agent_case, *[agent_case.good] * n, refusals=n)
    assert turn.stop == "action_refused" and "no such element" in turn.error and turn.tries == n


def test_agent_lets_model_errors_through(agent_case):
    with pytest.raises(ModelError):
        _ask(agent_case, ModelError("model http://x: HTTP 503"))


def test_agent_keeps_the_conversation(agent_case):
    model = Script(agent_case.good, agent_case.good, agent_case.good)
    episode = agent_case.agent.start("Click the button.", model)
    for step in range(3):
        asyncio.run(episode.ask(agent_case.observation, Turn(), Budget(60.0)))
    (first, _), _, (third, params) = model.asked
    assert params.step == 2
    assert json.dumps([m for m in third if isinstance(m["content"], str)]).count(
        json.dumps(agent_case.good)[1:-1]) == 2  # both earlier answers went on, so both are in the prompt


def test_agents_answer_format_gives_answers_it_acts_on(agent_case):
    turn, model = _ask(agent_case, agent_case.good)
    answers = model.asked[0][1].answers
    if answers.random is not None:  # the random baseline draws answers the agent always acts on
        drawn = [answers.random(random.Random(i)) for i in range(50)]
        for text in drawn:
            turn, _ = _ask(agent_case, text)
            assert turn.error is None, text
    if answers.end is not None:  # replay's closing answer ends the episode
        turn, _ = _ask(agent_case, answers.end)
        assert turn.error is None and turn.stop
    if answers.idle is not None:  # a script run out: the answer that does nothing goes on
        turn, _ = _ask(agent_case, answers.idle)
        assert turn.error is None and not turn.stop


# ---------------------------------------------------------------- Model

def openai_case(request, tmp_path):
    fleet = request.getfixturevalue("tiny_vllm")
    served = json.loads(fleet.read_text())["servers"][0]
    cfg = _config(tmp_path, f"""
model: {{provider: openai, endpoints: ["{served['url']}/v1"], name: {served['served_model_name']},
        guided: true, record_logprobs: true, max_tokens: 96, retries: 0}}
""")
    return make_model(cfg, {}), unreachable_openai(tmp_path)


def unreachable_openai(tmp_path):
    """The openai provider, asking a port where no server listens."""
    cfg = _config(tmp_path, "model: {provider: openai, endpoints: ['http://127.0.0.1:9/v1'], retries: 0}\n")
    return make_model(cfg, {})


def random_case(request, tmp_path):
    return make_model(_config(tmp_path, "model: {provider: random, seed: 5}\n"), {}), None


def replay_case(request, tmp_path):
    run = tmp_path / "recorded"
    (run / "trajectories/t/0_0").mkdir(parents=True)
    line = {"task_id": "t", "domain": None, "sample": 0, "attempt": 0, "outcome": "failure", "reward": 0.0,
            "score": 0.0, "steps": 1, "stop_reason": "max_steps", "duration_s": 1.0, "error": None,
            "traj": "trajectories/t/0_0"}
    (run / "episodes.jsonl").write_text(json.dumps(line) + "\n")
    step = {"step": 0, "response": "Thought: go.\nAction: click(start_box='(5,5)')"}
    (run / "trajectories/t/0_0/traj.jsonl").write_text(json.dumps(step) + "\n")
    return make_model(_config(tmp_path, f"model: {{provider: replay, replay_run: {json.dumps(str(run))}}}\n"), {}), None


def script_case(request, tmp_path):
    script = tmp_path / "answers.json"
    script.write_text(json.dumps({"t": ["Thought: go.\nAction: click(start_box='(5,5)')"]}))
    return make_model(_config(tmp_path, f"model: {{provider: script, script: {json.dumps(str(script))}}}\n"), {}), None


MODEL_CASES = {"openai": openai_case, "random": random_case, "replay": replay_case, "script": script_case}
# The providers that ask a server, each asking one that does not answer (random and replay ask nobody).
UNREACHABLE = {"openai": unreachable_openai}


def test_every_provider_has_a_contract_case():
    assert set(MODEL_CASES) == set(PROVIDERS)
    # a provider has an unreachable case exactly when its contract case has a server to lose
    assert set(UNREACHABLE) <= set(PROVIDERS) and {"random", "replay", "script"}.isdisjoint(UNREACHABLE)


@pytest.fixture(params=[pytest.param(n, marks=pytest.mark.slow) if n == "openai" else n for n in sorted(MODEL_CASES)])
def model_case(request, tmp_path):
    return MODEL_CASES[request.param](request, tmp_path)


def _uitars_request(step: int) -> tuple[list, Params]:
    """A UI-TARS step's request, as the agent makes it."""
    agent = make_agent(Config())
    model = Script("Thought: x\nAction: wait()")
    asyncio.run(agent.start("Click the button.", model).ask(Observation(_png(), 160, 210, file="s.png"), Turn(),
                                                            Budget(60.0)))
    messages, params = model.asked[0]
    params.step = step
    return messages, params


def test_model_answers_what_the_agent_asked_for(model_case):
    model, _ = model_case
    session = model.session("t", 0)
    try:
        for step in range(2):  # the recorded step, then past the end of a recording
            messages, params = _uitars_request(step)
            reply = asyncio.run(session.complete(messages, params))
            assert isinstance(reply, Reply) and isinstance(reply.text, str)
            assert reply.endpoint is None or isinstance(reply.endpoint, str)
            assert parse_response(reply.text, 160, 210).actions  # the grammar, the format or the recording held
            # What resized the prompt's images: the server's processor, as far as the provider knows it (its
            # numbers null when unknown); a provider that asks no model has none to say.
            processor = reply.image_processor
            assert processor is None or set(processor) == set(UNKNOWN) and processor["resized_by"] == "server"
            if reply.token_ids is not None:  # the trainer's view: one logprob per sampled token
                assert len(reply.token_ids) == len(reply.logprobs) > 0
                assert all(isinstance(t, int) for t in reply.token_ids) and all(lp <= 0 for lp in reply.logprobs)
    finally:
        session.close()


def test_model_stops_asking_when_the_run_stops(model_case):
    model, _ = model_case
    messages, params = _uitars_request(0)
    params.budget = Budget(60.0, deadline=time.monotonic() - 1, should_stop=lambda: True)
    session = model.session("t", 0)
    try:
        reply = asyncio.run(session.complete(messages, params))  # a model that asks nobody may answer at once
        assert isinstance(reply.text, str)
    except (Stopped, EpisodeTimeout):
        pass
    finally:
        session.close()


@pytest.mark.parametrize("provider", sorted(UNREACHABLE))
def test_an_unreachable_model_server_is_a_model_error(provider, tmp_path):
    dead = UNREACHABLE[provider](tmp_path)
    messages, params = _uitars_request(0)
    session = dead.session("t", 0)
    with pytest.raises(ModelError):
        asyncio.run(session.complete(messages, params))
    session.close()
