"""A pydantic validation error, said as cua says it: "key.path: what was expected, got <value clipped>".

One line, never pydantic's own multi-line report, and only the first problem
in reading order: the first key of the file that is wrong, an unknown key
of a mapping before its values (a typo often explains the rest).
"""

import types
import typing
from typing import Annotated, Literal

from pydantic import BaseModel, ValidationError

from .bounds import key_text, show

_UNKNOWN = ("extra_forbidden", "invalid_key")
_TYPES = {"int_type": "int", "int_parsing": "int", "int_from_float": "int", "float_type": "float",
          "float_parsing": "float", "string_type": "str", "bool_type": "bool", "bool_parsing": "bool"}


def problem(error: ValidationError, model: type[BaseModel], raw: dict) -> str:
    """The error's first problem in `raw` (the input validated) as one line, its key path first."""
    first = min(error.errors(include_url=False), key=lambda e: _reading_order(e, raw))
    loc, kind = first["loc"], first["type"]
    if kind in _UNKNOWN:
        parent, name = loc[:-1], loc[-1]
        where = f"{key_text(parent)}.{name}" if parent else str(name)
        known = _model_at(model, parent)
        return f"unknown key {show(where)}" + (f" (known: {', '.join(known.model_fields)})" if known else "")
    if kind == "value_error" and not loc:  # a check across keys: its text names the key
        return str(first["ctx"]["error"])
    return f"{key_text(loc)}: {_expected(first, model)}"


def _reading_order(error: dict, raw) -> list:
    """Where an error is in the input: at each level, (0 for an unknown key, else 1, the key's position)."""
    order, node = [], raw
    for i, part in enumerate(error["loc"]):
        if isinstance(node, dict):
            position = list(node).index(part) if part in node else len(node)
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int):
            position, node = part, node[part] if 0 <= part < len(node) else None
        else:
            break
        unknown = i == len(error["loc"]) - 1 and error["type"] in _UNKNOWN
        order.append((not unknown, position))
    return order


def _expected(e: dict, model: type[BaseModel]) -> str:
    kind, value, ctx = e["type"], e.get("input"), e.get("ctx") or {}
    if kind == "value_error":
        return str(ctx["error"])
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected a mapping, got {type(value).__name__}"
    if kind == "list_type":
        return f"expected a list, got {type(value).__name__}"
    if kind in _TYPES:
        return f"expected {_TYPES[kind]}, got {type(value).__name__} {show(value)}"
    if kind == "finite_number":
        return f"must be a finite number, got {value}"
    if kind == "string_unicode":
        return "string with a NUL or an unpaired surrogate character"
    tp, metadata = _type_at(model, e["loc"])
    if kind == "literal_error" and typing.get_origin(tp) is Literal:
        return f"must be one of {', '.join(map(str, typing.get_args(tp)))}, got {show(value)}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        bounds = {k: getattr(m, k) for m in metadata for k in ("gt", "ge", "le") if getattr(m, k, None) is not None}
        if "le" in bounds and ("gt" in bounds or "ge" in bounds):
            lo = f"> {bounds['gt']}" if "gt" in bounds else f">= {bounds['ge']}"
            return f"must be {lo} and <= {bounds['le']}, got {show(value)}"
    return f"{e['msg'][:200]}, got {show(value)}"  # a check with no words of cua's yet


def _unwrap(tp, metadata: list):
    """Optional[X] -> X and Annotated[X, m...] -> X, collecting the m."""
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp, *more = typing.get_args(tp)
            metadata = metadata + more
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp, metadata
            tp = args[0]
        else:
            return tp, metadata


def _type_at(model: type[BaseModel], loc: tuple):
    """The type a key path leads to in `model`, and the constraints on it; (None, []) if it leads nowhere."""
    tp, metadata = model, []
    for part in loc:
        tp, metadata = _unwrap(tp, metadata)
        if isinstance(part, str) and isinstance(tp, type) and issubclass(tp, BaseModel) and part in tp.model_fields:
            field = tp.model_fields[part]
            tp, metadata = field.annotation, list(field.metadata)
        elif isinstance(part, int) and typing.get_origin(tp) is list:
            tp, metadata = typing.get_args(tp)[0], []
        else:
            return None, []
    return _unwrap(tp, metadata)


def _model_at(model: type[BaseModel], loc: tuple):
    tp, _ = _type_at(model, loc)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None
