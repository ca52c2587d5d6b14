"""Least-loaded routing shared by runner processes (real shared memory, real processes)."""

import multiprocessing as mp
import time

from cua_cli.models.routing import Router


def _take_and_hold(router, n, out):
    out.put([router.acquire() for _ in range(n)])


def test_least_loaded_across_processes():
    ctx = mp.get_context("spawn")
    router = Router(3, ctx)
    out = ctx.Queue()
    procs = [ctx.Process(target=_take_and_hold, args=(router, 2, out)) for _ in range(3)]
    for p in procs:
        p.start()
    picks = sorted(i for _ in procs for i in out.get(timeout=60))
    for p in procs:
        p.join()
    assert picks == [0, 0, 1, 1, 2, 2], "six episodes in flight spread evenly over three servers"


def test_idle_servers_take_turns_and_failed_ones_are_skipped():
    router = Router(2)
    first = router.acquire()
    router.release(first)
    second = router.acquire()
    assert {first, second} == {0, 1}, "sequential episodes alternate, so both caches warm up"
    router.release(second)
    router.failed(0)
    assert [router.acquire() for _ in range(3)] == [1, 1, 1]
    assert router.acquire(exclude=1) == 0


def _hold_lock_and_wait(router, held):
    router.load.get_lock().acquire()
    held.set()
    time.sleep(3600)  # killed here, holding the lock, as a runner the OOM killer takes mid-update


def test_a_runner_killed_holding_the_counts_lock_does_not_stop_the_others():
    ctx = mp.get_context("spawn")
    router = Router(2, ctx)
    held = ctx.Event()
    p = ctx.Process(target=_hold_lock_and_wait, args=(router, held))
    p.start()
    try:
        assert held.wait(120)
        p.kill()
        p.join()
        picks = [router.acquire() for _ in range(4)]  # would wait forever on the dead runner's lock
        assert sorted(picks) == [0, 0, 1, 1] and router.orphaned
    finally:
        if p.is_alive():
            p.kill()


def test_the_ray_backends_shared_router_survives_pickling():
    """Each runner actor gets a pickled copy: unpickling looks attributes up before __init__ ran
    (a __getattr__ that forwards everything recursed until the actor crashed)."""
    import pickle

    from cua_cli.rollout.backends.ray import Remote

    copy = pickle.loads(pickle.dumps(Remote("a handle", Router.ONE_WAY)))
    assert copy.handle == "a handle" and copy.one_way == frozenset(Router.ONE_WAY)
