"""OSWorld's getters that read a desktop file's content with the office libraries (pandas)."""

import os
from typing import Any, Callable, Optional

from ...errors import BadTask
from ..registry import Extra
from .context import EvalContext, need
from .general import get_vm_file


def get_content_from_vm_file(ctx: EvalContext, config: dict) -> Optional[list]:
    """The last row of a spreadsheet on the desktop (`file_type: xlsx`, `file_content: last_row`), each
    value as pandas' astype(str) writes it ("nan", "147.0"), read as OSWorld reads it (read_excel's
    first sheet under a header row). None when the file is missing or no spreadsheet with a row
    (OSWorld crashes there): the metric scores None as 0."""
    path = need(config, "path")
    if config.get("file_type") != "xlsx":
        raise BadTask(f"content_from_vm_file: file_type {config.get('file_type')!r} is not supported (OSWorld: xlsx)")
    if config.get("file_content") != "last_row":
        raise BadTask(f"content_from_vm_file: file_content {config.get('file_content')!r} is not 'last_row'")
    local = get_vm_file(ctx, {"path": path, "dest": os.path.basename(path) or "content"})
    if local is None:
        return None
    import pandas as pd

    try:
        frame = pd.read_excel(local)
        return frame.iloc[-1].astype(str).tolist()
    except Exception:  # noqa: BLE001 - whatever pandas or openpyxl make of a broken file: the agent's
        return None


GETTERS: dict[str, Callable[[EvalContext, dict], Any]] = {"content_from_vm_file": get_content_from_vm_file}
EXTRA = Extra("office", {"pandas": "pandas", "openpyxl": "openpyxl"})
