"""The AgentGym env kind against stand-ins of AgentGym's servers (tests/helpers/agentgym_standins.py
stands for each real server, which cannot run here), and a whole rollout through the CLI."""

import json

import pytest
from helpers.agentgym_standins import SUCCESS_REWARD, AgentGymStandIn, partial_action, task_marker, winning_action
from helpers.cli import run_cua

from cua_cli._util.budget import Budget
from cua_cli.envs.agentgym import AgentGymEnv
from cua_cli.errors import EnvError, TaskRefused
from cua_cli.runfolder.jsonl import read_lines
from cua_cli.runfolder.names import pair_key
from cua_cli.tasks import Task

# One env of each protocol family.
FAMILIES = ["textcraft", "babyai", "sciworld", "alfworld", "webshop", "sqlgym", "searchqa", "maze", "wordle",
            "weather", "webarena"]
# What cua sends for a winning action written after `Action:` (the tool envs' action is the text after the label).
SENT = {"weather": lambda a: a.removeprefix("Action: ")}


def _task(env: str, i: int) -> Task:
    return Task(f"{env}@{i}", env, None, {"agentgym": {"env": env, "idx": i}})


def _action(env: str, i: int) -> str:
    """The action a text agent would put after `Action:` (or in WebArena's fence) to win task i."""
    win = winning_action(env, i)
    if env == "webarena":
        return win.split("```")[1]
    return SENT.get(env, lambda a: a)(win)


@pytest.mark.parametrize("env", FAMILIES)
def test_an_episode_on_each_server_family(env):
    budget = Budget(10.0)
    with AgentGymStandIn(env, tasks=10) as url:
        client = AgentGymEnv(url, env, retries=0)
        session = client.allocate(_task(env, 3), budget)
        assert task_marker(3) in session.observe(budget).text  # the right task was loaded
        sent = []
        if env != "sqlgym":  # SQLGym's first query ends the episode
            miss = session.act(["look around"], budget, sent)
            assert not miss.done and len(sent) == 1
            assert session.observe(budget).text  # the step's observation, the env's answer to a bad action
        win = session.act([_action(env, 3)], budget, sent)
        assert win.done
        result = session.evaluate(budget)
        assert result.score == 1.0 and result.reward == pytest.approx(float(SUCCESS_REWARD[env]))
        session.release(budget)


def test_a_partial_score_is_scaled_and_is_no_success():
    with AgentGymStandIn("sciworld") as url:
        session = AgentGymEnv(url, "sciworld").allocate(_task("sciworld", 2), Budget(10.0))
        result = session.act([partial_action(2)], Budget(10.0), [])
        assert not result.done
        assert session.evaluate(Budget(10.0)).score == 0.5  # SciWorld scores 0-100


def test_webarena_rewards_only_the_step_that_ends_the_episode():
    with AgentGymStandIn("webarena") as url:
        session = AgentGymEnv(url, "webarena").allocate(_task("webarena", 1), Budget(10.0))
        sent = []
        session.act(["click [1]"], Budget(10.0), sent)
        assert sent == ["```click [1]```"]  # the fence WebArena's server reads
        assert session.evaluate(Budget(10.0)).score == 0.0  # a browser action that ran is no success


@pytest.mark.parametrize("fault", ["down", "500", "422", "timeout_reset"])
def test_infrastructure_faults_are_env_errors(fault):
    env = "webarena" if fault == "timeout_reset" else "babyai"
    server = AgentGymStandIn(env)
    with server as url:
        if fault == "down":
            url = "http://127.0.0.1:9"
        elif fault == "timeout_reset":
            server.timeout_next_reset()
        else:
            server.fail_next("reset", n=None, status=int(fault))
        with pytest.raises(EnvError):
            AgentGymEnv(url, env, retries=1).allocate(_task(env, 1), Budget(10.0))
        if fault != "down":  # the instance was closed again, where the server can close
            assert not server.requests_to("close") or len(server.requests_to("close")) == 1


def test_an_error_answer_is_an_env_error():
    with AgentGymStandIn("babyai") as url:  # BabyAI answers a step after done with {"error": ...}
        session = AgentGymEnv(url, "babyai").allocate(_task("babyai", 1), Budget(10.0))
        session.act([_action("babyai", 1)], Budget(10.0), [])
        with pytest.raises(EnvError, match="finished"):
            session.act(["turn left"], Budget(10.0), [])


def test_a_task_of_another_env_is_a_bad_task():
    with AgentGymStandIn("textcraft") as url:
        with pytest.raises(TaskRefused):
            AgentGymEnv(url, "textcraft").allocate(_task("babyai", 1), Budget(10.0))


