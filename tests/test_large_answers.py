"""A model answer of tens of MB through `cua rollout`: the agent's parse error (it is a chat
completion), each try's answer stored once, cut at records.MAX_RESPONSE_CHARS and marked,
and a replay of the cut answers ends as the whole ones did."""

import json

import pytest
from helpers.cli import run_cua
from helpers.servers import ClusterStandIn, ModelStandIn

from cua_cli.runfolder.jsonl import read_lines
from cua_cli.runfolder.records import MAX_RESPONSE_CHARS

ANSWER = "Thought: " + "x" * 20_000_000 + "\nAction: wait()"


def _steps(run):
    (rec,) = read_lines(run / "episodes.jsonl")
    return rec, read_lines(run / rec["traj"] / "traj.jsonl")


@pytest.mark.slow  # answers of tens of megabytes through a whole rollout
def test_a_huge_answer_is_stored_once_per_try_cut_and_marked(tmp_path):
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"task_id": "a", "instruction": "Click."}) + "\n")
    with ModelStandIn(ANSWER) as model, ClusterStandIn() as env:
        (tmp_path / "exp.yaml").write_text(f"""
run: {{name: big, results_dir: results}}
tasks: {{kind: jsonl, jsonl: tasks.jsonl}}
env: {{url: "{env.url}"}}
model: {{provider: openai, endpoints: ["{model.url}/v1"], name: m, image_uuids: false, record_prompt: true}}
agent: {{parse_retries: 2}}
runner: {{num_envs: 1, max_steps: 2, max_attempts: 1}}
""")
        r = run_cua("rollout", "exp.yaml", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        (run,) = (tmp_path / "results").iterdir()
        rec, (step,) = _steps(run)
        assert rec["outcome"] == "failure" and rec["stop_reason"] == "parse_error"  # the agent's: a whole completion
        assert model.requests["/v1/chat/completions"] == 3
        traj = run / rec["traj"] / "traj.jsonl"
        assert traj.stat().st_size < 4 * MAX_RESPONSE_CHARS  # three answers of 20 MB, each cut
        for answer in [step, *step["failed_tries"]]:
            assert answer["response"] == ANSWER[:MAX_RESPONSE_CHARS]
            assert answer["response_truncated"] is True and answer["response_chars"] == len(ANSWER)
        assert len(step["failed_tries"]) == 2 and "x" * 1000 not in json.dumps(step["prompt"])

        r = run_cua("rollout", "exp.yaml", "--set", "model.provider=replay", "--set", f"model.replay_run={run}",
                    "--set", "run.results_dir=replayed", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    (replayed,) = (tmp_path / "replayed").iterdir()
    rec, (step,) = _steps(replayed)
    assert rec["stop_reason"] == "parse_error" and step["error"] == "parse: response longer than 65536 characters"
    assert "response_truncated" not in step  # the cut answer is short enough to store whole
