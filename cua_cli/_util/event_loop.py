"""The event loop runners carry their episodes on: uvloop's (libuv's) where it is installed, else asyncio's.

Measured with scripts/bench_rollout.py (docs/design/benchmarks.md), uvloop spends less CPU per step on
the loop and its sockets' transports; both keep asyncio's API, so nothing else depends on which it is.
"""

import asyncio
from typing import Callable


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop
