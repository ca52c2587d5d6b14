"""Which parts of a task cua does not implement: such a task is refused when a run starts and
counted as `unsupported`, never played and scored 0."""

import importlib.util

from .getters import GETTERS
from .metrics import METRICS
from .setup import STEPS
from .tables import unsupported_rules

# The metrics that need the `office` extra: the modules each imports, by their pip names.
_DOCX = {"docx": "python-docx"}
OFFICE = {"compare_table": {"pandas": "pandas", "openpyxl": "openpyxl"}, "compare_pptx_files": {"pptx": "python-pptx"},
          "compare_docx_files": _DOCX, "compare_docx_files_and_ignore_new_lines": _DOCX,
          "compare_line_spacing": _DOCX, "compare_docx_tables": _DOCX}


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
    [] when cua can run it. `libraries`: a metric whose office libraries this host lacks counts too."""
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
        if name not in METRICS:  # "infeasible" inside a list is no metric OSWorld can call either
            note("metric", name)
            continue
        if name == "compare_table":
            for part in unsupported_rules(options[i]):
                note("metric", name, part)
        lacking = missing_libraries(name) if libraries else []
        if lacking:
            note("metric", name, f"(needs {' and '.join(lacking)}: pip install 'cua[office]')")
    for key in ("result", "expected"):
        for getter in _list(evaluator.get(key)):
            if isinstance(getter, dict) and getter and getter.get("type") not in GETTERS:
                note("getter", getter.get("type"))
    return missing


def paired(evaluator: dict, key: str) -> list:
    """The evaluator's `key` ("result", "expected", "options") for each of its metrics, in order: a
    list func takes a list of as many, else it has none (None each)."""
    func, value = evaluator.get("func"), evaluator.get(key)
    if not isinstance(func, list):
        return [value]
    return value if isinstance(value, list) and len(value) == len(func) else [None] * len(func)


def missing_libraries(metric: str) -> list[str]:
    """The pip packages of the `office` extra that `metric` needs and this host lacks."""
    return [pip for module, pip in OFFICE.get(metric, {}).items() if importlib.util.find_spec(module) is None]


def _list(value) -> list:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]
