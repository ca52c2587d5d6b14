"""OSWorld's VS Code getter: run a command of the task's evaluation extension (installed by its
setup) from VS Code's command palette, then fetch the file the command writes."""

from typing import Any, Callable

from ..._util.retry import pause
from ..desktop_api import pyautogui_command
from .context import EvalContext, need
from .general import get_vm_file

SETTLE_S = 1.0  # OSWorld waits a second for the command to write its file


def get_vscode_config(ctx: EvalContext, config: dict):
    """Ctrl+Shift+P, type `vscode_extension_command`, Enter (three pyautogui calls on the desktop, as
    OSWorld replays them), a second's wait, then `path` fetched as vm_file fetches it (None when the
    command wrote nothing)."""
    command, path, dest = need(config, "vscode_extension_command"), need(config, "path"), need(config, "dest")
    for code in ("pyautogui.hotkey('ctrl', 'shift', 'p')", f"pyautogui.typewrite({command!r})",
                 "pyautogui.press('enter')"):
        ctx.desktop.execute(pyautogui_command(code), ctx.budget)
    pause(SETTLE_S, ctx.budget.should_stop, ctx.budget.deadline)
    return get_vm_file(ctx, {"path": path, "dest": dest})


GETTERS: dict[str, Callable[[EvalContext, dict], Any]] = {"vscode_config": get_vscode_config}
EXTRA = None
