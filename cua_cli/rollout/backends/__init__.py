"""The runner-backend seam: where a rollout's runners run.

    backend = make_backend(cfg, run, env_url, secrets, watch)
    backend.start(stopping)    start the runners; give up early once stopping() is true
    backend.running() -> bool  some runner is alive or not yet reaped
    backend.supervise()        reap runners that died, restart them while the run goes on; news or None
    backend.request_stop()     first stop signal: running episodes end as interrupted
    backend.kill()             second stop signal: stop at once; claims go back to the queue
    backend.crashed            runners kept dying
    backend.refused            a runner stopped on a file or folder of the run it would not write through
                               (a link planted there): the rollout stops, and says which

Backends are chosen by `runner.backend` through kinds.BACKENDS: a new one is one
module plus one line there.
"""

from typing import Callable, Protocol

from ..._util.registry import load
from ...kinds import BACKENDS


class RunnerBackend(Protocol):
    crashed: bool
    refused: bool

    def start(self, stopping: Callable[[], bool]) -> None: ...
    def running(self) -> bool: ...
    def supervise(self) -> str | None: ...
    def request_stop(self) -> None: ...
    def kill(self) -> None: ...


def make_backend(cfg, run, env_url: str, secrets: dict, watch: bool) -> RunnerBackend:
    return load(BACKENDS[cfg.runner.backend])(cfg, run, env_url, secrets, watch)
