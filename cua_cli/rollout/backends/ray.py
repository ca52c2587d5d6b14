"""The Ray backend: runner actors on a Ray cluster; this process keeps the queue and the run folder.

Each actor holds a Player and plays many pairs at once (an async actor: its
episodes share its event loop, as a local runner's do). This process (the
driver) is a runner too, on an event loop of its own (runner.py), whose
slots claim a pair on an actor's behalf and hold its lease; the actor
streams each step back as it happens, its screenshot and its line, through a
Ray streaming generator the slot awaits, and the driver writes them into the
run folder just as a local runner would, then files the attempt. Screenshots
travel in pieces small enough for Ray to hand them to the driver directly,
so they never enter Ray's object store. When an actor or its node dies, its
streams fail: the driver files each of its attempts as `runner_lost` and the
pairs go back to pending/. Steps already written stay with their attempt;
the retry is a new attempt with its own folder, so no step is written twice.
Actors need no shared file system: the driver also hands them the fleet
file's model versions whenever it changes.
"""

import asyncio
import math
import os
import signal
import socket
import threading
import time
from urllib.parse import urlsplit

from ..._util.interrupt import Interrupt
from ..._util.redact import Redactor
from ...config.fleet_file import FleetVersions
from ...errors import InputError
from ...models import model_servers, shared_state
from ...runfolder.records import error_line
from ...runfolder.writer import VIDEO, a11y_tree_name, screenshot_name, traj_rel
from ...tasks import task_from_dict
from ..leftovers import release_leftovers
from ..player import Player
from ..runner import Runner, RunnerSpec, open_files_to_the_limit

# Ray hands a return value of up to 100 KiB straight to its caller; larger ones go through the
# object store of the producing node and are pulled to the driver's: 4x the driver's CPU here.
CHUNK = 96 * 1024
# Pieces a stream may run ahead of the driver (a few screenshots), so a slow driver holds the
# actors back instead of buffering without bound.
AHEAD = 64
SLOTS_PER_ACTOR = 256      # as local runner processes (see backends/local.py)
MAX_RESTARTS_PER_ACTOR = 3
START_TIMEOUT_S = 120.0    # for the cluster to place every actor
GCS_PROBE_S = 5.0          # for a Ray cluster's address to answer
REPLACE_NOTICE_S = 30.0    # a lost actor not yet replaced by then is worth telling the user about
KILL_WAIT_S = 10.0         # for the slots to see their killed actors go
PICK_POLL_S = 0.2          # how often a slot looks for an actor with room, when none has (one was lost)
# A stream may miss news of its actor's death (Ray has had such bugs, and a node that stops
# answering is not dead yet): one silent for a while pings its actor, and one from whose actor
# nothing was heard for runner.ray.lost_after_s, or silent longer than an episode can last, is lost.
PINGS_PER_LOSS = 3


def _ray():
    try:
        import ray
    except ImportError:
        raise InputError("runner.backend: ray needs Ray on this host: pip install -e '.[ray]'") from None
    return ray


def _why(e: Exception) -> str:
    """The exception a Ray error carries from the actor, without the traceback Ray puts before it."""
    return ([line for line in str(e).splitlines() if line.strip()] or [type(e).__name__])[-1]


class _Secrets(dict):
    """Tokens for the actors, masked should Ray ever print an actor's arguments."""

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: '***'" for k in self) + "}"


class _Stream:
    """An AttemptWriter for an actor: each step goes to the driver as one message, its line with its
    screenshot and accessibility tree. Leases and videos may come from a blocking env's thread: every
    message goes through the loop, in the order it was put."""

    def __init__(self, out: asyncio.Queue, loop: asyncio.AbstractEventLoop):
        self.out, self.loop = out, loop
        self.shot = self.tree = None

    def _put(self, message: tuple) -> None:
        self.loop.call_soon_threadsafe(self.out.put_nowait, message)

    def screenshot(self, step: int, png: bytes) -> str:
        self.shot = (step, png)  # the episode writes the step's line next, however the step ends
        return screenshot_name(step)

    def rereader(self, name: str) -> None:
        return None  # the file is written on the driver's host: the episode keeps the bytes it needs

    def a11y_tree(self, step: int, xml: str) -> str:
        self.tree = xml.encode()
        return a11y_tree_name(step)

    async def step(self, record: dict) -> None:
        self._put(("step", record, self.shot, self.tree))
        self.shot = self.tree = None

    def video(self, mp4: bytes) -> str:
        self._put(("video", mp4))
        return VIDEO

    def lease(self, record: dict) -> None:
        self._put(("lease", record))

    def takeover(self) -> None:
        return None  # the attempt's folder is on the driver's host: a person takes over local runners only

    def holding(self, on: bool) -> None:
        pass


