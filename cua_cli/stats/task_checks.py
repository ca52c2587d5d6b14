"""Task self-tests (`cua check-tasks`): each task's verdict from its oracle and no-op runs, the
report's lines, and leaving the tasks a report calls broken out of a run (`cua stats --exclude-broken`).

A task is judged by the final result of each of its (task, sample) pairs in the two runs. The first
verdict that applies is the task's:

    setup_error   a pair never reached a score: an env, setup step, desktop allocation or runner
                  error, a timeout, or a pair that never finished
    eval_error    the evaluator failed on an ended episode
    flaky         the oracle's scores differ between samples, or the no-op's do
    oracle_fails  the oracle's answers do not succeed (score below 1)
    noop_passes   answering nothing succeeds; never said of an infeasible task (below)
    ok            none of these

An error leaves nothing to judge, and a score that changes makes one judgement of it meaningless,
hence the order; `why` names every problem found, not only the first.

An infeasible task (evaluator func `infeasible`, OSWorld's rule: 1 exactly when the last action is
FAIL) has nothing of its own for a no-op to expose: its right answer is itself to stop without
acting, and the rule is cua's code, the same for every such task. Its no-op is played and shown,
never judged; its oracle (FAIL) must succeed and its scores must not change, as for any task.

Tasks cua cannot play (`unsupported.jsonl`) get the verdict `unsupported`: no rollout plays them,
so no run's figures depend on them.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from .._util.atomic import write_atomic
from .._util.text import clip
from ..config import read_text
from ..errors import InputError
from ..runfolder.reader import RunReader
from .readers import RunData

OK, ORACLE_FAILS, NOOP_PASSES, FLAKY, SETUP_ERROR, EVAL_ERROR = (
    "ok", "oracle_fails", "noop_passes", "flaky", "setup_error", "eval_error")
VERDICTS = (OK, ORACLE_FAILS, NOOP_PASSES, FLAKY, SETUP_ERROR, EVAL_ERROR)
UNSUPPORTED = "unsupported"
MAX_REPORT_BYTES = 256 << 20


@dataclass(frozen=True)
class Play:
    """The final result of one (task, sample) pair; outcome None: it never finished."""
    outcome: str | None
    score: float | None = None
    stop_reason: str | None = None
    error: str | None = None

    @property
    def scored(self) -> bool:
        return self.outcome in ("success", "failure")


NEVER_PLAYED = Play(None, error="never played")


def verdict(oracle: list[Play], noop: list[Play], infeasible: bool = False) -> tuple[str, str]:
    """(verdict, why) of a task from its oracle's plays and its no-op's (one per sample)."""
    oracle, noop = oracle or [NEVER_PLAYED], noop or [NEVER_PLAYED]
    named = [(f"oracle sample {i}", p) for i, p in enumerate(oracle)] + \
            [(f"no-op sample {i}", p) for i, p in enumerate(noop)]
    setup = [(n, p) for n, p in named if not p.scored and p.stop_reason != "eval_error"]
    evals = [(n, p) for n, p in named if p.stop_reason == "eval_error"]
    if setup or evals:
        return (SETUP_ERROR if setup else EVAL_ERROR), _errors(setup + evals)
    problems = []
    for who, plays in (("oracle", oracle), ("no-op", noop)):
        if len({p.score for p in plays}) > 1:
            problems.append((FLAKY, f"the {who}'s scores differ: {_scores(plays)}"))
    if any(p.outcome != "success" for p in oracle):
        problems.append((ORACLE_FAILS, f"the oracle scores {_scores(oracle)} ({_reasons(oracle)})"))
    if not infeasible and any(p.outcome == "success" for p in noop):
        problems.append((NOOP_PASSES, f"answering nothing scores {_scores(noop)} ({_reasons(noop)})"))
    if not problems:
        return OK, "infeasible: the no-op is not judged" if infeasible else ""
    return problems[0][0], "; ".join(why for _, why in problems)  # found in the order of precedence


def _scores(plays: list[Play]) -> str:
    return ", ".join(f"{p.score:.4g}" for p in plays)


def _reasons(plays: list[Play]) -> str:
    return "stop reason " + ", ".join(sorted({p.stop_reason or "unknown" for p in plays}))


def _errors(named: list[tuple[str, Play]]) -> str:
    who, p = named[0]
    text = f"{who}: {p.stop_reason or 'not finished'}" + (f": {clip(p.error, 300)}" if p.error else "")
    return text + (f" (and {len(named) - 1} more)" if len(named) > 1 else "")


def report_line(task_id: str, domain: str | None, oracle: list[Play], noop: list[Play],
                infeasible: bool = False) -> dict:
    """A task's line of the report: its verdict, why, and each group's results by sample."""
    status, why = verdict(oracle, noop, infeasible)
    return {"task_id": task_id, "domain": domain, "status": status, "why": why, "infeasible": infeasible,
            "oracle": _group(oracle), "noop": _group(noop)}


def unsupported_line(task_id: str, domain: str | None, missing: list[str]) -> dict:
    return {"task_id": task_id, "domain": domain, "status": UNSUPPORTED,
            "why": "cua cannot play it: " + ", ".join(missing), "infeasible": False, "oracle": None, "noop": None}


def _group(plays: list[Play]) -> dict:
    return {"scores": [p.score for p in plays], "outcomes": [p.outcome for p in plays],
            "stop_reasons": [p.stop_reason for p in plays], "errors": [p.error for p in plays]}


def plays_of(run_path) -> dict[str, list[Play]]:
    """Each task's plays in a run folder, by sample; a scheduled pair with no line never finished."""
    reader = RunReader(run_path, strict=True).refresh(warn=True)
    out: dict[str, list[Play]] = {}
    for task_id, sample in sorted(reader.scheduled, key=lambda pair: pair[1]):
        rec = reader.final.get((task_id, sample))
        out.setdefault(task_id, []).append(
            Play(None, error="never finished") if rec is None else
            Play(rec["outcome"], rec.get("score"), rec.get("stop_reason"), rec.get("error")))
    return out


def read_report(path) -> dict[str, str]:
    """task id -> verdict, from a `cua check-tasks` report; a line that is not one is an InputError."""
    text = read_text(path, MAX_REPORT_BYTES, "the check-tasks report")
    out = {}
    for n, line in enumerate(text.split("\n"), 1):  # not splitlines: \x85 or \u2028 may be in an id
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            raise InputError(f"{path}:{n}: not a JSON line of a check-tasks report") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("task_id"), str) or \
                rec.get("status") not in (*VERDICTS, UNSUPPORTED):
            raise InputError(f"{path}:{n}: a check-tasks report line has a task_id and a status, one of "
                             f"{', '.join((*VERDICTS, UNSUPPORTED))}")
        out[rec["task_id"]] = rec["status"]
    return out


def broken(report: dict[str, str]) -> set[str]:
    """The tasks a report does not call ok (unsupported ones included: no run holds them anyway)."""
    return {t for t, status in report.items() if status != OK}


def leave_out(data: RunData, tasks: set[str]) -> tuple[int, int]:
    """Drop the pairs of `tasks` from a run read for stats; (pairs, tasks) dropped."""
    gone = [pair for pair in data.pairs if pair[0] in tasks]
    for pair in gone:
        del data.pairs[pair]
    return len(gone), len({t for t, _ in gone})


def write_report(path: Path, lines: list[dict]) -> None:
    write_atomic(path, "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode(
        "utf-8", "backslashreplace"))
