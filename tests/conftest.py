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


@pytest.fixture
def write(tmp_path):
    def _write(name, text):
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p
    return _write
