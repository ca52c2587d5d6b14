"""`cua export`: run folders -> step-wise rows an RL trainer reads, or ATIF trajectories
(docs/guides/training-data.md).

    runs.py      the runs, each once, and the attempts to export
    groups.py    GRPO groups and their score statistics
    rows.py      one row per model call, from traj.jsonl
    images.py    the prompts' image files: path, sha256, size
    atif.py      one Harbor ATIF trajectory per attempt, its images copied next to it
    writers.py   jsonl, parquet, sft, atif; written atomically
"""

import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from .._util.diag import warn
from .._util.ranges import parse_ranges
from ..errors import InputError
from ..runfolder.records import OUTCOMES
from .groups import EMPTY, group_id, group_stats
from .rows import trajectory_rows
from .runs import open_runs
from .writers import WRITERS, output

_MAX_VERSION = 2 ** 53
ACTORS = ("all", "agent", "human")


@dataclass
class ExportOptions:
    group_by: str = "task"              # "task" or "run-task"
    all_attempts: bool = False
    outcomes: str | None = None         # e.g. "success,failure"
    min_steps: int = 0
    policy_versions: str | None = None  # e.g. "3-5,7"
    mixed_groups: bool = False
    failed_tries: bool = False
    actors: str = "all"                 # "agent": attempts no person took over; "human": only those
    outcome_set: frozenset = field(init=False)
    version_ranges: list | None = field(init=False)

    def __post_init__(self):
        if self.group_by not in ("task", "run-task"):
            raise InputError(f"--group-by: {self.group_by!r} is not task or run-task")
        if type(self.min_steps) is not int or self.min_steps < 0:
            raise InputError(f"--min-steps: {self.min_steps!r} is not an integer >= 0")
        if self.actors not in ACTORS:
            raise InputError(f"--actors: {self.actors!r:.40} is not one of {', '.join(ACTORS)}")
        self.outcome_set = frozenset(OUTCOMES)
        if self.outcomes is not None:
            wanted = [o.strip() for o in self.outcomes.split(",")]
            bad = [o for o in wanted if o not in OUTCOMES]
            if bad:
                raise InputError(f"--outcomes: {bad[0][:40]!r} is not one of {', '.join(OUTCOMES)}")
            self.outcome_set = frozenset(wanted)
        self.version_ranges = None
        if self.policy_versions is not None:
            try:
                self.version_ranges = parse_ranges(self.policy_versions, _MAX_VERSION)
            except ValueError as e:
                raise InputError(f"--policy-versions: {e}") from None

    def keeps_actors(self, rec: dict) -> bool:
        """Whether the attempt's actors are the ones asked for: `human_steps` counts a person's turns."""
        human = type(rec.get("human_steps")) is int and rec["human_steps"] > 0
        return self.actors == "all" or (self.actors == "human") == human

    def keeps_version(self, v) -> bool:
        return self.version_ranges is None or v is not None and any(v in r for r in self.version_ranges)


def export_runs(paths: list[Path], out: Path, fmt: str, options: ExportOptions) -> dict:
    """Export the runs at `paths` to `out` in format `fmt` (jsonl, parquet, sft or atif); a summary."""
    t0 = time.monotonic()
    if fmt not in WRITERS:
        raise InputError(f"--format: {fmt!r} is not one of {', '.join(WRITERS)}")
    if fmt == "atif" and options.version_ranges is not None:
        raise InputError("--policy-versions: not with --format atif, which writes each trajectory whole")
    runs = open_runs(paths)
    out_real = os.path.realpath(out)
    for run in runs:
        if out_real == run.real or out_real.startswith(os.path.join(run.real, "")):
            raise InputError(f"--out {out}: inside the run folder {run.path}; export never writes into a run")
    if fmt == "atif":
        if os.path.lexists(out) and not (os.path.isdir(out) and not os.path.islink(out) and not os.listdir(out)):
            raise InputError(f"--out {out}: exists and is not an empty folder; give a new folder")
    elif os.path.isdir(out_real):
        raise InputError(f"--out {out}: is a folder; give a file name")

    scores = defaultdict(list)
    for run in runs:
        for rec in run.finals():
            if rec["outcome"] != "error":
                scores[group_id(options.group_by, run.run_id, rec["task_id"])].append(rec["score"])
    groups = group_stats(scores)

    outcomes = options.outcome_set & {"success"} if fmt == "sft" else options.outcome_set
    chosen, skipped = [], 0
    for run in runs:
        for line, rec in run.attempts(options.all_attempts):
            g = group_id(options.group_by, run.run_id, rec["task_id"])
            group = groups.get(g, EMPTY)
            if rec["outcome"] in outcomes and (group.mixed or not options.mixed_groups) and options.keeps_actors(rec):
                chosen.append((run, line, rec, g, group))
            else:
                skipped += 1

    exported, written, dropped, kept_groups = 0, 0, 0, set()
    with output(out, fmt) as writer:
        for run, line, rec, g, group in tqdm(chosen, unit="traj", file=sys.stderr, disable=not sys.stderr.isatty(),
                                             dynamic_ncols=True, desc="export"):
            rows, steps, found = trajectory_rows(run, line, rec, g, group, options.failed_tries and fmt != "sft")
            if len(steps) < options.min_steps:
                skipped += 1
                continue
            exported += 1
            kept_groups.add(g)
            if fmt == "atif":
                written += writer.add_attempt(run, rec, g, group, found, steps, rows)
                continue
            if fmt == "sft":  # the conversation is the last step's call
                rows = [r for r in rows if r["is_last_step"]]
                if not rows:
                    warn(f"{run.path}/episodes.jsonl:{line}: no recorded answer; not in the sft file")
            keep = [r for r in rows if options.keeps_version(r["policy_version"])]
            dropped += len(rows) - len(keep)
            if keep:
                written += writer.add(keep)

    written_label = {"sft": "lines written", "atif": "files written"}.get(fmt, "rows written")
    summary = {"runs": len(runs), "trajectories": exported, written_label: written, "groups": len(kept_groups),
               "trajectories skipped by filters": skipped}
    if options.version_ranges is not None:
        summary["rows skipped by --policy-versions"] = dropped
    summary.update({"seconds": round(time.monotonic() - t0, 2), "out": str(out)})
    return summary
