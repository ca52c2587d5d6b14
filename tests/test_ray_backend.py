"""`runner.backend: ray` on a real multi-node Ray cluster (Ray's own test utility starts the nodes
on this machine), against the real built-in MiniWoB env server."""

import json
import os
import re
import signal
import threading
import time
from http.server import HTTPServer, SimpleHTTPRequestHandler
from pathlib import Path

import pytest
from helpers import desktops
from helpers.cli import finish, kill_group, run_cua, start_cua
from helpers.envserver import start_env_server, stop_env_server
from helpers.net import free_port
from helpers.processes import signal_group
from helpers.waiting import wait_for

from cua_cli.runfolder.jsonl import read_lines
from cua_cli.runfolder.leases import still_held

pytestmark = pytest.mark.slow  # a real 3-node Ray cluster


@pytest.fixture(scope="module")
def env_server():
    # Runners lost or stopped at once give their envs back through the run's leases.jsonl; the idle
    # timeout is the env server's own guard (as the README asks of every one) should one slip by.
    server, url = start_env_server(max_envs=4, idle_timeout_s=60)
    yield server, url
    stop_env_server(server)


@pytest.fixture(scope="module")
def env_url(env_server):
    return env_server[1]


def _config(tmp_path, ray_cluster, env_url, seeds=6, steps=3, backend="ray", num_cpus=1):
    c, _ = ray_cluster
    cfg = tmp_path / f"{backend}.yaml"
    cfg.write_text(f"""
run: {{name: {backend}, results_dir: {tmp_path}/results-{backend}}}
tasks: {{kind: miniwob, miniwob: {{names: [click-test-2], seeds: {list(range(seeds))}}}}}
env: {{url: "{env_url}"}}
model: {{provider: random, seed: 3}}
runner: {{num_envs: 4, max_steps: {steps}, backend: {backend}, ray: {{address: "{c.address}", actors: 2, num_cpus: {num_cpus}}}}}
""")
    return cfg


def _run(tmp_path, backend="ray"):
    (run,) = (tmp_path / f"results-{backend}").iterdir()
    return run


def _done(tmp_path) -> list[str]:
    """The names in the run's queue/done; none before the run folder and its queue are made."""
    folders = list(tmp_path.glob("results-ray/*/queue/done"))
    return [f.name for f in folders[0].iterdir()] if folders else []


def _form(run):
    """What a run folder holds, without its values: files by kind, and the keys of every record."""
    lines = read_lines(run / "episodes.jsonl")
    steps = [s for e in lines for s in read_lines(run / e["traj"] / "traj.jsonl")]
    files = {os.path.relpath(os.path.join(d, f), run).replace(os.sep, "/") for d, _, fs in os.walk(run) for f in fs}
    kinds = {re.sub(r"[0-9]+", "N", re.sub(r"^trajectories/[^/]+/[^/]+/", "TRAJ/", f)) for f in files
             if not f.startswith("queue/")}
    return (kinds, {frozenset(e) for e in lines}, {frozenset(s) for s in steps},
            sorted(json.loads((run / "run.json").read_text())))


def test_a_rollout_on_ray_writes_the_same_run_folder_as_a_local_one(tmp_path, ray_cluster, env_url):
    r = run_cua("rollout", str(_config(tmp_path, ray_cluster, env_url)), timeout=600)
    assert r.returncode == 0, r.stderr
    run = _run(tmp_path)
    lines = read_lines(run / "episodes.jsonl")
    assert sorted((e["task_id"], e["sample"]) for e in lines) == [(f"click-test-2@{i}", 0) for i in range(6)]
    assert all(e["outcome"] in ("success", "failure") for e in lines)
    for e in lines:
        steps = read_lines(run / e["traj"] / "traj.jsonl")
        assert len(steps) == e["steps"] and [s["step"] for s in steps] == list(range(e["steps"]))
        assert all((run / e["traj"] / s["screenshot"]).read_bytes().startswith(b"\x89PNG") for s in steps)
    assert os.listdir(run / "queue" / "claimed") == [] and len(os.listdir(run / "queue" / "done")) == 6
    assert run_cua("stats", str(run)).returncode == 0

    local = run_cua("rollout", str(_config(tmp_path, ray_cluster, env_url, backend="local")), timeout=600)
    assert local.returncode == 0, local.stderr
    assert _form(run) == _form(_run(tmp_path, "local"))