class _PushedVersions:
    """The fleet file as the driver last read it, a FleetVersions for an actor (whose node may not have
    the file): (each endpoint's versions, each endpoint's entry)."""

    def __init__(self, pushed: tuple[dict, dict]):
        self.current = pushed

    def table(self) -> dict:
        return self.current[0]

    def entries(self) -> dict:
        return self.current[1]


class InActor:
    """Objects every runner actor uses, each in a Ray actor of its own on the driver's node:
    it lives as long as the driver does."""

    def __init__(self, node_id: str):
        self.node_id = node_id

    def share(self, cls, *args):
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        handle = ray.remote(num_cpus=0)(cls).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(self.node_id, soft=False)).remote(*args)
        return Remote(handle, getattr(cls, "ONE_WAY", ()))


class Remote:
    """Calls on an object in a Ray actor; the `one_way` ones are not waited for (an actor runs
    one caller's calls in order, so they still happen before that caller's next call)."""

    def __init__(self, handle, one_way=()):
        self.handle, self.one_way = handle, frozenset(one_way)

    def __getattr__(self, name: str):
        # Unpickling (each actor gets a copy) looks attributes up before __init__ has set any.
        if name.startswith("__") or name in ("handle", "one_way"):
            raise AttributeError(name)
        method = getattr(self.handle, name)
        if name in self.one_way:
            return lambda *args: method.remote(*args) and None
        import ray
        return lambda *args: ray.get(method.remote(*args))


def _unreachable(urls: dict) -> list[str]:
    """The urls (by config key) this host cannot open a connection to."""
    bad = []
    for key, url in urls.items():
        u = urlsplit(url)
        try:
            socket.create_connection((u.hostname, u.port or (443 if u.scheme == "https" else 80)), 5).close()
        except (OSError, ValueError) as e:
            bad.append(f"{key} {url} ({e})")
    return bad


def _not_a_gcs(address: str) -> str | None:
    """Why no Ray cluster can answer at HOST:PORT, or None if a gRPC server (Ray's GCS) does.

    A gRPC server answers HTTP/2's connection preface with a SETTINGS frame at once; an HTTP/1
    server, a closed port or a host that never answers do not, and are told apart in seconds.
    """
    host, _, port = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        return "not HOST:PORT"
    deadline = time.monotonic() + GCS_PROBE_S
    try:
        with socket.create_connection((host, int(port)), GCS_PROBE_S) as sock:
            sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            head = b""
            while len(head) < 9:
                sock.settimeout(max(0.01, deadline - time.monotonic()))  # a server that drips bytes gets no more
                if not (chunk := sock.recv(9 - len(head))):
                    break
                head += chunk
    except (OSError, ValueError) as e:  # ValueError: a host name no resolver takes (a NUL, bad IDNA)
        return str(e) or type(e).__name__
    return None if len(head) == 9 and head[3] == 4 else "what answers there does not speak gRPC"


