"""OSWorld's evaluator getters, rewritten for cua: one module per family of apps, each with its
`GETTERS` by name (OSWorld's `type` without `get_`) and the `EXTRA` its libraries come from.

    context    what every getter is given (EvalContext) and the helpers they share
    general    commands, terminal, accessibility tree, files on the desktop and the web, rules
    files      a desktop file's content read with the office libraries (content_from_vm_file)
    chrome     Chrome's profile files (bookmarks, history, cookies, settings) and its address bar
    chrome_pages  Chrome's live tabs and pages, over its debugging port (Playwright, chrome_cdp.py)
    slides     a deck's sound and background picture
    vlc, gimp, vscode  the apps' state and settings files
"""

from ..registry import collect
from . import chrome, chrome_pages, files, general, gimp, slides, vlc, vscode
from .context import EvalContext

GETTERS, EXTRAS = collect((general, chrome, chrome_pages, slides, vlc, gimp, vscode, files), "GETTERS")

__all__ = ["GETTERS", "EXTRAS", "EvalContext"]