def test_servers_a_node_cannot_reach_stop_the_rollout_at_start_with_a_clear_error(tmp_path, ray_cluster):
    closed = f"http://127.0.0.1:{free_port()}"
    r = run_cua("rollout", str(_config(tmp_path, ray_cluster, closed)), timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "cannot reach env.url " + closed in r.stderr
    assert os.listdir(_run(tmp_path) / "queue" / "claimed") == []


def test_the_local_env_server_and_a_cluster_nobody_runs_are_refused_clearly(tmp_path, ray_cluster, env_url):
    r = run_cua("rollout", str(_config(tmp_path, ray_cluster, "local")), timeout=60)
    assert r.returncode == 2 and "env.url" in r.stderr and "cua env-server" in r.stderr, r.stderr
    address = f"127.0.0.1:{free_port()}"
    r = run_cua("rollout", str(_config(tmp_path, ray_cluster, env_url)), "--ray", address, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"runner.ray.address {address}: no Ray cluster answers there" in r.stderr


def _interrupt(cfg, tmp_path, *args, times=1):
    """Start a rollout, press Ctrl-C `times` times once an episode has ended; its run folder."""
    p = start_cua("rollout", str(cfg), *args)
    try:
        before = len(read_lines(_run(tmp_path) / "episodes.jsonl")) if args else 0
        wait_for(lambda: (tmp_path / "results-ray").exists() and any(
            len(read_lines(d / "episodes.jsonl")) > before for d in (tmp_path / "results-ray").iterdir()
            if (d / "episodes.jsonl").exists()), what="an episode")
        for _ in range(times):
            p.send_signal(signal.SIGINT)
            time.sleep(0.5)
        out, err = finish(p, 300)
    finally:
        kill_group(p)
    assert p.returncode == 130, err
    run = _run(tmp_path)
    assert os.listdir(run / "queue" / "claimed") == []
    return run


def test_ctrl_c_twice_then_once_then_resume_finishes_every_pair_once(tmp_path, ray_cluster, env_url):
    cfg = _config(tmp_path, ray_cluster, env_url, seeds=12, steps=6)
    run = _interrupt(cfg, tmp_path, times=2)  # the actors are killed: their claims go back, uncounted
    pending = [json.loads(f.read_text()) for f in (run / "queue" / "pending").glob("*.json")]
    assert pending and all(p["errors"] == 0 for p in pending)

    _interrupt(cfg, tmp_path, "--resume", str(run))  # running episodes end as interrupted
    assert all(e["outcome"] == "error" for e in read_lines(run / "episodes.jsonl") if e["stop_reason"] == "interrupted")
    r = run_cua("rollout", str(cfg), "--resume", str(run), timeout=600)
    assert r.returncode == 0, r.stderr
    finals = {}
    for e in read_lines(run / "episodes.jsonl"):
        finals[(e["task_id"], e["sample"])] = e
    assert len(finals) == 12 and all(e["outcome"] in ("success", "failure") for e in finals.values())


def test_a_run_file_linked_out_stops_the_ray_rollout_and_a_resume_plays_every_pair(tmp_path, ray_cluster, env_url):
    """The driver's runner refuses to file through a link planted for episodes.jsonl: the rollout stops
    (its actors too) with the file named, writes nothing outside, and leaves its pairs claimed, not lost."""
    cfg = _config(tmp_path, ray_cluster, env_url, seeds=6, steps=3)
    outside = tmp_path / "outside"
    outside.mkdir()
    p = start_cua("rollout", str(cfg))
    try:
        wait_for(lambda: (tmp_path / "results-ray").exists() and any(
            os.listdir(d / "queue" / "claimed") for d in (tmp_path / "results-ray").iterdir()
            if (d / "queue" / "claimed").is_dir()), what="a claim")
        run = _run(tmp_path)
        episodes, kept = run / "episodes.jsonl", tmp_path / "kept.jsonl"
        if episodes.exists():
            os.replace(episodes, kept)  # lines filed before the link are put back for the resume
        episodes.symlink_to(outside / "sentinel")
        out, err = finish(p, 300)
    finally:
        kill_group(p)
    assert p.returncode == 2 and "Traceback" not in err, err
    assert f"{episodes}: the file is a link; not written" in err, err
    assert os.listdir(outside) == []
    assert os.listdir(run / "queue" / "claimed"), "the pairs whose lines were refused stay claimed"

    episodes.unlink()
    if kept.exists():
        os.replace(kept, episodes)
    r = run_cua("rollout", str(cfg), "--resume", str(run), timeout=600)
    assert r.returncode == 0, r.stderr
    finals = {(e["task_id"], e["sample"]): e for e in read_lines(episodes)}
    assert len(finals) == 6 and all(e["outcome"] in ("success", "failure") for e in finals.values())


def test_watch_plays_task_files_dropped_in_later(tmp_path, ray_cluster, env_url):
    cfg = _config(tmp_path, ray_cluster, env_url, seeds=2, steps=2)
    p = start_cua("rollout", str(cfg), "--watch", "--set", "runner.poll_s=0.2")
    try:
        wait_for(lambda: len(_done(tmp_path)) == 2, what="the first two pairs")
        time.sleep(1)
        assert p.poll() is None, "--watch keeps running on an empty queue"
        task = {"task_id": "dropped/../one", "domain": "click-test-2", "config": {"miniwob": "click-test-2", "seed": 9},
                "evaluator": {"func": "miniwob_reward"}, "sample": 0}
        (_run(tmp_path) / "queue" / "pending" / "dropped.json").write_text(json.dumps(task))
        (_run(tmp_path) / "queue" / "pending" / "bad.json").write_text(json.dumps({"task_id": "bad", "domain": 5}))
        wait_for(lambda: len(_done(tmp_path)) == 3, what="the dropped pair")
        p.send_signal(signal.SIGINT)
        out, err = finish(p, 120)
    finally:
        kill_group(p)
    assert p.returncode == 130, err
    lines = {e["task_id"]: e for e in read_lines(_run(tmp_path) / "episodes.jsonl")}
    assert lines["dropped/../one"]["outcome"] in ("success", "failure") and lines["dropped/../one"]["steps"] >= 1
    assert lines["bad"]["stop_reason"] == "bad_task"
    assert not (_run(tmp_path) / "trajectories" / "dropped").exists(), "task ids never become raw paths"


def test_a_node_that_dies_mid_run_loses_no_pair_and_leaves_no_claim(tmp_path, ray_cluster, env_url):
    c, workers = ray_cluster
    cfg = _config(tmp_path, ray_cluster, env_url, seeds=16, steps=6)
    p = start_cua("rollout", str(cfg))
    try:
        wait_for(lambda: (tmp_path / "results-ray").exists() and any(
            (d / "episodes.jsonl").exists() for d in (tmp_path / "results-ray").iterdir()), what="a first episode")
        victim = workers.pop()
        c.remove_node(victim)  # its runner actor dies with it, mid-episode
        workers.append(c.add_node())
        out, err = finish(p, 400)
    finally:
        kill_group(p)
    assert p.returncode == 0 and "Traceback" not in err, err
    run = _run(tmp_path)
    lines = read_lines(run / "episodes.jsonl")
    final = {}
    for e in lines:
        final.setdefault((e["task_id"], e["sample"]), []).append(e)
    assert len(final) == 16 and os.listdir(run / "queue" / "claimed") == []
    lost = [e for e in lines if e["stop_reason"] == "runner_lost"]
    assert lost, "the removed node's attempts end as runner_lost"
    for attempts in final.values():
        assert attempts[-1]["outcome"] in ("success", "failure")  # each lost attempt was played again
        assert len({a["attempt"] for a in attempts}) == len(attempts)  # no attempt written twice


def test_a_node_lost_with_no_room_for_a_replacement_leaves_the_run_to_the_survivors(tmp_path, ray_cluster, env_url):
    """Each actor takes a whole worker, so the dead one's replacement finds no place: the run must still end."""
    c, workers = ray_cluster
    cfg = _config(tmp_path, ray_cluster, env_url, seeds=12, steps=4, num_cpus=2)
    p = start_cua("rollout", str(cfg))
    try:
        wait_for(lambda: (tmp_path / "results-ray").exists() and any(
            (d / "episodes.jsonl").exists() for d in (tmp_path / "results-ray").iterdir()), what="a first episode")
        c.remove_node(workers.pop())
        out, err = finish(p, 400)
    finally:
        kill_group(p)
        workers.append(c.add_node())
    assert p.returncode == 0 and "Traceback" not in err, err
    run = _run(tmp_path)
    final = {}
    for e in read_lines(run / "episodes.jsonl"):
        final[(e["task_id"], e["sample"])] = e
    assert len(final) == 12 and all(e["outcome"] in ("success", "failure") for e in final.values())
    assert os.listdir(run / "queue" / "claimed") == [] and os.listdir(run / "queue" / "pending") == []


def _actor_pids(node) -> list[int]:
    """The runner actors' worker processes of a node: children of its raylet that Ray titled so."""
    raylet = node.raylet_pid
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            status = (proc / "status").read_text()
            title = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if f"\nPPid:\t{raylet}\n" in status and title.startswith(b"ray::RunnerActor"):
            pids.append(int(proc.name))
    return pids


def _stopped(pid: int) -> bool:
    try:
        return "\nState:\tT" in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_an_actor_that_hangs_unnoticed_by_ray_is_lost_and_its_pairs_played_elsewhere(tmp_path, ray_cluster,
                                                                                       env_server, env_url):
    """A worker frozen (SIGSTOP) looks alive to Ray and its stream just goes quiet: after
    runner.ray.lost_after_s without a step or an answer to a ping it is lost, killed and replaced."""
    _, workers = ray_cluster
    cfg = _config(tmp_path, ray_cluster, env_url, seeds=12, steps=4)
    p = start_cua("rollout", str(cfg), "--set", "runner.ray.lost_after_s=6")
    frozen = []
    try:
        wait_for(lambda: (tmp_path / "results-ray").exists() and any(
            (d / "episodes.jsonl").exists() for d in (tmp_path / "results-ray").iterdir()), what="a first episode")
        # Wherever Ray placed them (SPREAD is a preference): one actor's worker is frozen.
        wait_for(lambda: p.poll() is not None or [pid for w in workers for pid in _actor_pids(w)],
                 what="the runner actors' workers")
        assert p.poll() is None, "the run ended before an actor could be frozen"
        frozen = [pid for w in workers for pid in _actor_pids(w)][:1]
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        out, err = finish(p, 300)
    finally:
        kill_group(p)
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    assert p.returncode == 0 and "Traceback" not in err, err
    lines = read_lines(_run(tmp_path) / "episodes.jsonl")
    assert any(e["stop_reason"] == "runner_lost" for e in lines), "the frozen actor's attempts end as runner_lost"
    final = {(e["task_id"], e["sample"]): e for e in lines}
    assert len(final) == 12 and all(e["outcome"] in ("success", "failure") for e in final.values())
    assert os.listdir(_run(tmp_path) / "queue" / "claimed") == []
    wait_for(lambda: not any(_stopped(pid) for pid in frozen), what="the lost actor killed, not left frozen")
    # The envs the frozen actor held went back to the server when its attempts were filed as lost. (One
    # whose allocation answer it never read has no lease: the server's idle timeout is for that.)
    leased = {r["id"] for r in read_lines(_run(tmp_path) / "leases.jsonl") if r["state"] == "held"}
    assert still_held(_run(tmp_path)) == [] and leased
    assert not leased & {s["server_id"] for s in env_server[0].pool.sessions()}


def test_an_address_where_no_ray_cluster_answers_fails_at_once_with_one_line(tmp_path, ray_cluster, env_url):
    """An HTTP server, a malformed address, a port out of range: exit 2 in seconds, never Ray's minutes of retries."""
    http = HTTPServer(("127.0.0.1", 0), SimpleHTTPRequestHandler)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    cfg = _config(tmp_path, ray_cluster, env_url)
    try:
        for address in (f"127.0.0.1:{http.server_address[1]}", "127.0.0.1:99999", "no-port", "[::1", "127.0.0.1:x"):
            r = run_cua("rollout", str(cfg), "--ray", address, timeout=120)
            assert r.returncode == 2 and "Traceback" not in r.stderr, (address, r.stderr)
            assert f"runner.ray.address {address}: " in r.stderr, (address, r.stderr)
    finally:
        http.shutdown()
        http.server_close()


def test_sigterm_while_ray_starts_ends_the_run_cleanly_and_resume_finishes_it(tmp_path, ray_cluster, env_url):
    """Whenever it lands (joining the cluster, placing actors, the first episodes): exit 143, nothing held."""
    cfg = _config(tmp_path, ray_cluster, env_url, seeds=4, steps=2)
    p = start_cua("rollout", str(cfg))
    try:
        wait_for(lambda: (tmp_path / "results-ray").exists(), what="the run folder")
        signal_group(p, signal.SIGTERM)
        out, err = finish(p, 120)
    finally:
        kill_group(p)
    assert p.returncode == 143 and "Traceback" not in err, err
    run = _run(tmp_path)
    assert os.listdir(run / "queue" / "claimed") == []
    r = run_cua("rollout", str(cfg), "--resume", str(run), timeout=600)
    assert r.returncode == 0, r.stderr
    final = {(e["task_id"], e["sample"]): e for e in read_lines(run / "episodes.jsonl")}
    assert len(final) == 4 and all(e["outcome"] in ("success", "failure") for e in final.values())


def test_accessibility_trees_and_videos_stream_from_the_actors_into_the_run_folder(tmp_path, ray_cluster):
    """agent.observation screenshot_a11y_tree on Ray: each step's tree travels from its actor with its
    screenshot (in pieces of their own) and lands in the run folder beside it, named by its line; with
    env.osworld.record, each episode's video does too."""
    c, _ = ray_cluster
    data = Path(__file__).parent / "data" / "osworld"
    token = "ray-desktops-token"
    server = start_cua("env-server", "--backend", "desktop", "--port", "0", "--max-envs", "2",
                       env={"CUA_ENV_TOKEN": token})
    try:
        url = server.stdout.readline().split()[-1]  # "cua env-server (desktops) listening on URL"
        cfg = tmp_path / "trees.yaml"
        cfg.write_text(f"""
run: {{name: trees, results_dir: {tmp_path}/results}}
tasks: {{kind: osworld, osworld: {{task_list: {data}/evaluation_examples/test_all.json,
                                  ids: [cua-os-move-notes, cua-os-terminal-product]}}}}
env: {{kind: osworld, url: "{url}", token_env: CUA_RAY_DESKTOPS_TOKEN,
      osworld: {{pause_s: 0.3, files_dir: {data}/cache, record: true}}}}
model: {{provider: script, script: {data}/oracle.json}}
agent: {{kind: osworld, observation: screenshot_a11y_tree}}
runner: {{num_envs: 2, max_steps: 3, backend: ray, ray: {{address: "{c.address}", actors: 2}}}}
""")
        r = run_cua("rollout", str(cfg), env={"CUA_RAY_DESKTOPS_TOKEN": token}, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
    finally:
        kill_group(server, signal.SIGTERM)
        server.wait(60)
    (run,) = (tmp_path / "results").iterdir()
    lines = read_lines(run / "episodes.jsonl")
    assert {e["task_id"]: e["outcome"] for e in lines} == {"cua-os-move-notes": "success",
                                                           "cua-os-terminal-product": "success"}
    for e in lines:
        steps = read_lines(run / e["traj"] / "traj.jsonl")
        assert len(steps) == e["steps"] == 2
        for s in steps:
            tree = (run / e["traj"] / s["a11y_tree"]).read_text()
            assert s["a11y_tree"] == s["screenshot"].replace(".png", "_a11y.xml") and tree.startswith("<desktop-frame")
        assert desktops.video_seconds(run / e["traj"] / "episode.mp4") > 0  # a playable mp4
        if e["task_id"] == "cua-os-terminal-product":  # the terminal the task opened, read through AT-SPI
            assert "gnome-terminal-server" in (run / e["traj"] / steps[0]["a11y_tree"]).read_text()