def _replay_run(tmp_path, answers: dict) -> str:
    """A recorded run whose pair (task, 0) answered `answers[task]` at step 0."""
    run = tmp_path / "recorded"
    lines = []
    for task, answer in answers.items():
        traj = f"trajectories/{task}/0_0"
        (run / traj).mkdir(parents=True)
        (run / traj / "traj.jsonl").write_text(json.dumps({"step": 0, "response": answer}) + "\n")
        lines.append({"task_id": task, "domain": "textcraft", "sample": 0, "attempt": 0, "outcome": "success",
                      "reward": 1.0, "score": 1.0, "steps": 1, "stop_reason": "env_done", "duration_s": 1.0,
                      "error": None, "traj": traj})
    (run / "episodes.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(run)


def test_a_rollout_against_an_agentgym_server(write, tmp_path):
    """Through the CLI: a won task, a lost one, and a server error that the queue retries."""
    server = AgentGymStandIn("textcraft", tasks=5)
    with server as url:
        recorded = _replay_run(tmp_path, {"textcraft@0": "Thought: easy.\nAction: win 0",
                                          "textcraft@1": "Thought: hmm.\nAction: get 1 stick"})
        server.fail_next("create", n=1)  # the first allocation fails once: retried, never an agent failure
        cfg = write("ag.yaml", f"""
run: {{name: ag, results_dir: {tmp_path}/results}}
tasks: {{kind: agentgym, agentgym: {{indices: "0-1"}}}}
env: {{kind: agentgym, url: "{url}", retries: 0, agentgym: {{env: textcraft}}}}
agent: {{kind: react}}
model: {{provider: replay, replay_run: {json.dumps(recorded)}}}
runner: {{num_envs: 1, max_steps: 1}}
""")
        r = run_cua("rollout", str(cfg))
        assert r.returncode == 0, r.stderr
    run = next((tmp_path / "results").iterdir())
    final = {}
    for rec in read_lines(run / "episodes.jsonl"):
        final[rec["task_id"]] = rec
    assert final["textcraft@0"]["outcome"] == "success" and final["textcraft@0"]["stop_reason"] == "env_done"
    assert final["textcraft@1"]["outcome"] == "failure" and final["textcraft@1"]["stop_reason"] == "max_steps"
    errors = [rec for rec in read_lines(run / "episodes.jsonl") if rec["outcome"] == "error"]
    assert len(errors) == 1 and errors[0]["stop_reason"] == "env_error" and errors[0]["attempt"] == 0
    steps = list(read_lines(run / final["textcraft@0"]["traj"] / "traj.jsonl"))
    assert steps[0]["screenshot"] is None and task_marker(0) in steps[0]["observation"]
    assert steps[0]["action"] == [{"type": "text", "text": "win 0"}] and steps[0]["commands"] == ["win 0"]
    assert json.loads((run / "run.json").read_text())["format_version"] == 2
    stats = run_cua("stats", str(run), "--format", "json")
    assert stats.returncode == 0 and json.loads(stats.stdout)["runs"][0]["success_rate"] == 0.5


@pytest.mark.slow  # real MiniWoB++ in Chromium
def test_the_local_server_plays_agentgym_webarena_on_real_miniwob(write, tmp_path):
    """`env.url: local` with env.kind agentgym: cua starts its own env server with AgentGym's WebArena
    routes over real MiniWoB++, and the webarena agent's fenced click wins click-test (button [3])."""
    recorded = _replay_run(tmp_path, {"webarena@0": "The button is [3]. In summary, the next action I will "
                                                    "perform is ```click [3]```",
                                      "webarena@1": "Nothing to do. In summary, the next action I will perform "
                                                    "is ```stop [done]```"})
    cfg = write("local.yaml", f"""
run: {{name: local-ag, results_dir: {tmp_path}/results}}
tasks: {{kind: agentgym, agentgym: {{indices: "0-1"}}}}
env:
  kind: agentgym
  agentgym: {{env: webarena}}
  local: {{max_envs: 1, agentgym_tasks: [click-test], agentgym_seeds: "0-1"}}
agent: {{kind: webarena}}
model: {{provider: replay, replay_run: {json.dumps(recorded)}}}
runner: {{num_envs: 1, max_steps: 2}}
""")
    r = run_cua("rollout", str(cfg))
    assert r.returncode == 0, r.stderr
    run = next((tmp_path / "results").iterdir())
    final = {rec["task_id"]: rec for rec in read_lines(run / "episodes.jsonl")}
    won, stopped = final["webarena@0"], final["webarena@1"]
    assert won["outcome"] == "success" and won["reward"] == 1.0 and won["stop_reason"] == "env_done"
    assert stopped["outcome"] == "failure" and stopped["stop_reason"] == "finished" and stopped["steps"] == 1
    (step,) = read_lines(run / won["traj"] / "traj.jsonl")
    assert "[3] button 'Click Me!'" in step["observation"] and "OBJECTIVE: Click the button." in step["observation"]
    assert step["commands"] == ["```click [3]```"] and step["action"][0]["type"] == "click"
    assert run_cua("view", str(run)).returncode == 0
    page = (run / "view" / "episodes" / f"{pair_key('webarena@0', 0)}.html").read_text()
    assert '<pre class="observation">' in page and "[3] button &#x27;Click Me!&#x27;" in page  # text, not a picture
