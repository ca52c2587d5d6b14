"""Sinks: where finished trajectories go besides the run folder (DART's folders, DART's MySQL table).

The run folder stays the source of truth. A SinkFollower in the rollout's
driver reads episodes.jsonl as it grows and hands each finished trajectory
(every attempt that is not an infrastructure error) to every sink. Sinks are
idempotent, so a resumed run, or one whose database was down for a while,
simply replays what is not there yet: nothing finished is ever lost.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..errors import CuaError
from ..runfolder.confined import Refused, read_in, run_root
from ..runfolder.jsonl import scan, warn, warn_problems
from ..runfolder.names import pair_key
from ..runfolder.reader import read_steps, trajectory_dir
from ..runfolder.records import episode_record


class SinkUnavailable(CuaError):
    """The sink cannot take trajectories now (a database down): try again later."""


@dataclass(frozen=True)
class Finished:
    run_id: str
    run_dir: Path
    record: dict        # the episode line (checked by runfolder.records.episode_record)
    traj_dir: Path      # run_dir / record["traj"], inside run_dir (runfolder.reader.trajectory_dir)
    task: dict          # the pair's task: task_id, domain, instruction, config, evaluator ({} if gone)
    trace_id: str       # stable per attempt: the same run, task, sample and attempt give the same id

    def steps(self) -> list[dict]:
        """The trajectory's step lines, ordered by step."""
        steps, problems, path = read_steps(str(self.traj_dir))
        warn_problems(path, problems)
        return [s for _, s in steps]


class Sink(Protocol):
    def write(self, t: Finished) -> object: ...
    def close(self) -> None: ...


def trace_id(run_id: str, task_id: str, sample: int, attempt: int) -> str:
    text = json.dumps([run_id, task_id, sample, attempt]).encode("utf-8", "surrogatepass")
    return hashlib.sha256(text).hexdigest()[:16]


