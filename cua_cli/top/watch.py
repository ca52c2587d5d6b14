"""What `cua top` shows of a run, read from its run folder a little at a time.

Each refresh reads only what was appended since the last one (episodes.jsonl
and scheduled.jsonl from their last offsets, each line checked by records.py;
metrics.jsonl likewise, a long one from the last minutes only; claim files
not seen before) and keeps running totals and a few fields of each pair's
final result, not its record, so a run of 100,000 episode lines costs its
first read once and then little per frame. A snapshot is a plain
dict of figures; frame.py draws it.

Recent figures cover the last `window` seconds of the run's clock: now while
it runs, the end of its last attempt once it has ended (so a finished run
shows its last minute, not an empty one). Steps count when their attempt
ends (its episode line), so a recent rate moves in steps of whole episodes.

The run has ended when nothing is pending or claimed and every scheduled pair
is done or failed, and that has held for SETTLE_S (or its last attempt ended
longer ago): an adaptive rollout queues its next round well within that. A
`--watch` rollout whose queue has run dry counts as ended too.
"""

import gc
import json
import os
import re
import time
from collections import Counter, deque
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..runfolder.confined import Refused, confined_dir, open_regular, read_in, run_root
from ..runfolder.jsonl import scan
from ..runfolder.reader import unreadable
from ..runfolder.records import METRICS, episode_record, phases_of, scheduled_record
from ..stats.figures import bootstrap, wilson
from ..stats.timing import SHARES, read_metrics, servers
from .claims import Claims

SETTLE_S = 5.0
MAX_RUN_JSON = 4 << 20      # run.json holds the config: more is not one
METRICS_TAIL = 16 << 20     # a long run's metrics.jsonl is read from this far before its end
MAX_SERVERS = 64            # model servers and GPUs followed (a crafted file may name millions)
MAX_REASONS = 12            # error stop reasons shown; the rest are summed
SLOWEST = 10                # running episodes shown
_MAX_TIME = 1e11            # Unix seconds: beyond is not a time
STATES = ("pending", "claimed", "done", "failed")
# A queue file (not a temporary `.name.json.<hex>.tmp`), matched over a whole listing at once: done/ of a
# large run holds 100,000 names, too many for a Python loop every frame.
_ITEM = re.compile(r"^(?!\.)[^\n]*\.json$", re.MULTILINE)


def _time(v) -> float | None:
    return float(v) if type(v) in (int, float) and 0 <= v < _MAX_TIME else None


def _get(obj, *keys):
    """obj[k1][k2]... of a parsed JSON document, or None where a level is missing or not an object."""
    for k in keys:
        obj = obj.get(k) if type(obj) is dict else None
    return obj


def open_run(path) -> tuple[str, dict | None]:
    """The real path of the run folder `path` and its run.json (None when it holds no JSON object);
    InputError when `path` is no cua run folder."""
    root = run_root(path)
    if not os.path.isdir(root):
        raise InputError(f"{path}: no such run folder")
    try:
        raw = read_in(root, "run.json", MAX_RUN_JSON)
    except FileNotFoundError:
        raise InputError(f"{path}: not a cua run folder (no run.json)") from None
    except (Refused, OSError) as e:
        raise InputError(f"{path}: not a cua run folder cua can read (run.json: {e})") from None
    try:
        meta = json.loads(raw) if len(raw) <= MAX_RUN_JSON else None
    except (ValueError, RecursionError):
        meta = None
    return root, meta if type(meta) is dict else None


def newest_run(results: Path) -> Path:
    """The run folder under `results` written to last (its episodes.jsonl, scheduled.jsonl or run.json)."""
    best = None
    try:
        folders = [d for d in results.iterdir() if (d / "run.json").is_file()]
    except OSError:
        folders = []
    for d in folders:
        stamps = []
        for name in ("run.json", "scheduled.jsonl", "episodes.jsonl"):
            try:
                stamps.append((d / name).stat().st_mtime)
            except OSError:
                pass
        if stamps and (best is None or max(stamps) > best[0]):
            best = (max(stamps), d)
    if best is None:
        raise InputError(f"no run folder under {results}/: give one, e.g. cua top results/exp-20261121-0900")
    return best[1]


def _bad_lines(problems: list, line: int) -> set[int]:
    """The lines a scan found bad; not one at `line`, where reading goes on: a torn last line is looked
    at again, and a file not read at all is said otherwise (reader.unreadable)."""
    return {n for n, _ in problems if n < line}


def _overlap(start: float, end: float, t0: float, t1: float) -> float:
    return max(0.0, min(end, t1) - max(start, t0))


