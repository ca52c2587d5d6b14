"""A desktop cannot take its host down: each of cua's desktops has a memory, process, CPU and disk
limit (cua_cli/envserver/desktop/limits.py), one that hits a limit is stopped and its episode ends
`desktop_limit`, and the server starts no desktop the host has no room for.

The slow test is all real: `cua env-server --backend desktop` with GNOME desktops in cgroups (v1 on
this machine) and ext4 disks on loop devices, and `cua rollout` playing an OSWorld `os` task
beside three agents whose pyautogui code is a memory hog, a fork bomb and a disk filler. The fast
ones read cgroup files from folders laid out as the kernel lays them out; a cgroup v2 host (which
this machine is not) is such a folder too."""

import json
import re
import shutil
import signal
import threading
from pathlib import Path

import pytest
from helpers.cli import ROOT, kill_group, run_cua, start_cua
from helpers.desktops import needs_desktops
from helpers.servers import RawServer

from cua_cli._util.budget import Budget
from cua_cli._util.httpclient import Client
from cua_cli.envserver.desktop.limits import GIB, Cgroup, Cgroups, DesktopQuota, LimitSetupError, host_shortage
from cua_cli.envserver.desktop.pool import DesktopPool, PoolFull
from cua_cli.errors import DesktopLimit, EnvError
from cua_cli.osworld.allocation import Allocator
from cua_cli.osworld.desktop_api import ApiSettings, DesktopAPI
from cua_cli.runfolder.jsonl import read_lines

OS_DATA = ROOT / "tests/data/osworld_os"
OS_TASK = "7688b85f-87a4-4e4a-b2f8-f3d6c3f29b82"  # OSWorld's: move ~/Desktop/todo.txt into ~/Desktop/done
# What the three runaway agents answer (OSWorld's pyautogui action space: code run on the desktop after
# OSWorld's one-line prefix, so each starts with a simple statement).
HOGS = {
    "cua-hog-memory": "x = bytearray(3 << 30)",
    "cua-hog-processes": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
    "cua-hog-disk": "block = bytes(1 << 20)\nwith open('/home/user/fill', 'wb') as f:\n    while True:\n"
                    "        f.write(block)",
}


# -- the real thing --------------------------------------------------------------------------------


@needs_desktops
@pytest.mark.slow
def test_runaway_agents_end_desktop_limit_while_the_other_desktop_scores_and_the_server_answers(tmp_path):
    tasks, answers = _tasks(tmp_path)
    token = "limits-test-token"
    server = start_cua("env-server", "--backend", "desktop", "--port", "0", "--max-envs", "2", "--memory-limit",
                       "1", "--process-limit", "256", "--disk-limit", "1", env={"CUA_ENV_TOKEN": token}, cwd=ROOT)
    try:
        url = server.stdout.readline().split()[-1]  # "cua env-server (desktops) listening on URL"
        assert url.startswith("http://127.0.0.1:"), server.stderr.read() if server.poll() is not None else url
        groups = list(Path("/sys/fs/cgroup").rglob(f"cua-desktops-{server.pid}"))
        assert groups  # the server's parent groups (one per controller on cgroup v1), made at start
        polls = _Poller(f"{url}/status", token)
        polls.start()
        cfg = tmp_path / "limits.yaml"
        cfg.write_text(f"""
run: {{name: limits, results_dir: {tmp_path}/results}}
tasks: {{kind: osworld, osworld: {{task_list: {tasks}}}}}
env: {{kind: osworld, url: "{url}", token_env: LIMITS_TOKEN, osworld: {{pause_s: 1.0}}}}
model: {{provider: script, script: {answers}}}
agent: {{kind: osworld}}
runner: {{num_envs: 2, max_steps: 3, step_timeout_s: 300, episode_timeout_s: 900, max_attempts: 3}}
""")
        result = run_cua("rollout", str(cfg), env={"LIMITS_TOKEN": token}, timeout=1800)
        polls.stop()
        assert result.returncode == 0, result.stderr[-3000:]
        run = next((tmp_path / "results").glob("limits-*"))
        lines = list(read_lines(run / "episodes.jsonl"))
        finals = {r["task_id"]: r for r in lines}
        assert finals[OS_TASK]["score"] == 1.0, finals[OS_TASK]
        for task, kind in (("cua-hog-memory", "memory"), ("cua-hog-processes", "processes"), ("cua-hog-disk", "disk")):
            r = finals[task]
            assert (r["outcome"], r["score"], r["stop_reason"], r["desktop_limit"]) == \
                ("failure", 0.0, "desktop_limit", kind), r
            assert f"{kind.removesuffix('es')} limit" in r["error"]  # memory, process, disk
        assert len(lines) == 4  # a limit is the agent's doing: no attempt is played again
        assert re.search(r"failures at a desktop limit\s*│\s*3\s", result.stdout), result.stdout
        assert polls.answered > 0 and polls.failures == [], polls.failures[:5]
        stats = run_cua("stats", str(run), "--format", "json")
        assert json.loads(stats.stdout)["runs"][0]["desktop_limits"] == 3
        # the server goes on: a new desktop answers after the three were stopped
        started = Client(token).post(f"{url}/start_emulator", 300, json={})
        assert started.status == 200, started.text
    finally:
        kill_group(server, signal.SIGTERM)
        server.wait(120)
    assert not [g for g in groups if g.exists()]  # every group of the server is gone with it


