"""What every getter is given and the helpers they share: a getter is `getter(ctx, config) -> value`,
`config` the task's getter object (`{"type": ..., ...}`), the value what the metric compares. As in
OSWorld, "not there" is a value: a file missing on the desktop is None, for the metric to score. A
desktop that fails raises EnvError (the evaluator reports it as EvalError)."""

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..._util.budget import Budget
from ..._util.retry import pause
from ...errors import BadTask
from ..desktop_api import Desktop
from ..local_files import Downloads


@dataclass
class EvalContext:
    """What getters use: OSWorld passes its whole DesktopEnv, cua passes this."""
    desktop: Desktop
    downloads: Downloads
    folder: Path                  # this episode's folder (as setup's): vm_file copies, stdout captures
    budget: Budget
    file_tries: int = 3           # OSWorld asks for a missing file 3 times ...
    file_retry_s: float = 5.0     # ... 5 s apart (never past the deadline)


def need(config: dict, key: str, types=str):
    value = config.get(key)
    if not isinstance(value, types) or isinstance(value, bool):
        raise BadTask(f"getter {config.get('type')!r}: {key!r} is missing or of the wrong type")
    return value


def many(config: dict, getter: str) -> tuple[list, list, set]:
    """(sources, dests, the indices handed to the metric) of a possibly `multi` getter."""
    if config.get("multi", False):
        paths, dests = config.get("path"), config.get("dest")
        if not (isinstance(paths, list) and isinstance(dests, list) and len(paths) == len(dests)
                and all(isinstance(x, str) for x in paths + dests)):
            raise BadTask(f"getter {getter!r}: with multi, 'path' and 'dest' must be string lists of one length")
    else:
        paths, dests = [need(config, "path")], [need(config, "dest")]
    gives = config.get("gives", [0])
    if not isinstance(gives, list) or not all(isinstance(i, int) for i in gives):
        raise BadTask(f"getter {getter!r}: 'gives' must be a list of indices")
    return paths, dests, set(gives)


def given(out: list):
    return out[0] if len(out) == 1 else out


def pull(ctx: EvalContext, path: str) -> Optional[bytes]:
    for attempt in range(ctx.file_tries):
        data = ctx.desktop.file(path, ctx.budget)
        if data is not None:
            return data
        if attempt + 1 < ctx.file_tries:
            pause(ctx.file_retry_s, ctx.budget.should_stop, ctx.budget.deadline)
    return None
