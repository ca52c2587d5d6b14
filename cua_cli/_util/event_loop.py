"""The event loop runners carry their episodes on: uvloop's (libuv's) where it is installed, else asyncio's.

uvloop's loop and socket transports are C, and it comes with vLLM; it is no dependency of cua's, and
both keep asyncio's API, so nothing else depends on which runs. It saves about 6% of a step's CPU at
1,024 episodes, less than the spread between runs (docs/design/runner-loop.md).
"""

import asyncio
from typing import Callable


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop
