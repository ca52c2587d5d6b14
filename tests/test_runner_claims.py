"""How a runner claims and files pairs.

A runner told to stop as it claims gives the pairs back unplayed: no attempt starts, no episode line
is written, and each pair is pending again as it was. Two runner processes met this in a stop: one
put its interrupted pair back, the other claimed it before it saw the stop, started it and wrote a
line for an attempt that never began.

Free slots are filled by claims of several pairs at once, and an ended attempt's slot is free
before its pair is filed (a thousand attempts ending together, filed one by one, held every slot's
next claim behind all of them); every ended attempt is still filed before the runner returns.
"""

import asyncio
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


class PlaysUntilTheRunStops:
    """The runner's player (its Plays seam): each attempt ends as a failure after no step, at once for
    task "a", the others once the run stops."""

    def __init__(self):
        self.started = []

    async def play(self, item, task, traj, interrupt):
        self.started.append(item["task_id"])
        while item["task_id"] != "a" and not interrupt.is_set():
            await asyncio.sleep(0.01)
        return {"task_id": item["task_id"], "sample": item["sample"], "attempt": item["attempt"],
                "outcome": "failure", "reward": 0.0, "steps": 0, "stop_reason": "max_steps", "error": None}


def make_runner(tmp_path, tasks: list[str], slots: int, player) -> tuple[Runner, RunDir]:
    config = tmp_path / "exp.yaml"
    config.write_text(f"""
run: {{name: claims, results_dir: {tmp_path}/results}}
tasks: {{kind: jsonl, jsonl: {tmp_path}/tasks.jsonl}}
env: {{url: "http://127.0.0.1:9"}}
model: {{provider: random}}
runner: {{num_envs: {slots}, processes: 1}}
""")
    (tmp_path / "tasks.jsonl").write_text("".join(f'{{"task_id": "{t}", "domain": "d"}}\n' for t in tasks))
    cfg = load_config(str(config))
    run = RunDir.create(tmp_path / "results", "claims", cfg.to_dict())
    run.queue(3, 600).enqueue([{"task_id": t, "domain": "d"} for t in tasks], 1)
    return Runner(RunnerSpec(cfg, str(run.path), "http://127.0.0.1:9", {}, slots, False), player=player), run


def test_a_pair_claimed_as_the_run_stops_goes_back_unplayed(tmp_path):
    player = NeverPlays()
    runner, run = make_runner(tmp_path, ["a", "b"], 2, player)
    stop = threading.Event()
    claim_some = runner.queue.claim_some

    def claim_as_the_run_stops(n):
        items = claim_some(n)
        stop.set()  # the rollout's stop flag, set while this runner was claiming
        return items
    runner.queue.claim_some = claim_as_the_run_stops

    runner.run(stop)
    assert player.played == []
    assert read_lines(run.episodes) == []
    queue = run.queue(3, 600)
    assert queue.counts()["pending"] == 2 and queue.counts()["claimed"] == 0
    items = [queue.claim(), queue.claim()]
    assert sorted((i["task_id"], i["attempt"], i["errors"]) for i in items) == [("a", 0, 0), ("b", 0, 0)]


def test_free_slots_are_filled_by_one_claim_and_every_ended_attempt_is_filed_though_the_run_stops(tmp_path):
    player = PlaysUntilTheRunStops()
    runner, run = make_runner(tmp_path, ["a", "b", "c", "d"], 4, player)
    stop = threading.Event()
    claim_some, finish = runner.queue.claim_some, runner.queue.finish
    asked = []

    def claim_counted(n):
        asked.append(n)
        return claim_some(n)

    def finish_as_the_run_stops(item, rec, **kw):
        stop.set()  # the run stops as a is filed: b, c and d end after that, and are filed all the same
        return finish(item, rec, **kw)
    runner.queue.claim_some, runner.queue.finish = claim_counted, finish_as_the_run_stops

    runner.run(stop)
    assert asked[0] == 4, "four free slots, one hand-off to the queue's thread"
    assert sorted(player.started) == ["a", "b", "c", "d"]
    assert sorted(r["task_id"] for r in read_lines(run.episodes)) == ["a", "b", "c", "d"]
    assert run.queue(3, 600).counts() == {"pending": 0, "claimed": 0, "done": 4, "failed": 0}