def _tasks(tmp_path: Path) -> tuple[Path, Path]:
    """OSWorld's `os` task first, then the three hogs; and the script of answers that plays them."""
    examples = tmp_path / "examples" / "os"
    examples.mkdir(parents=True)
    shutil.copy(OS_DATA / "examples" / "os" / f"{OS_TASK}.json", examples)
    answers = {OS_TASK: json.loads((OS_DATA / "oracle.json").read_text())[OS_TASK]}
    for task, code in HOGS.items():
        (examples / f"{task}.json").write_text(json.dumps({
            "id": task, "snapshot": "os", "instruction": "Run away.", "source": "cua tests", "config": [],
            "related_apps": ["os"], "evaluator": {
                "func": "check_include_exclude",
                "result": {"type": "vm_command_line", "command": "echo ran", "shell": True},
                "expected": {"type": "rule", "rules": {"include": ["ran"], "exclude": []}}}}))
        answers[task] = [f"```python\n{code}\n```", "DONE"]
    task_list = tmp_path / "test_all.json"
    task_list.write_text(json.dumps({"os": [OS_TASK, *HOGS]}))
    (tmp_path / "answers.json").write_text(json.dumps(answers))
    return task_list, tmp_path / "answers.json"


class _Poller(threading.Thread):
    """Asks the allocation server for its status all along, and keeps what went wrong."""

    def __init__(self, url: str, token: str):
        super().__init__(daemon=True)
        self.url, self.client = url, Client(token)
        self.answered, self.failures = 0, []
        self._done = threading.Event()

    def run(self):
        while not self._done.wait(0.5):
            try:
                r = self.client.get(self.url, 60)
                if r.status == 200:
                    self.answered += 1
                else:
                    self.failures.append(r.status)
            except Exception as e:  # noqa: BLE001 - every failure is the test's finding
                self.failures.append(repr(e))

    def stop(self):
        self._done.set()
        self.join()


# -- the host refuses a desktop it has no room for (a real pool, no desktop started) ---------------------


def test_a_host_short_of_memory_or_disk_starts_no_desktop_and_says_why(tmp_path):
    starved = DesktopQuota(min_free_memory=1 << 60, enforce=False)
    assert host_shortage(starved, tmp_path).startswith("host short of memory")
    no_disk = DesktopQuota(min_free_memory=0, min_free_disk=1 << 60)
    assert host_shortage(no_disk, tmp_path).startswith("host short of disk")
    assert host_shortage(DesktopQuota(min_free_memory=0, min_free_disk=0), tmp_path) is None
    pool = DesktopPool(tmp_path, "127.0.0.1", (800, 600), limit=2, warm=0, limits=starved)
    try:
        with pytest.raises(PoolFull, match="host short of memory"):
            pool.allocate("token")
        assert pool.counts() == {"leased": 0, "warm": 0, "starting": 0, "limit": 2}
    finally:
        pool.close_all()


def _json_answer(status: int, body: dict) -> bytes:
    data = json.dumps(body).encode()
    return (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
            .encode() + data)


def test_the_allocator_waits_on_a_short_host_and_then_names_the_shortage():
    """429 with a reason (cua's server, host short of memory) is a full server: waited on, then an
    env error that says why."""
    short = {"message": "host short of memory: 0.5 GiB available, a new desktop needs 1.0 GiB free", "code": 429}
    tokens = _json_answer(200, {"tok": {"current": 0, "limit": 4}})
    with RawServer([tokens, _json_answer(429, short)] * 50) as server:
        with pytest.raises(EnvError, match=r"full \(host short of memory: 0.5 GiB"):
            Allocator([server.url], "tok", wait_s=1.0).allocate(Budget(30, float("inf"), lambda: False))
        assert len(server.requests) >= 4  # it asked again while it waited


# -- the client: 503 desktop_limit ends the episode at once ----------------------------------------------


