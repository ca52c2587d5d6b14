"""The runner-backend seam: where a rollout's runners run.

    backend = make_backend(cfg, run, env_url, secrets, watch)
    backend.start()            start the runners
    backend.running() -> bool  some runner is alive or not yet reaped
    backend.supervise()        reap runners that died, restart them while the run goes on
    backend.request_stop()     first Ctrl-C: running episodes end as interrupted
    backend.kill()             second Ctrl-C: stop at once; claims go back to the queue
    backend.crashed            runners kept dying

Backends are chosen by `runner.backend` through BACKENDS: a new one is one
module plus one line there.
"""

from typing import Protocol

from ...registry import load

BACKENDS = {
    "local": "cua_cli.rollout.backends.local:LocalProcesses",
    "ray": "cua_cli.rollout.backends.ray:RayActors",
}


class RunnerBackend(Protocol):
    crashed: bool

    def start(self) -> None: ...
    def running(self) -> bool: ...
    def supervise(self) -> None: ...
    def request_stop(self) -> None: ...
    def kill(self) -> None: ...


def make_backend(cfg, run, env_url: str, secrets: dict, watch: bool) -> RunnerBackend:
    return load(BACKENDS[cfg.runner.backend])(cfg, run, env_url, secrets, watch)