class RunnerActor:
    """Plays pairs the driver hands it, streaming their steps back (a Ray async actor: every method runs
    on its event loop, but ping, which has a loop of its own)."""

    def __init__(self, cfg, env_url: str, secrets: dict, router, versions: tuple | None):
        self.player = Player(cfg, env_url, secrets, router)
        self.versions = _PushedVersions(versions or ({}, {}))
        if versions is not None:
            self.player.model.versions = self.versions
        self.interrupt = Interrupt()
        self.urls = {"env.url": env_url, **{f"model.endpoints[{i}]": e for i, e in enumerate(model_servers(cfg))}}

    async def ready(self) -> tuple[str, list[str]]:
        """This actor's node address, and the servers it cannot reach."""
        import ray
        open_files_to_the_limit()
        return ray.util.get_node_ip_address(), await asyncio.to_thread(_unreachable, self.urls)

    async def ping(self) -> bool:
        """An answer, from a loop of its own (concurrency group "probe"), however busy the actor is."""
        return True

    async def set_versions(self, pushed: tuple[dict, dict]) -> None:
        self.versions.current = pushed

    async def request_stop(self) -> None:
        self.interrupt.set()

    async def play(self, item: dict):
        """Stream one attempt: per step, its screenshot in pieces ("png", bytes) and its accessibility
        tree in pieces ("a11y", bytes) when it has one (its line names the file), then ("step", line,
        the screenshot's step or None); ("lease", record) for each env it takes or gives back; the
        episode's video in pieces ("mp4", bytes), then ("video",); at the end ("end", episode line).
        A piece and a step's line stay apart: together they could outgrow what Ray hands over
        directly, and an object left in a dead node's store can never be read."""
        out: asyncio.Queue = asyncio.Queue()
        task = task_from_dict(item)  # checked by the driver before it sent the pair
        stream = _Stream(out, asyncio.get_running_loop())

        async def run():
            stream._put(("end", await self.player.play(item, task, stream, self.interrupt)))

        episode = asyncio.ensure_future(run())
        while True:
            message = await out.get()
            if message[0] == "step":
                _, line, shot, tree = message
                for kind, data in (("png", shot[1] if shot else b""), ("a11y", tree or b"")):
                    for k in range(0, len(data), CHUNK):
                        yield (kind, data[k:k + CHUNK])
                message = ("step", line, shot[0] if shot else None)
            elif message[0] == "video":
                for k in range(0, len(message[1]), CHUNK):
                    yield ("mp4", message[1][k:k + CHUNK])
                message = ("video",)
            yield message
            if message[0] == "end":
                await episode  # ended with that message: the loop holds a task only weakly until then
                return


