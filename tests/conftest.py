import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests: modest example counts by default so the suite stays fast;
# `pytest --hypothesis-profile=deep` searches much harder.
settings.register_profile("default", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=5000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")

ROOT = Path(__file__).resolve().parent.parent
CUA = [sys.executable, "-m", "cua_cli"]


def run_cua(*args, cwd=ROOT, env=None, timeout=300):
    """Run the real `cua` command line in a child process."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([*CUA, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


def wait_for(cond, timeout: float = 120, what: str = "condition"):
    """Poll `cond` until it holds; fail the test naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def build_tiny_vlm(out: Path) -> Path:
    """The tiny random Qwen2-VL of scripts/make_tiny_vlm.py, built in this process (fast, offline)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_tiny_vlm", ROOT / "scripts" / "make_tiny_vlm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build(out)


def start_tiny_fleet(work: Path, servers: int, base_port: int) -> Path:
    """Build the tiny random Qwen2-VL in `work` and serve it with real vLLM on the CPU; the fleet file."""
    model = work / "tiny-vlm"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_vlm.py"), str(model)], check=True,
                   capture_output=True)
    fleet_file = work / "fleet.json"
    r = run_cua("start-models", "--cpu", str(servers), "--model", str(model),
                "--config", str(ROOT / "configs/fleet-cpu.yaml"), "--fleet", str(fleet_file),
                "--base-port", str(base_port), "--detach", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return fleet_file


# An env server token variable no test sets: the server runs without a token.
UNSET_TOKEN_ENV = "CUA_TEST_TOKEN_NEVER_SET"


def start_env_server(**kwargs):
    """The built-in env server, serving on a free loopback port in this process; (server, url)."""
    from cua_cli.envserver.server import make_server

    server = make_server(port=0, **kwargs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def stop_env_server(server):
    server.shutdown()
    server.server_close()
    server.close_all()


@pytest.fixture(scope="session")
def ray_cluster():
    """A real Ray cluster of three nodes on this machine (Ray's own test utility): a head without CPUs,
    where the driver runs, and two workers for the runner actors; (cluster, worker nodes)."""
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": 80 << 20})
    workers = [c.add_node(num_cpus=2, object_store_memory=80 << 20) for _ in range(2)]
    c.wait_for_nodes()
    yield c, workers
    c.shutdown()


@pytest.fixture
def write(tmp_path):
    def _write(name, text):
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p
    return _write
