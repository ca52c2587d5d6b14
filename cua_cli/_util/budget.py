"""How long the next request of an episode may take, and whether to stop asking."""

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from ..errors import EpisodeTimeout
from .interrupt import Interrupt


@dataclass(frozen=True)
class Budget:
    step_timeout: float                                   # any one request, s
    deadline: float = math.inf                            # time.monotonic() by which the episode ends
    should_stop: Callable[[], bool] = field(default=lambda: False)
    interrupt: Interrupt | None = None                    # on an event loop: wakes the episode's waits to stop

    def timeout(self, limit: float = math.inf, step: bool = True) -> float:
        """The next request's timeout: the service's own `limit` and the step limit, cut short by the deadline.
        A request that is no step of the agent (`step=False`: a desktop's start, which waits for it to
        boot) has only its own limit and the deadline."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise EpisodeTimeout("the episode deadline was reached")
        return min(limit, self.step_timeout if step else math.inf, left)

    def unhurried(self) -> "Budget":
        """For the calls after an episode ended (evaluate, release): no Ctrl-C or deadline may lose them."""
        return Budget(self.step_timeout)