class RunWatch:
    def __init__(self, path, window: float = 60.0):
        self.root, meta = open_run(path)
        self.meta_problem = None if meta is not None else "run.json: holds no JSON object; its config is not known"
        meta = meta or {}
        run_id = meta.get("run_id")
        self.name = run_id if type(run_id) is str else Path(self.root).name
        slots = _get(meta, "config", "runner", "num_envs")
        self.slots = slots if type(slots) is int and 0 < slots <= 10 ** 6 else None
        ttl = _get(meta, "config", "runner", "lease_ttl_s")
        self.lease_ttl = float(ttl) if type(ttl) in (int, float) and 0 < ttl < 1e6 else 60.0
        self.window = window
        self._pos = {"scheduled.jsonl": (0, 1), "episodes.jsonl": (0, 1)}  # byte offset, line number
        self.scheduled: set[tuple[str, int]] = set()
        self.claims = Claims(self.root)
        # Final result of each pair: (attempt, outcome, score, stop_reason); running totals over them.
        self.final: dict[tuple[str, int], tuple] = {}
        self.outcomes = Counter()
        self.reasons = Counter()             # error stop reasons of final results
        self.score_sum = 0.0
        self.fractional = 0                  # judged final scores other than 0 and 1
        # Every attempt: totals, and the recent ones (end, start, steps, duration, phases, lane).
        self.attempts = self.error_attempts = self.steps = 0
        self.busy_s = 0.0
        self.first: float | None = None      # the first attempt's claim
        self.last_end: float | None = None
        self.recent: deque = deque()
        # metrics.jsonl: where to read on, the latest line of each server and GPU, the recent lines.
        self._metrics_pos: tuple[int, int] | None = None
        self.latest: dict[str, dict] = {}
        self.gpus: dict[int, dict] = {}
        self.recent_metrics: deque = deque()
        self._drained_since: float | None = None
        self.bad = Counter()  # per file: lines read that are no JSON object, or no record of the file

    # --- reading -------------------------------------------------------------------------------

    def _read(self, name: str, check) -> list[dict]:
        """The records of the lines appended to `name` since the last read, each line checked by `check`."""
        rows, problems, offset, line = scan(os.path.join(self.root, name), *self._pos[name])
        self._pos[name] = (offset, line)
        bad = _bad_lines(problems, line)
        records = []
        for n, obj in rows.items():
            rec, _ = check(obj)
            if rec is None:
                bad.add(n)
            else:
                records.append(rec)
        self.bad[name] += len(bad)
        return records

    def _read_episodes(self) -> None:
        # What is parsed holds no cycles: the cycle collector walking 100,000 fresh records again and
        # again costs a first read a third of its time.
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._read_lines()
        finally:
            if collecting:
                gc.enable()

    def _read_lines(self) -> None:
        for rec in self._read("scheduled.jsonl", scheduled_record):
            self.scheduled.add((rec["task_id"], rec["sample"]))
        for r in self._read("episodes.jsonl", episode_record):
            self._attempt(r)
            pair = (r["task_id"], r["sample"])
            old = self.final.get(pair)
            if old is None or r["attempt"] >= old[0]:  # records.supersedes, on what is kept of a record
                self._final(pair, old, r)

    def _final(self, pair, old: tuple | None, r: dict) -> None:
        if old:
            self._count(old, -1)
        score = r.get("score") if type(r.get("score")) in (int, float) else None
        self.final[pair] = new = (r["attempt"], r["outcome"], score, r.get("stop_reason") or "unknown")
        self._count(new, 1)

    def _count(self, final: tuple, sign: int) -> None:
        _, outcome, score, reason = final
        self.outcomes[outcome] += sign
        if outcome == "error":
            self.reasons[reason] += sign
            if not self.reasons[reason]:
                del self.reasons[reason]
        elif score is not None:
            self.score_sum += sign * score
            self.fractional += sign * (score not in (0, 1))

    def _attempt(self, r: dict) -> None:
        self.attempts += 1
        self.error_attempts += r["outcome"] == "error"
        steps = r.get("steps") or 0
        self.steps += steps
        start, duration = _time(r.get("started_at")), r.get("duration_s")
        if start is None or duration is None:
            return
        end = start + duration
        self.busy_s += duration
        claimed = start - (_time(r.get("claim_wait_s")) or 0.0)
        self.first = claimed if self.first is None else min(self.first, claimed)
        self.last_end = end if self.last_end is None else max(self.last_end, end)
        lane = r.get("lane") if type(r.get("lane")) is str else None
        self.recent.append((end, start, steps, duration, r.get("phases"), lane))  # phases checked when used

    def _read_metrics(self) -> None:
        path = os.path.join(self.root, METRICS)
        if self._metrics_pos is None:
            self._metrics_pos = (_tail_start(path, 2 * self.window), 1)
        lines, self._metrics_pos, problems = read_metrics(Path(self.root), self._metrics_pos)
        self.bad[METRICS] += len(_bad_lines(problems, self._metrics_pos[1]))
        for m in lines:
            if "server" in m:
                if m["server"] in self.latest or len(self.latest) < MAX_SERVERS:
                    self.latest[m["server"]] = m
                    self.recent_metrics.append(m)
            elif m["gpu"] in self.gpus or len(self.gpus) < MAX_SERVERS:
                self.gpus[m["gpu"]] = m

    def _queue(self) -> tuple[dict, str | None]:
        counts, problem = dict.fromkeys(STATES, 0), None
        for state in STATES:
            try:
                folder = confined_dir(self.root, f"queue/{state}")
                counts[state] = len(_ITEM.findall("\n".join(os.listdir(folder))))
            except Refused as e:
                problem = f"queue/{state} {e}; not read"
            except OSError:
                pass  # no queue yet
        return counts, problem

    # --- the snapshot --------------------------------------------------------------------------

    def refresh(self, now: float | None = None) -> dict:
        """Read what is new and return the figures of this moment."""
        now = time.time() if now is None else now
        self._read_episodes()
        self._read_metrics()
        queue, problem = self._queue()
        claims = self.claims.refresh()
        problems = [p for p in (self.meta_problem, problem, self.claims.problem) if p]
        # A run file that is there but not read (a link, a FIFO, a folder) is said, not shown as empty.
        problems += [f"{name}: {why}" for name in ("scheduled.jsonl", "episodes.jsonl", METRICS)
                     if (why := unreadable(os.path.join(self.root, name)))]
        problems += [f"{name}: {n} bad line{'s' * (n != 1)} (`cua stats` names them)"
                     for name, n in self.bad.items() if n]
        scheduled = len(self.scheduled)
        drained = (scheduled > 0 and queue["pending"] == queue["claimed"] == 0
                   and queue["done"] + queue["failed"] >= scheduled)
        if not drained:
            self._drained_since = None
        elif self._drained_since is None:
            self._drained_since = now
        ended = drained and (now - self._drained_since >= SETTLE_S or now - (self.last_end or 0.0) >= SETTLE_S)
        # The run's clock: now while it runs, its last attempt's end once it is drained.
        t1 = (self.last_end or now) if drained else now
        t0 = t1 - self.window
        while self.recent and self.recent[0][0] <= t0 - self.window:  # ends arrive nearly in order
            self.recent.popleft()
        while self.recent_metrics and self.recent_metrics[0]["t"] <= t0 - self.window:
            self.recent_metrics.popleft()
        snap = {"run": self.name, "path": self.root, "now": now, "clock": t1, "window_s": self.window,
                "status": self._status(scheduled, queue, drained, ended, claims, now),
                "ended": ended, "scheduled": scheduled, "queue": queue, "problems": problems,
                "attempts": self.attempts, "error_attempts": self.error_attempts, "steps": self.steps,
                "elapsed_s": max(0.0, t1 - self.first) if self.first is not None else None}
        snap.update(self._results())
        snap.update(self._rates(t0, t1, claims if not drained else [], now))
        snap["servers"], snap["model_busy"] = self._servers(t0, t1)
        snap["gpus"] = [{"gpu": g, "util": m.get("util"), "mem_used": m.get("mem_used"),
                         "mem_total": m.get("mem_total")} for g, m in sorted(self.gpus.items())]
        snap["slowest"] = self._slowest(claims, now)
        return snap

    def _status(self, scheduled: int, queue: dict, drained: bool, ended: bool, claims, now: float) -> str:
        if ended:
            return "ended"
        if drained:
            return "finishing"
        if not scheduled:
            return "starting: nothing scheduled yet"
        if not queue["claimed"]:
            return f"waiting: nothing running, {queue['pending']} pending (is the rollout running?)"
        beat = max((c.heartbeat for c in claims), default=None)
        if beat is not None and now - beat > self.lease_ttl:
            return f"stalled: no claim renewed for {now - beat:.0f} s (is the rollout running?)"
        return "running"

    def _results(self) -> dict:
        judged = self.outcomes["success"] + self.outcomes["failure"]
        rate = self.score_sum / judged if judged else None
        if not judged:
            ci = None
        elif self.fractional:
            ci = bootstrap(np.array([s for _, o, s, _ in self.final.values() if o != "error" and s is not None]))
        else:
            ci = wilson(self.score_sum, judged)
        scheduled = len(self.scheduled)
        reasons = self.reasons.most_common()
        shown = reasons[:MAX_REASONS]
        if len(reasons) > MAX_REASONS:
            shown.append(("(others)", sum(n for _, n in reasons[MAX_REASONS:])))
        return {"success": self.outcomes["success"], "failure": self.outcomes["failure"],
                "errors": self.outcomes["error"], "judged": judged, "success_rate": rate, "ci95": ci,
                "success_rate_scheduled": self.score_sum / scheduled if scheduled else None,
                "errors_by_stop_reason": shown}

    def _rates(self, t0: float, t1: float, claims, now: float) -> dict:
        """Steps/s and the env slots' time: over the window and over the whole run."""
        span = min(self.window, t1 - self.first) if self.first is not None else 0.0
        overall = t1 - self.first if self.first is not None else 0.0
        steps = busy = 0.0
        groups = [0.0] * len(SHARES)
        lanes = set()
        for end, start, n, duration, phases, lane in self.recent:
            if t0 < end <= t1:
                steps += n
            part = _overlap(start, end, t0, t1)
            if part and duration:
                busy += part
                lanes.add(lane)
                if phases_of({"phases": phases}):
                    for i, group in enumerate(SHARES.values()):
                        groups[i] += sum(phases[p] for p in group) * part / duration
        started = [c.claimed_at for c in claims if c.claimed_at is not None]
        running = sum(_overlap(at, now, t0, t1) for at in started)
        slots = max(self.slots or 0, len(lanes - {None}), len(claims)) or None
        out = {"steps_per_s_recent": steps / span if span > 0 else None,
               "steps_per_s": self.steps / overall if overall > 0 else None,
               "slots": slots, "env_busy_recent": None, "env_busy": None, "env_recent": None}
        if slots and span > 0:
            slot_s = slots * span
            out["env_busy_recent"] = min(1.0, (busy + running) / slot_s)
            out["env_recent"] = {**{name: v / slot_s for name, v in zip(SHARES, groups)}, "running": running / slot_s}
        if slots and overall > 0:
            out["env_busy"] = min(1.0, (self.busy_s + sum(max(0.0, now - at) for at in started)) / (slots * overall))
        return out

    def _servers(self, t0: float, t1: float) -> tuple[list[dict], float | None]:
        recent = [m for m in self.recent_metrics if t0 < m["t"] <= t1]
        figures = {s["server"]: s for s in servers(recent)}
        rows = []
        for name, last in sorted(self.latest.items()):
            f = figures.get(name, {})
            rows.append({"server": name, "up": last["up"], "at": last["t"],
                         **{k: last.get(k) for k in ("running", "waiting", "kv_usage")},
                         **{k: f.get(k) for k in ("busy", "prefix_hit_rate", "generation_tokens_per_s",
                                                  "queue_wait_mean_s")}})
        busy = [r["busy"] for r in rows if r["busy"] is not None]
        return rows, (sum(busy) / len(busy) if busy else None)

    def _slowest(self, claims, now: float) -> list[dict]:
        oldest = sorted(claims, key=lambda c: (c.claimed_at is None, c.claimed_at or 0.0))[:SLOWEST]
        return [{"task_id": c.task_id, "sample": c.sample, "attempt": c.attempt,
                 "running_s": max(0.0, now - c.claimed_at) if c.claimed_at is not None else None,
                 "steps": self.claims.steps(c)} for c in oldest]


def _line_time(f, offset: int, size: int) -> tuple[int, float | None]:
    """The start of the first whole line at or after `offset` (`size` if none) and its "t", if it has one."""
    f.seek(offset)
    data = f.read(1 << 16)
    start = 0 if offset == 0 else data.find(b"\n") + 1
    if offset and not start:
        return size, None
    end = data.find(b"\n", start)
    try:
        t = json.loads(data[start:end if end >= 0 else None]).get("t")
    except (ValueError, RecursionError, AttributeError):
        t = None
    return offset + start, _time(t)


def _tail_start(path: str, span: float) -> int:
    """Where to start reading a long run's metrics.jsonl: far enough back for its last `span` seconds,
    and never more than METRICS_TAIL bytes back; 0 for a short file."""
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size <= 1 << 20:
                return 0
            _, last = _line_time(f, max(0, size - (1 << 16)), size)
            back = 1 << 20
            while True:
                start, t = _line_time(f, size - back, size)
                if back >= min(size, METRICS_TAIL) or (last is not None and t is not None and t <= last - span):
                    return start
                back = min(back * 4, size, METRICS_TAIL)
    except (Refused, OSError):
        return 0
