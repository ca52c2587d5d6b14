"""OSWorld's GIMP getter: a file of GIMP 2.10's settings folder (gimprc, sessionrc, action-history)."""

from typing import Any, Callable, Optional

from ..._util.atomic import write_atomic
from ...errors import BadTask
from ..local_files import safe_name
from .context import EvalContext, need
from .vlc import _home_path


def get_gimp_config_file(ctx: EvalContext, config: dict) -> Optional[str]:
    """~/.config/GIMP/2.10/<file_name> saved as `dest`: its local path, or None when the file is
    missing or empty (as OSWorld)."""
    name, dest = need(config, "file_name"), need(config, "dest")
    if "/" in name or name in ("", ".", ".."):
        raise BadTask(f"gimp_config_file: file_name {name!r} is not a file name")
    data = ctx.desktop.file(_home_path(ctx, ".config/GIMP/2.10/" + name), ctx.budget)
    if not data:
        return None
    local = ctx.folder / safe_name(dest)
    write_atomic(local, data)
    return str(local)


GETTERS: dict[str, Callable[[EvalContext, dict], Any]] = {"gimp_config_file": get_gimp_config_file}
EXTRA = None
