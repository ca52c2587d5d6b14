"""`cua check-tasks`: every task of a config played with its oracle's answers and with an answer that
does nothing, `repeat` times each, by the rollout driver itself; each task's verdict in a report
(stats/task_checks.py says how a task is judged).

A check is two rollouts with the script provider, in a check folder of its own:

    CHECK/check.json            what is checked: the config and the oracle's answers file
    CHECK/oracle-<stamp>/       a run folder: the oracle's answers (model.script), tasks.rollout_n = repeat
    CHECK/noop-<stamp>/         a run folder: no answers at all, so every step gets the agent's own answer
                                that does nothing (its idle, else its end: models/script.py), for one step
    CHECK/noop.json             the no-op run's script: {}
    CHECK/report.jsonl          one verdict per task (or --report FILE)

Both runs use the config's env, pool and limits, so a check is as parallel as a rollout, and
`--resume CHECK` resumes them as `cua rollout --resume` does: a finished pair is never played again
(a larger repeat adds samples). What would send the check's episodes elsewhere is switched off:
model.fleet, checkpoint reloads, adaptive rounds and DART's storage.
"""

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .. import __version__
from .._util.atomic import write_atomic
from .._util.diag import note
from .._util.redact import read_secrets
from .._util.signals import StopFlags
from ..config import Config, load_config
from ..errors import CuaError, InputError
from ..models.script import read_script
from ..osworld.support import steps_and_evaluator
from ..runfolder.confined import Refused, read_in
from ..runfolder.names import encode_task_id
from ..stats.task_checks import OK, UNSUPPORTED, plays_of, report_line, unsupported_line, write_report
from ..tasks import load_tasks
from .desktops import refusals
from .driver import rollout

ORACLE, NOOP = "oracle", "noop"
CHECK_FILE = "check.json"
MAX_CHECK_FILE = 1 << 20  # bytes: it names the config and the oracle file
NOOP_SCRIPT = "noop.json"
REPORT = "report.jsonl"


@dataclass
class Checked:
    folder: Path
    report: Path | None       # None until both runs are done
    lines: list[dict]         # the report's lines
    interrupted: bool = False
    exit_status: int = 0      # for an interrupted check: 128 + the signal

    @property
    def not_ok(self) -> list[dict]:
        """The tasks whose verdict is a problem (unsupported ones are never played, so never one)."""
        return [line for line in self.lines if line["status"] not in (OK, UNSUPPORTED)]


