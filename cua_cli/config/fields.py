"""The value types config keys are made of, as pydantic types.

Ranges are annotated-types `Interval`s and kind names `Literal`s of the
kinds.py tables, so pydantic checks them and the JSON Schema shows them. A
check pydantic has no type for is a validator that raises the problem in cua's
words ("must be an http(s)://host[:port] URL, got ..."), and `_Schema` tells
editors as much of it as JSON Schema can say.
"""

import re
from typing import Annotated, Literal, Optional
from urllib.parse import urlsplit

from annotated_types import Interval
from pydantic import AfterValidator, BaseModel, ConfigDict

from .bounds import DAY_S, MAX_DEPTH, MAX_NAME, MAX_RETRIES, MAX_TEXT, data_problem, show, text_problem


class Section(BaseModel):
    """A mapping of a config file: unknown keys are refused, and values are taken as they are
    written (no "2" for 2, no 1 for true); integers are accepted where numbers are asked."""
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class _Schema:
    """JSON Schema keywords for a type checked by a validator, which pydantic cannot look into."""

    def __init__(self, **keywords):
        self.keywords = keywords

    def __get_pydantic_json_schema__(self, core_schema, handler):
        schema = handler(core_schema)
        schema.update(self.keywords)
        return schema


def _check(check):
    """A validator from `check(value) -> the problem, or None`."""
    def validate(value):
        problem = check(value)
        if problem:
            raise ValueError(problem)
        return value
    return AfterValidator(validate)


def between(tp: type, lo, hi, above: bool = False):
    """Numbers in [lo, hi], or (lo, hi] with above=True. NaN and infinities never pass."""
    return Annotated[tp, Interval(gt=lo, le=hi) if above else Interval(ge=lo, le=hi)]


def one_of(table) -> type:
    """One of the names of a kinds.py table."""
    return Literal[tuple(table)]


Duration = between(float, 0, DAY_S, above=True)   # seconds
Retries = between(int, 0, MAX_RETRIES)

# Every string of a config is clean text: no NUL, no unpaired surrogate, at most MAX_TEXT characters.
Text = Annotated[str, _check(text_problem), _Schema(maxLength=MAX_TEXT)]
NonEmpty = Annotated[Text, _check(lambda v: "must not be empty" if not v.strip() else None), _Schema(minLength=1)]
Name = Annotated[NonEmpty, _check(lambda v: f"longer than {MAX_NAME} characters" if len(v) > MAX_NAME else None),
                 _Schema(maxLength=MAX_NAME)]


def _run_name(v: str) -> Optional[str]:
    """Any characters (the folder name encodes them) but NUL, which run.json's readers in C would cut at."""
    return (text_problem(v, any_char=True) or ("must not be empty" if not v.strip() else None)
            or (f"longer than {MAX_NAME} characters" if len(v) > MAX_NAME else None)
            or ("must not hold a NUL character" if "\0" in v else None))


RunName = Annotated[str, _check(_run_name), _Schema(minLength=1, maxLength=MAX_NAME)]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")


def _env_name(v: str) -> Optional[str]:
    return None if _ENV_NAME.fullmatch(v) else f"must name an environment variable, got {show(v)}"


EnvVarName = Annotated[Text, _check(_env_name), _Schema(pattern=f"^{_ENV_NAME.pattern}$")]


def _http_url(v: str) -> Optional[str]:
    try:
        u = urlsplit(v)
        u.port  # raises ValueError for a bad port
    except ValueError:
        u = None
    if u is None or u.scheme not in ("http", "https") or not u.hostname or re.search(r"\s", v):
        return f"must be an http(s)://host[:port] URL, got {show(v)}"
    return None


HttpUrl = Annotated[Text, _check(_http_url), _Schema(pattern=r"^https?://\S+$")]
EnvUrl = Annotated[Text, _check(lambda v: None if v == "local" or not _http_url(v) else
                                f"must be 'local' or an http(s) URL, got {show(v)}"),
                   _Schema(pattern=r"^(local|https?://\S+)$")]

_TASK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
MiniwobTaskName = Annotated[Text, _check(lambda v: None if _TASK_NAME.fullmatch(v) else
                                         f"must be a MiniWoB task name like click-test-2, got {show(v)}"),
                            _Schema(pattern=f"^{_TASK_NAME.pattern}$")]

_FLAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")


def _vllm_args(d: dict) -> Optional[str]:
    for key, value in d.items():
        if not isinstance(key, str) or not _FLAG.fullmatch(key):
            return f"{show(key)} is not a vLLM flag name"
        problem = data_problem(value, MAX_DEPTH)
        if problem:
            return f"{key}: {problem}"
    return None


def _env_vars(d: dict) -> Optional[str]:
    for key, value in d.items():
        if not isinstance(key, str) or not _ENV_NAME.fullmatch(key):
            return f"{show(key)} is not an environment variable name"
        if not isinstance(value, (str, int, float)) or data_problem(value, 0):
            return f"{key}: expected a string or a finite number, got {show(value)}"
    return None


VllmArgs = Annotated[dict, _check(_vllm_args), _Schema(propertyNames={"pattern": f"^{_FLAG.pattern}$"})]
EnvVars = Annotated[dict, _check(_env_vars),
                    _Schema(propertyNames={"pattern": f"^{_ENV_NAME.pattern}$"},
                            additionalProperties={"type": ["string", "number"]})]
