"""Which parts of a task cua does not implement: such a task is refused when a run starts and
counted as `unsupported`, never played and scored 0."""

from typing import Optional

from . import getters, metrics
from .registry import Extra, install_hint
from .setup import STEPS


def steps_and_evaluator(task: dict) -> tuple[list, dict]:
    """(setup steps, evaluator) of a cua task dict (whose `config` is the whole OSWorld example)
    or of an OSWorld example itself."""
    config = task.get("config")
    if isinstance(config, dict):  # a cua task: the example rides in `config`
        steps, evaluator = config.get("config", []), task.get("evaluator") or config.get("evaluator") or {}
    else:
        steps, evaluator = config or [], task.get("evaluator") or {}
    return (steps if isinstance(steps, list) else []), (evaluator if isinstance(evaluator, dict) else {})


def unsupported(task: dict, libraries: bool = True) -> list[str]:
    """Each step type, getter type and metric the task uses that cua lacks, e.g.
    ["step 'chrome_open_tabs'", "getter 'googledrive_file'", "metric 'compare_table' rule 'style'"];
    [] when cua can run it. `libraries`: a getter or metric whose extra's libraries this host lacks
    counts too ("metric 'compare_table' (needs pandas: pip install 'cua[office]')")."""
    steps, evaluator = steps_and_evaluator(task)
    missing: list[str] = []

    def note(what: str, name, detail: str = "") -> None:
        entry = f"{what} {name!r}" + (f" {detail}" if detail else "")
        if entry not in missing:
            missing.append(entry)

    for step in steps + _list(evaluator.get("postconfig")):
        if isinstance(step, dict) and step.get("type") not in STEPS:
            note("step", step.get("type"))
    func = evaluator.get("func")
    if func == "infeasible":
        return missing
    names, options = _list(func), paired(evaluator, "options")
    for i, name in enumerate(names):
        if name not in metrics.METRICS:  # "infeasible" inside a list is no metric OSWorld can call either
            note("metric", name)
            continue
        for part in metrics.OPTION_CHECKS.get(name, lambda _: [])(options[i]):
            note("metric", name, part)
        if libraries and _lacks(metrics.EXTRAS.get(name)):
            note("metric", name, _lacks(metrics.EXTRAS[name]))
    for key in ("result", "expected"):
        for getter in _list(evaluator.get(key)):
            if isinstance(getter, dict) and getter:
                kind = getter.get("type")
                if kind not in getters.GETTERS:
                    note("getter", kind)
                elif libraries and _lacks(getters.EXTRAS.get(kind)):
                    note("getter", kind, _lacks(getters.EXTRAS[kind]))
    return missing


def _lacks(extra: Optional[Extra]) -> str:
    """"(needs pandas: pip install 'cua[office]')" when this host lacks the extra's libraries, else ""."""
    lacking = extra.missing() if extra else []
    return f"(needs {' and '.join(lacking)}: {install_hint([extra])})" if lacking else ""


def paired(evaluator: dict, key: str) -> list:
    """The evaluator's `key` ("result", "expected", "options") for each of its metrics, in order: a
    list func takes a list of as many, else it has none (None each)."""
    func, value = evaluator.get("func"), evaluator.get(key)
    if not isinstance(func, list):
        return [value]
    return value if isinstance(value, list) and len(value) == len(func) else [None] * len(func)


def lacking_extras(evaluator: dict) -> tuple[list[str], list[Extra]]:
    """(the pip packages this host lacks to score with `evaluator`'s metrics and getters, the extras
    they come from)."""
    needed = [metrics.EXTRAS.get(name) for name in _list(evaluator.get("func"))]
    for key in ("result", "expected"):
        needed += [getters.EXTRAS.get(g.get("type")) for g in _list(evaluator.get(key)) if isinstance(g, dict)]
    extras: list[Extra] = []
    for extra in needed:
        if extra and extra not in extras and extra.missing():
            extras.append(extra)
    return sorted({pip for e in extras for pip in e.missing()}), extras


def _list(value) -> list:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]
