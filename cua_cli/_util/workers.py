"""Threads that do an event loop's blocking work (file writes, the queue's locks), lighter than an executor.

`await workers.run(fn, *args)` runs fn in one of the threads and gives its result or raises its error.
A runner hands work off several times a step; run_in_executor's concurrent future, work item and idle
semaphore cost more than the work's own Python (scripts/bench_rollout.py): this is a queue and a
call_soon_threadsafe, no more.
"""

import asyncio
import queue
import threading


class Workers:
    def __init__(self, threads: int, name: str):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(threads)]
        for t in self.threads:
            t.start()

    async def run(self, fn, *args):
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self.jobs.put((loop, done, fn, args))
        return await done

    def _work(self) -> None:
        while (job := self.jobs.get()) is not None:
            loop, done, fn, args = job
            try:
                result, error = fn(*args), None
            except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine, which raises it
                result, error = None, e
            try:
                loop.call_soon_threadsafe(_settle, done, result, error)
            except RuntimeError:  # the loop has closed: nobody awaits it any more
                pass

    def close(self) -> None:
        """Let the threads finish what they were given, then end."""
        for _ in self.threads:
            self.jobs.put(None)
        for t in self.threads:
            t.join()


def _settle(done: asyncio.Future, result, error) -> None:
    if done.cancelled():
        return
    if error is None:
        done.set_result(result)
    else:
        done.set_exception(error)