class SinkFollower:
    """Hands each finished trajectory of a run to the sinks, in order; retries a sink that is down."""

    RETRY_S = 10.0
    MAX_POLLS_UNFILED = 20

    def __init__(self, run_dir: Path, sinks: list[Sink], run_id: str):
        self.run_dir = Path(run_dir)
        self.root = run_root(run_dir)
        self.run_id = run_id
        self.sinks = sinks
        self.offset, self.line = 0, 1
        self.waiting: list[Finished] = []   # read, not yet taken by every sink
        self.unfiled: list[tuple[dict, int]] = []  # episode lines whose queue file has not moved yet, and polls
        self.done: list[set] = [set() for _ in sinks]
        self.retry_at = 0.0

    def poll(self) -> None:
        """Read new episode lines, and pass what is waiting to the sinks (a down sink is retried later)."""
        episodes = self.run_dir / "episodes.jsonl"
        rows, problems, self.offset, self.line = scan(episodes, self.offset, self.line)
        warn_problems(episodes, problems)
        recs = [(rec, f"{episodes}:{n}", 0) for n, (rec, _) in ((n, episode_record(obj)) for n, obj in rows.items())
                if rec is not None and rec["outcome"] != "error" and isinstance(rec.get("traj"), str)]
        unfiled, self.unfiled = self.unfiled + recs, []
        for rec, where, polls in unfiled:
            task = self._task(rec)
            if task is None and polls < self.MAX_POLLS_UNFILED:  # the queue writes the line, then moves the file
                self.unfiled.append((rec, where, polls + 1))
                continue
            finished = self._finished(rec, where, task or {})
            if finished is not None:
                self.waiting.append(finished)
        if not self.waiting or time.monotonic() < self.retry_at:
            return
        for i, sink in enumerate(self.sinks):
            for t in self.waiting:
                if t.trace_id in self.done[i]:
                    continue
                try:
                    sink.write(t)
                except SinkUnavailable as e:
                    warn(f"{type(sink).__name__}: {e}; trying again in {self.RETRY_S:.0f} s")
                    self.retry_at = time.monotonic() + self.RETRY_S
                    break
                except CuaError as e:  # this trajectory cannot go there (say, recorded without its prompt)
                    warn(f"{type(sink).__name__}: {t.record['task_id'][:100]!r} sample {t.record['sample']}: {e}")
                self.done[i].add(t.trace_id)
        self.waiting = [t for t in self.waiting if not all(t.trace_id in d for d in self.done)]

    def _task(self, rec: dict) -> dict | None:
        """The pair's task, from its queue file once it is done; None while it is not there."""
        for state in ("done", "failed"):
            try:
                item = json.loads(read_in(self.root, f"queue/{state}/{pair_key(rec['task_id'], rec['sample'])}.json"))
            except (OSError, Refused, ValueError, RecursionError):
                continue
            if isinstance(item, dict):
                return {k: item.get(k) for k in ("task_id", "domain", "instruction", "config", "evaluator")}
        return None

    def _finished(self, rec: dict, where: str, task: dict) -> Finished | None:
        traj_dir = trajectory_dir(self.root, rec, where)
        if traj_dir is None:
            return None
        return Finished(self.run_id, self.run_dir, rec, Path(traj_dir), task,
                        trace_id(self.run_id, rec["task_id"], rec["sample"], rec["attempt"]))

    def start(self, every_s: float = 2.0) -> None:
        """Follow the run in a thread of its own, so slow sinks never hold up the rollout."""
        self._stop = threading.Event()

        def follow():
            while not self._stop.wait(every_s):
                self.poll()

        self._thread = threading.Thread(target=follow, name="cua-sinks", daemon=True)
        self._thread.start()

    def finish(self, wait_s: float = 10.0) -> int:
        """Stop following; pass on what is left, waiting up to `wait_s` for a sink that is down.
        Returns how many trajectories some sink still lacks (a `--resume` catches them up)."""
        self._stop.set()
        self._thread.join()
        deadline = time.monotonic() + wait_s
        while True:
            self.retry_at = 0.0
            self.poll()
            if not self.waiting and not self.unfiled or time.monotonic() > deadline:
                break
            time.sleep(min(self.RETRY_S, 2.0))
        for sink in self.sinks:
            sink.close()
        return len(self.waiting) + len(self.unfiled)


class DartSink:
    """What DART's rollouter leaves for DART-GUI's trainer: the trajectory's folder, then its
    `rollout_run` row pointing at that folder (either may be off)."""

    def __init__(self, folders=None, rows=None):
        self.folders, self.rows = folders, rows

    def write(self, t: Finished) -> None:
        split_dir = str(self.folders.root / self.folders.write(t)) if self.folders else None
        if self.rows:
            self.rows.write(t, split_dir)

    def close(self) -> None:
        if self.rows:
            self.rows.close()


def mysql_sink(cfg, secrets: dict):
    """A connection to storage.mysql's database (each thread needs its own)."""
    from .mysql import InsertRule, MySQLSink
    m = cfg.storage.mysql
    return MySQLSink(secrets["mysql"], InsertRule(m.min_steps_for_zero, m.skip_errors))


def make_sinks(cfg, secrets: dict) -> list[Sink]:
    """The sinks the config's `storage` section asks for; a database is reached now, so a bad URL fails at once."""
    dart = cfg.storage.dart
    folders = rows = None
    if dart.root:
        from .dart_folder import DartFolderSink
        folders = DartFolderSink(cfg.resolve_path(dart.root))
    if cfg.storage.mysql.url_env:
        rows = mysql_sink(cfg, secrets)
        try:
            rows.ping()
        except SinkUnavailable as e:  # down now, maybe not for long: rows follow once it is back
            warn(f"storage.mysql: {e}; the rollout starts, and its rows follow when the database is back")
    return [DartSink(folders, rows)] if folders or rows else []
