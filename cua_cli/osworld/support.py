"""Which parts of a task cua does not implement: such a task is refused when a run starts and
counted as `unsupported`, never played and scored 0.

The parts that act on a Google account (OSWorld's `googledrive` and `login` steps, its
`googledrive_file` getter) are not implemented on purpose: they need an account's credentials in
OSWorld's settings files (the steps' and getter's `settings_file`:
`settings/googledrive/settings.yml` for Drive, `settings/google/settings.json` for the login),
which no shared harness should hold. They are named apart: "(needs credentials: ...)".
"""

from typing import Optional

from . import getters, metrics
from .registry import Extra, install_hint
from .setup import EXTRAS as STEP_EXTRAS
from .setup import STEPS

CREDENTIALS = {"step": ("googledrive", "login"), "getter": ("googledrive_file",)}
NEEDS_CREDENTIALS = "(needs credentials: a Google account)"


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

    for step in steps + as_list(evaluator.get("postconfig")):
        if isinstance(step, dict) and step.get("type") not in STEPS:
            note("step", step.get("type"), _credentials("step", step.get("type")))
        elif isinstance(step, dict) and libraries and _lacks(STEP_EXTRAS.get(step.get("type"))):
            note("step", step["type"], _lacks(STEP_EXTRAS[step["type"]]))
    func = evaluator.get("func")
    if func == "infeasible":
        return missing
    names, options = as_list(func), paired(evaluator, "options")
    for i, name in enumerate(names):
        if name not in metrics.METRICS:  # "infeasible" inside a list is no metric OSWorld can call either
            note("metric", name)
            continue
        for part in metrics.OPTION_CHECKS.get(name, lambda _: [])(options[i]):
            note("metric", name, part)
        if libraries and _lacks(metrics.EXTRAS.get(name)):
            note("metric", name, _lacks(metrics.EXTRAS[name]))
    for key in ("result", "expected"):
        for getter in as_list(evaluator.get(key)):
            if isinstance(getter, dict) and getter:
                kind = getter.get("type")
                if kind not in getters.GETTERS:
                    note("getter", kind, _credentials("getter", kind))
                elif libraries and _lacks(getters.EXTRAS.get(kind)):
                    note("getter", kind, _lacks(getters.EXTRAS[kind]))
    return missing


def needs_credentials(missing: list[str]) -> bool:
    """Whether what a task lacks (unsupported's list) includes a Google account."""
    return any(m.endswith(NEEDS_CREDENTIALS) for m in missing)


def _credentials(what: str, name) -> str:
    return NEEDS_CREDENTIALS if name in CREDENTIALS[what] else ""


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
    needed = [metrics.EXTRAS.get(name) for name in as_list(evaluator.get("func"))]
    for key in ("result", "expected"):
        needed += [getters.EXTRAS.get(g.get("type")) for g in as_list(evaluator.get(key)) if isinstance(g, dict)]
    extras: list[Extra] = []
    for extra in needed:
        if extra and extra not in extras and extra.missing():
            extras.append(extra)
    return sorted({pip for e in extras for pip in e.missing()}), extras


def as_list(value) -> list:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]
