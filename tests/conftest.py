"""Fixtures and hooks only: the helpers live in tests/helpers/ (`from helpers.<module> import ...`)."""

import pytest
from hypothesis import HealthCheck, settings

# Property tests: modest example counts by default so the suite stays fast;
# `pytest --hypothesis-profile=deep` searches much harder.
settings.register_profile("default", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=5000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


@pytest.fixture(scope="session")
def ray_cluster():
    """A real Ray cluster of three nodes on this machine (Ray's own test utility): a head without CPUs,
    where the driver runs, and two workers for the runner actors; (cluster, worker nodes)."""
    from ray.cluster_utils import Cluster  # the [test] extra installs Ray

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
