"""Fixtures and hooks only: the helpers live in tests/helpers/ (`from helpers.<module> import ...`)."""

import pytest
from hypothesis import HealthCheck, settings

# global_state: no test leaks signal handlers, environment or working directory; pytester: the suite tests that
pytest_plugins = ["helpers.global_state", "pytester"]

# Property tests: modest example counts by default so the suite stays fast;
# `pytest --hypothesis-profile=deep` searches much harder.
settings.register_profile("default", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=5000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


@pytest.fixture(scope="session")
def ray_cluster():
    """A real Ray cluster of three nodes on this machine (Ray's own test utility, in a process of its
    own): a head without CPUs, where the driver runs, and two workers for the runner actors;
    (cluster, worker nodes)."""
    from helpers.ray_cluster import RayCluster

    c = RayCluster(workers=2, num_cpus=2)
    try:
        yield c, c.workers
    finally:
        c.shutdown()


@pytest.fixture(scope="session")
def tiny_vllm(tmp_path_factory):
    """The suite's one fleet of real vLLM (two servers on the CPU serving the tiny random Qwen2-VL, with
    a pixel limit of the server's own), shared by every test that only plays through a fleet: a start
    costs the suite's two cores minutes. Its folder holds the model (`tiny-vlm`) beside the fleet file. A test
    may restart a server (the same model, ready again when the test ends); none may load another
    model, and only a test marked `stops_tiny_vllm` (run last) may stop it."""
    from helpers.cli import run_cua
    from helpers.models import TINY_VLLM_MAX_PIXELS, start_tiny_fleet

    fleet = start_tiny_fleet(tmp_path_factory.mktemp("tiny-vllm"), 2, 8450, TINY_VLLM_MAX_PIXELS)
    yield fleet
    if fleet.exists():
        run_cua("stop-models", "--fleet", str(fleet))


def pytest_collection_modifyitems(items):
    """A test that stops the shared fleet runs after every test that plays through it."""
    items.sort(key=lambda item: item.get_closest_marker("stops_tiny_vllm") is not None)


@pytest.fixture
def write(tmp_path):
    def _write(name, text):
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p
    return _write
