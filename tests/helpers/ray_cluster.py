"""A real multi-node Ray cluster on this machine (Ray's own `cluster_utils.Cluster`), run in a child
process of its own session and driven over its stdin and stdout, one JSON line each way.

Not in the test process: Ray's nodes put a SIGTERM handler into the process that starts them
(drain, then exit), make it a process group leader, and start a reaper that signals that group;
inside pytest, a SIGTERM meant for a test's child would end the whole test run.

    cluster = RayCluster(workers=2)   # a head without CPUs, where drivers run, and two 2-CPU workers
    cluster.address                   # for `ray.init(address=...)` / runner.ray.address
    node = cluster.add_node()         # RayNode(id, raylet_pid)
    cluster.remove_node(node)         # its processes die, as a lost machine's would
    cluster.shutdown()
"""

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from cua_cli._util.procgroup import kill_group as stop_group

OBJECT_STORE = 80 << 20  # Ray's smallest store: the tests move screenshots, not datasets
TESTS = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class RayNode:
    id: str
    raylet_pid: int


class RayCluster:
    def __init__(self, workers: int = 2, num_cpus: int = 2):
        self.num_cpus = num_cpus
        self._proc = subprocess.Popen([sys.executable, "-m", "helpers.ray_cluster", str(workers), str(num_cpus)],
                                      cwd=TESTS, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                      start_new_session=True)
        try:
            first = self._reply()
        except BaseException:
            self._kill()
            raise
        self.address: str = first["address"]
        self.workers = [RayNode(**n) for n in first["workers"]]

    def add_node(self, num_cpus: int | None = None) -> RayNode:
        return RayNode(**self._ask("add_node", num_cpus=num_cpus or self.num_cpus)["node"])

    def remove_node(self, node: RayNode) -> None:
        self._ask("remove_node", id=node.id)

    def shutdown(self) -> None:
        try:
            self._ask("shutdown")  # answered once Ray's nodes are down
        finally:
            self._kill()

    def _kill(self) -> None:
        """The child and whatever of Ray's processes outlived it. The group is stopped before the
        child is reaped: while it is unreaped, its pid (the group's id) is nobody else's."""
        stop_group(self._proc.pid, 0.0)
        self._proc.wait()

    def _ask(self, op: str, **args) -> dict:
        self._proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self._proc.stdin.flush()
        return self._reply()

    def _reply(self) -> dict:
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the Ray cluster's process ended (exit {self._proc.wait()}); its output is above")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"the Ray cluster: {reply['error']}")
        return reply


def _serve(workers: int, num_cpus: int) -> None:
    """The child: start the cluster, then answer one command a line until told to stop or stdin ends."""
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    out = sys.stdout
    sys.stdout = sys.stderr  # Ray's own prints must not mix with the replies

    def say(reply: dict) -> None:
        out.write(json.dumps(reply) + "\n")
        out.flush()

    def described(node) -> dict:
        raylet = node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process
        return {"id": node.unique_id, "raylet_pid": raylet.pid}

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": OBJECT_STORE})
    nodes = {}
    try:
        for _ in range(workers):
            node = cluster.add_node(num_cpus=num_cpus, object_store_memory=OBJECT_STORE)
            nodes[node.unique_id] = node
        cluster.wait_for_nodes()
        say({"address": cluster.address, "workers": [described(n) for n in nodes.values()]})
        for line in sys.stdin:
            ask = json.loads(line)
            try:
                if ask["op"] == "add_node":
                    node = cluster.add_node(num_cpus=ask["num_cpus"], object_store_memory=OBJECT_STORE)
                    nodes[node.unique_id] = node
                    cluster.wait_for_nodes()
                    say({"node": described(node)})
                elif ask["op"] == "remove_node":
                    cluster.remove_node(nodes.pop(ask["id"]))
                    say({})
                elif ask["op"] == "shutdown":
                    break
                else:
                    say({"error": f"no such command {ask['op']!r}"})
            except Exception as e:  # the test gets it as its error
                say({"error": f"{ask['op']}: {type(e).__name__}: {e}"})
    finally:
        cluster.shutdown()
        say({})


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]))