def check_tasks(config: str, overrides: tuple[str, ...], oracle: str | None, repeat: int, flags: StopFlags,
                resume: str | None = None, report: str | None = None) -> Checked:
    """Play the oracle run, then the no-op run, then judge every task of the config."""
    if report and not Path(report).resolve().parent.is_dir():
        raise InputError(f"--report {report}: there is no folder {Path(report).resolve().parent}")
    folder, doc = _open(resume) if resume else (None, {})
    base = load_config(config, overrides)
    script = _oracle_file(base, oracle or doc.get("oracle"))
    answers = read_script(script)
    tasks = load_tasks(base)
    refused = {r["task_id"]: r["missing"] for r in refusals(base, tasks)}
    without = [t.task_id for t in tasks if t.task_id not in refused and t.task_id not in answers]
    if without:
        raise InputError(f"{script}: the oracle has no answers for {len(without)} of the {len(tasks)} tasks, e.g. "
                         f"{', '.join(map(repr, without[:3]))}; give them, or leave those tasks out of the config")
    if folder is None:
        folder = _create(base, config)
        doc = {"kind": "cua check-tasks", "cua_version": __version__,
               "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "config": str(Path(config).resolve())}
    if doc.get("oracle") != str(script):
        _write_json(folder / CHECK_FILE, {**doc, "oracle": str(script)})
    if not (folder / NOOP_SCRIPT).is_file():
        _write_json(folder / NOOP_SCRIPT, {})

    # Applied after the user's --set: a check's episodes are scored and kept here, and nowhere else.
    fixed = ("model.provider=script", "model.fleet=null", "model.api_key_env=null", "model.reload_from=null",
             "tasks.adaptive.rounds=0", "storage.dart.root=null", "storage.mysql.url_env=null",
             f"tasks.rollout_n={repeat}", f"run.results_dir={json.dumps(str(folder))}")
    phases = {ORACLE: (f"model.script={json.dumps(str(script))}",),
              NOOP: (f"model.script={json.dumps(str(folder / NOOP_SCRIPT))}", "runner.max_steps=1")}
    configs = {phase: load_config(config, (*overrides, *fixed, f"run.name={phase}", *extra))
               for phase, extra in phases.items()}
    runs = {}
    for phase, cfg in configs.items():
        if flags.count:
            return Checked(folder, None, [], True, flags.exit_status)
        note(f"check-tasks: {folder}: the {'oracle' if phase == ORACLE else 'no-op'} run, {repeat} per task")
        out = rollout(cfg, read_secrets(cfg), flags, _run_of(folder, phase))
        runs[phase] = out.run.path
        if out.crashed:
            raise CuaError("runner processes kept crashing; see the errors above")
        if out.interrupted:
            return Checked(folder, None, [], True, out.exit_status)

    oracle_plays, noop_plays = plays_of(runs[ORACLE]), plays_of(runs[NOOP])
    lines = []
    for t in tasks:
        if t.task_id in refused:
            lines.append(unsupported_line(t.task_id, t.domain, refused[t.task_id]))
            continue
        infeasible = steps_and_evaluator(t.to_dict())[1].get("func") == "infeasible"
        lines.append(report_line(t.task_id, t.domain, oracle_plays.get(t.task_id, []),
                                 noop_plays.get(t.task_id, []), infeasible))
    path = Path(report) if report else folder / REPORT
    try:
        write_report(path, lines)
    except OSError as e:
        raise CuaError(f"{path}: cannot write the report: {e.strerror}") from None
    return Checked(folder, path, lines)


def _oracle_file(cfg: Config, given: str | None) -> Path:
    """The oracle's answers: --oracle (or the resumed check's), else the config's model.script."""
    if given:
        return Path(given).resolve()
    if cfg.model.script:
        return cfg.resolve_path(cfg.model.script).resolve()
    raise InputError(f"{cfg.source}: model.script: the config names no oracle answers; give --oracle FILE "
                     '(a JSON file {"task_id": [answer, ...]})')


def _open(resume: str) -> tuple[Path, dict]:
    """A check folder to resume, and its check.json."""
    folder = Path(resume).resolve()
    try:  # only a regular file, never through a link: a FIFO would wait for ever
        raw = read_in(str(folder), CHECK_FILE, MAX_CHECK_FILE)
        doc = json.loads(raw) if len(raw) <= MAX_CHECK_FILE else None
    except (OSError, Refused, ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("oracle"), str):
        raise InputError(f"{resume}: not a cua check-tasks folder (no readable {CHECK_FILE})")
    return folder, doc


def _create(cfg: Config, config: str) -> Path:
    """A new check folder, <run.results_dir>/<run.name>-check-<stamp>."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    base = cfg.resolve_path(cfg.run.results_dir) / f"{encode_task_id(cfg.run.name)}-check-{stamp}"
    path, n = base, 1
    while True:
        try:
            path.mkdir(parents=True)
            return path.resolve()
        except FileExistsError:
            n += 1
            path = base.with_name(f"{base.name}-{n}")
        except OSError as e:
            raise InputError(f"{config}: run.results_dir: cannot make {path}: {e.strerror}") from None


def _run_of(folder: Path, phase: str) -> str | None:
    """The phase's run folder in a check folder being resumed; None when it has none yet."""
    linked = sorted(p for p in folder.glob(f"{phase}-*") if p.is_symlink())
    if linked:  # a run the check would write into, outside the check folder
        raise InputError(f"{linked[0]}: is a link; a check folder's runs are folders in it")
    found = sorted(p for p in folder.glob(f"{phase}-*") if (p / "run.json").is_file())
    if len(found) > 1:
        raise InputError(f"{folder}: holds {len(found)} {phase} runs ({', '.join(p.name for p in found)}); "
                         "a check folder holds one")
    return str(found[0]) if found else None


def _write_json(path: Path, doc) -> None:
    try:
        write_atomic(path, (json.dumps(doc, indent=2) + "\n").encode())
    except OSError as e:
        raise CuaError(f"{path}: cannot write: {e.strerror or e}") from None
