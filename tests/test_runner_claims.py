"""A runner told to stop as it claims a pair gives the pair back unplayed: no attempt starts, no
episode line is written, and the pair is pending again as it was. Two runner processes met this in
a stop: one put its interrupted pair back, the other claimed it before it saw the stop, started it
and wrote a line for an attempt that never began."""

import threading

from cua_cli.config.loading import load_config
from cua_cli.rollout.runner import Runner, RunnerSpec
from cua_cli.runfolder.jsonl import read_lines
from cua_cli.runfolder.writer import RunDir


class NeverPlays:
    """The runner's player (its Plays seam): a test failure if any attempt starts."""

    def __init__(self):
        self.played = []

    async def play(self, item, task, traj, interrupt):
        self.played.append(item["task_id"])


def test_a_pair_claimed_as_the_run_stops_goes_back_unplayed(tmp_path):
    config = tmp_path / "exp.yaml"
    config.write_text(f"""
run: {{name: claims, results_dir: {tmp_path}/results}}
tasks: {{kind: jsonl, jsonl: {tmp_path}/tasks.jsonl}}
env: {{url: "http://127.0.0.1:9"}}
model: {{provider: random}}
runner: {{num_envs: 2, processes: 1}}
""")
    (tmp_path / "tasks.jsonl").write_text('{"task_id": "a", "domain": "d"}\n{"task_id": "b", "domain": "d"}\n')
    cfg = load_config(str(config))
    run = RunDir.create(tmp_path / "results", "claims", cfg.to_dict())
    run.queue(3, 600).enqueue([{"task_id": "a", "domain": "d"}, {"task_id": "b", "domain": "d"}], 1)
    player = NeverPlays()
    runner = Runner(RunnerSpec(cfg, str(run.path), "http://127.0.0.1:9", {}, 2, False), player=player)
    stop = threading.Event()
    claim = runner.queue.claim

    def claim_as_the_run_stops():
        item = claim()
        stop.set()  # the rollout's stop flag, set while this runner was claiming
        return item
    runner.queue.claim = claim_as_the_run_stops

    runner.run(stop)
    assert player.played == []
    assert read_lines(run.episodes) == []
    queue = run.queue(3, 600)
    assert queue.counts()["pending"] == 2 and queue.counts()["claimed"] == 0
    items = [queue.claim(), queue.claim()]
    assert sorted((i["task_id"], i["attempt"], i["errors"]) for i in items) == [("a", 0, 0), ("b", 0, 0)]