def test_the_desktop_client_ends_at_a_limit_without_retrying_and_retries_other_503s():
    limit = {"status": "error", "desktop_limit": "memory", "message": "the desktop was stopped at its memory limit"}
    with RawServer([_json_answer(503, limit)] * 4) as server:
        with pytest.raises(DesktopLimit, match="memory limit") as e:
            DesktopAPI(ApiSettings(server.url, retries=3)).screenshot(Budget(30, float("inf"), lambda: False))
        assert e.value.kind == "memory" and e.value.stop_reason == "desktop_limit"
        assert len(server.requests) == 1
    with RawServer([_json_answer(503, {"status": "error", "message": "busy"})] * 4) as server:
        with pytest.raises(EnvError):
            DesktopAPI(ApiSettings(server.url, retries=1)).screenshot(Budget(30, float("inf"), lambda: False))
        assert len(server.requests) == 2


# -- cgroups, as the kernel lays their files out --------------------------------------------------------


def _fake_v1(root: Path) -> str:
    for c in ("memory", "pids", "cpu,cpuacct"):
        (root / c / "docker" / "abc").mkdir(parents=True)
    return "\n".join(
        f"{30 + i} 25 0:{40 + i} /docker/abc {root}/{c} rw,nosuid - cgroup cgroup rw,{c}"
        for i, c in enumerate(("memory", "pids", "cpu,cpuacct")))


def test_v1_groups_nest_under_the_servers_own_groups_even_in_a_container(tmp_path):
    """In a container the cgroup mounts' root is the container's group: the server's own group is the
    mount point itself, not mount point + the path /proc/self/cgroup shows."""
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(_fake_v1(tmp_path) + "\n")
    own = tmp_path / "cgroup"
    own.write_text("4:memory:/docker/abc\n3:pids:/docker/abc\n2:cpu,cpuacct:/docker/abc\n0::/\n")
    groups = Cgroups.here("cua-desktops-1", str(mountinfo), str(own))
    assert not groups.v2
    assert groups.parents["memory"] == tmp_path / "memory" / "cua-desktops-1"
    assert groups.parents["cpu"] == tmp_path / "cpu,cpuacct" / "cua-desktops-1"
    group = groups.create("d1", DesktopQuota(memory=GIB, processes=500, cpu_weight=50))
    assert (group.dirs["memory"] / "memory.limit_in_bytes").read_text() == f"{GIB}\n"
    assert (group.dirs["pids"] / "pids.max").read_text() == "500\n"
    assert (group.dirs["cpu"] / "cpu.shares").read_text() == "512\n"
    assert group.hit() is None
    (group.dirs["memory"] / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    assert group.hit().startswith("memory: ")
    (group.dirs["pids"] / "pids.events").write_text("max 7\n")  # a fork bomb also hits the memory limit
    assert group.hit() == "processes: a new process was refused at the desktop's process limit of 500"


def test_v2_groups_get_their_controllers_handed_down(tmp_path):
    (tmp_path / "cg" / "user.slice" / "cua.scope").mkdir(parents=True)
    (tmp_path / "cg" / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"30 25 0:26 / {tmp_path}/cg rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n")
    own = tmp_path / "cgroup"
    own.write_text("0::/user.slice/cua.scope\n")
    groups = Cgroups.here("cua-desktops-2", str(mountinfo), str(own))
    parent = tmp_path / "cg" / "user.slice" / "cua.scope" / "cua-desktops-2"
    assert groups.v2 and groups.parents == dict.fromkeys(("memory", "pids", "cpu"), parent)
    assert (parent / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    assert (parent.parent / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    (parent / "d1").mkdir()
    (parent / "d1" / "memory.swap.max").write_text("max\n")
    group = groups.create("d1", DesktopQuota(memory=2 * GIB, processes=100, cpu_weight=300))
    assert {f: (parent / "d1" / f).read_text() for f in ("memory.max", "memory.swap.max", "pids.max", "cpu.weight")} \
        == {"memory.max": f"{2 * GIB}\n", "memory.swap.max": "0\n", "pids.max": "100\n", "cpu.weight": "300\n"}
    (parent / "d1" / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n")
    assert group.hit().startswith("memory: a process was killed")


def test_a_host_with_no_pids_controller_is_refused_by_name(tmp_path):
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"30 25 0:40 / {tmp_path}/memory rw - cgroup cgroup rw,memory\n")
    (tmp_path / "memory").mkdir()
    own = tmp_path / "cgroup"
    own.write_text("4:memory:/\n")
    with pytest.raises(LimitSetupError, match="no cgroup pids controller"):
        Cgroups.here("cua-desktops-3", str(mountinfo), str(own))


def test_a_group_that_is_gone_already_is_removed_quietly(tmp_path):
    Cgroup(dict.fromkeys(("memory", "pids", "cpu"), tmp_path / "gone"), True, DesktopQuota()).remove()