class RayActors:
    """Starts the actors, plays pairs on them from a runner of its own (it is that runner's player), and
    replaces actors that died."""

    def __init__(self, cfg, run, env_url: str, secrets: dict, watch: bool):
        self.ray = _ray()
        self.cfg, self.run, self.watch = cfg, run, watch
        self.queue = run.queue(cfg.runner.max_attempts, cfg.runner.lease_ttl_s)
        self.env_url, self.secrets = env_url, _Secrets(secrets)
        self.redact = Redactor(secrets.values()).text
        self.versions = FleetVersions(cfg.resolve_path(cfg.model.fleet)) if cfg.model.fleet else None
        self.actors: list = []    # by index: a started actor, or None while its replacement is placed
        self.placing: dict = {}   # index -> (replacement actor, its ready() ref, when it was asked for)
        self.busy: list[int] = []  # episodes each actor plays, counted on the runner's loop
        self.lock = threading.Lock()  # actors and placing: the main thread supervises, the loop replaces
        self.said_short = False
        self.stop = threading.Event()
        self.killed = False
        self.runner: Runner | None = None
        self.thread: threading.Thread | None = None  # the runner's loop
        self.restarts = 0
        self.crashed = False
        self._pushed = None
        self.per_actor = 1  # episodes an actor plays at once
        self.lost_after_s = cfg.runner.ray.lost_after_s
        # No step of a live episode comes later than this after its start (see the local env server's idle).
        self.longest_s = cfg.runner.episode_timeout_s + 2 * cfg.runner.step_timeout_s + self.lost_after_s

    @property
    def refused(self) -> bool:
        """The runner stopped on a file or folder of the run it would not write through."""
        return self.runner is not None and self.runner.refused is not None

    def start(self, stopping) -> None:
        ray, rc = self.ray, self.cfg.runner.ray
        if not ray.is_initialized() and not self._join(rc.address) or stopping():
            return
        here = ray.get_runtime_context().get_node_id()
        shared = shared_state(self.cfg, InActor(here))  # e.g. endpoint loads, counted for all runner actors
        n = self._count_actors()
        self.per_actor = math.ceil(self.cfg.runner.num_envs / n)
        actor = ray.remote(max_concurrency=self.per_actor + 4, concurrency_groups={"probe": 2},
                           num_cpus=rc.num_cpus)(RunnerActor)
        self._new_actor = lambda: actor.options(scheduling_strategy="SPREAD").remote(
            self.cfg, self.env_url, self.secrets, shared, self._versions())
        self.actors = [self._new_actor() for _ in range(n)]
        self.busy = [0] * n
        if not self._check_ready(stopping):
            self.kill()
            return
        spec = RunnerSpec(self.cfg, str(self.run.path), self.env_url, self.secrets, self.cfg.runner.num_envs,
                          self.watch)
        self.runner = Runner(spec, player=self, lane=lambda slot: f"ray/{slot}")
        self.thread = threading.Thread(target=self.runner.run, args=(self.stop,), name="cua-ray-runner", daemon=True)
        self.thread.start()

    def _join(self, address: str | None) -> bool:
        """Connect to the cluster (or start a local one), or say clearly why not; False if a stop signal came."""
        where = f"runner.ray.address {address}" if address else "runner.backend: ray"
        if address and address.startswith("ray://"):
            raise InputError(f"{where}: Ray Client addresses are not supported; run cua rollout on a node of "
                             "the cluster (e.g. its head) with --ray auto")
        if address and address not in ("auto", "local"):
            # Ray itself would keep retrying for minutes an address where no Ray cluster answers.
            why = _not_a_gcs(address)
            if why:
                raise InputError(f"{where}: no Ray cluster answers there ({why})")
        # ray.init puts in a SIGTERM handler of its own that exits at once: keep ours, and a
        # SIGTERM that lands during the init is handed to ours instead.
        ours = signal.getsignal(signal.SIGTERM)
        try:
            self.ray.init(address=address, include_dashboard=False, logging_level="ERROR")
        except SystemExit as e:
            if e.code != signal.SIGTERM:
                raise
            signal.signal(signal.SIGTERM, ours)
            signal.raise_signal(signal.SIGTERM)
            return False
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise InputError(f"{where}: cannot join the Ray cluster: {e}") from None
        finally:
            signal.signal(signal.SIGTERM, ours)
        return True

    def _count_actors(self) -> int:
        """runner.ray.actors, or one per node that has the CPUs an actor asks for, and one per 256 slots."""
        rc, num_envs = self.cfg.runner.ray, self.cfg.runner.num_envs
        if rc.actors:
            return min(rc.actors, num_envs)
        nodes = sum(1 for node in self.ray.nodes()
                    if node.get("Alive") and node.get("Resources", {}).get("CPU", 0) >= rc.num_cpus)
        return min(max(nodes, math.ceil(num_envs / SLOTS_PER_ACTOR)), num_envs)

    def _check_ready(self, stopping) -> bool:
        """Every actor was placed, started, and reaches the env and model servers: or say which did not.
        False if a stop signal came first."""
        ray = self.ray
        refs = [a.ready.remote() for a in self.actors]
        deadline = time.monotonic() + START_TIMEOUT_S
        done, waiting = [], refs
        while waiting and time.monotonic() < deadline:
            if stopping():
                return False
            ready, waiting = ray.wait(waiting, num_returns=len(waiting), timeout=0.5)
            done += ready
        if waiting:
            self.kill()
            free = ray.available_resources().get("CPU", 0)
            raise InputError(f"runner.ray: {len(waiting)} of {len(refs)} runner actors found no place on the Ray "
                             f"cluster in {START_TIMEOUT_S:.0f} s (each asks for runner.ray.num_cpus="
                             f"{self.cfg.runner.ray.num_cpus} CPUs; {free:g} are free): lower it or add nodes")
        try:
            answers = ray.get(done)
        except ray.exceptions.RayActorError as e:
            self.kill()
            raise InputError(f"runner.backend: ray: a runner actor could not start: {_why(e)}") from None
        for node, bad in answers:
            if bad:
                self.kill()
                raise InputError(f"runner.backend: ray: node {node} cannot reach {'; '.join(bad)}. Every Ray "
                                 "node must reach the env and model servers (a 127.0.0.1 address is each "
                                 "node's own)")
        return True

    def _versions(self) -> tuple[dict, dict] | None:
        return (self.versions.table(), self.versions.entries()) if self.versions else None

    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def supervise(self) -> str | None:
        """Pass a changed fleet file's versions on to the actors, and let placed replacements join;
        news for the user, or None."""
        if self.refused and not self.stop.is_set():  # the runner stopped itself: its actors stop too
            self.request_stop()
        pushed = self._versions()
        if pushed is not None and pushed != self._pushed:
            self._pushed = pushed
            for a in self._started():
                a.set_versions.remote(pushed)
        return self._placed()

    def _started(self) -> list:
        with self.lock:
            return [a for a in self.actors if a is not None]

    def _placed(self) -> str | None:
        """Replacements that started join the pool; one that failed to start is asked for again.
        Work waits for no replacement: the run goes on with the actors left, and says so once."""
        ray = self.ray
        with self.lock:
            placing = list(self.placing.items())
        for i, (actor, ref, since) in placing:
            if not ray.wait([ref], timeout=0)[0]:
                continue
            with self.lock:
                del self.placing[i]
            try:
                ray.get(ref)
            except ray.exceptions.RayError:
                self._ask_for(i)
                continue
            if self._pushed is not None:
                actor.set_versions.remote(self._pushed)
            with self.lock:
                self.actors[i] = actor
        with self.lock:
            waited = [time.monotonic() - since for _, _, since in self.placing.values()]
        if not waited:
            return None
        left = len(self._started())
        if not left and max(waited) > START_TIMEOUT_S:
            self.crashed = True
            self.stop.set()
            return (f"no runner actor is left and the Ray cluster found no place for a new one in "
                    f"{START_TIMEOUT_S:.0f} s: stopping; --resume plays the pairs left once there is room")
        if left and not self.said_short and max(waited) > REPLACE_NOTICE_S:
            self.said_short = True
            return (f"{len(self.placing)} runner actor(s) lost with their node and not yet replaced (the Ray "
                    f"cluster has no room): going on with {left}")
        return None

    def request_stop(self) -> None:
        self.stop.set()
        for a in self._started():
            a.request_stop.remote()

    def kill(self) -> None:
        """Stop at once: the claims go back to pending/, uncounted (we stopped them, not the agent)."""
        self.killed = True
        self.stop.set()
        for a in self._started() + [a for a, _, _ in self.placing.values()]:
            self.ray.kill(a)
        if self.thread is not None:  # its slots see their actors die at once
            self.thread.join(timeout=KILL_WAIT_S)
        self.queue.reclaim(dead_pids={os.getpid()}, count_error=False)

    async def _pick(self) -> int | None:
        """The least busy started actor with room for one more episode (an episode stays on it, and on
        its model server: see the Router), once there is one; None if the run stops first. The survivors
        of a lost actor take no more episodes than they have room for: one queued inside an actor would
        look like a silent stream."""
        while not self.stop.is_set():
            with self.lock:
                free = [i for i, a in enumerate(self.actors) if a is not None and self.busy[i] < self.per_actor]
            if free:
                i = min(free, key=self.busy.__getitem__)
                self.busy[i] += 1
                return i
            await asyncio.sleep(PICK_POLL_S)
        return None

    async def play(self, item: dict, task, traj, interrupt: Interrupt) -> dict | None:
        """The runner's player: one attempt, played on an actor and written here as it streams."""
        i = await self._pick()
        if i is None:  # stopping while no actor was left to play the pair: back to pending/, uncounted
            return None if self.killed else error_line(item, "interrupted", "the run stopped")
        actor = self.actors[i]
        try:
            rec = await self._stream(actor, item, traj)
        except Exception as e:  # noqa: BLE001 - e.g. a file the run would not write through: this attempt's error
            rec = error_line(item, "runner_error", self.redact(f"{type(e).__name__}: {_why(e)}"))
        finally:
            self.busy[i] -= 1
        if rec is None:
            if self.killed:
                return None  # kill() puts the claim back
            # The actor died under the attempt: a lost runner, not an agent failure. What env it
            # held goes back now, or the server's pool would shrink with every lost actor.
            self._replace(i, actor)
            await asyncio.to_thread(release_leftovers, self.run.path, self.secrets.get("env"), traj_rel(
                item["task_id"], item["sample"], item["attempt"]), local_too=False)
            rec = error_line(item, "runner_lost", "the Ray actor playing this pair died (or its node)")
        return rec

    async def _stream(self, actor, item: dict, traj) -> dict | None:
        """Write the attempt's steps as they arrive; its episode line, or None if the actor died."""
        ray = self.ray
        png, tree, video = [], [], []
        started = heard = time.monotonic()
        following = None
        try:
            # Backpressure is Ray's (underscored) option of streaming generators.
            stream = actor.play.options(num_returns="streaming", _generator_backpressure_num_objects=AHEAD
                                        ).remote(item)
            while True:
                # A step's pieces come together: the next is often here already, and taken without a
                # future (awaiting one costs the loop two hand-offs from Ray's threads).
                if following is None and ray.wait([stream], timeout=0)[0]:
                    ref = next(stream)
                else:
                    if following is None:
                        following = asyncio.ensure_future(stream.__anext__())
                    if not (await asyncio.wait([following], timeout=self.lost_after_s / PINGS_PER_LOSS))[0]:
                        heard = await self._probe(actor, heard)
                        now = time.monotonic()
                        if now - heard > self.lost_after_s or now - started > self.longest_s:
                            return None  # gone quiet without Ray noticing: lost (and killed, see _replace)
                        continue
                    ref, following = following.result(), None
                message = ray.get(ref)  # ready, in this process's memory
                heard = time.monotonic()
                if message[0] == "png":
                    png.append(message[1])
                elif message[0] == "a11y":
                    tree.append(message[1])
                elif message[0] == "step":
                    if message[2] is not None:
                        traj.screenshot(message[2], b"".join(png))
                        png = []
                    if "a11y_tree" in message[1]:  # the line names the file of the tree it came with
                        traj.a11y_tree(message[1]["step"], b"".join(tree).decode())
                        tree = []
                    await traj.step(message[1])
                elif message[0] == "lease":
                    traj.lease(message[1])
                elif message[0] == "mp4":
                    video.append(message[1])
                elif message[0] == "video":
                    await asyncio.to_thread(traj.video, b"".join(video))
                    video = []
                else:
                    return message[1]
        except ray.exceptions.RayTaskError as e:  # a bug in cua outside the episode: file it, keep the claim moving
            return error_line(item, "runner_error", self.redact(_why(e)))
        except (ray.exceptions.RayError, StopIteration, StopAsyncIteration):
            return None  # the actor, its node or its stream was lost; a screenshot whose line never came is not written
        finally:
            if following is not None:
                following.cancel()

    async def _probe(self, actor, heard: float) -> float:
        """When the actor was last heard from: now if it answers a ping in time."""
        try:
            await asyncio.wait_for(actor.ping.options(concurrency_group="probe").remote(),
                                   self.lost_after_s / PINGS_PER_LOSS)
        except TimeoutError:
            return heard
        return time.monotonic()  # an actor known dead raises, as a stream would

    def _replace(self, i: int, dead) -> None:
        """Ask for a new actor in place of one that died or was lost (once, however many of its slots
        saw it). A lost one may still live (a node cut off for a while): it is killed, so that it
        plays none of its episodes on, nobody reading them."""
        with self.lock:
            if self.actors[i] is not dead:
                return
            self.actors[i] = None
        self.ray.kill(dead)
        self._ask_for(i)

    def _ask_for(self, i: int) -> None:
        with self.lock:
            if self.stop.is_set() or i in self.placing:
                return
            if self.restarts >= MAX_RESTARTS_PER_ACTOR * len(self.actors):
                self.crashed = True
                self.stop.set()
                return
            self.restarts += 1
            actor = self._new_actor()
            self.placing[i] = (actor, actor.ready.remote(), time.monotonic())
