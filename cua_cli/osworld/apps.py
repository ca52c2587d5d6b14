"""The desktop apps an OSWorld task needs, and those a desktop has.

A task names its apps in `related_apps`, in OSWorld's loose spelling ("libreoffice calc",
"vscode", "Chrome"); `needed` reads them as kinds.DESKTOP_APPS. OSWorld's own image has every
one; cua's own desktops have what their host has installed (each desktop sees the host's
programs), so a task is not played on them when its app is missing there: played without it,
its failure would be counted as the agent's.
"""

import shutil

from ..kinds import DESKTOP_APPS

_SPELLINGS = {
    "chrome": "chrome", "browser": "chrome",
    "libreoffice_calc": "libreoffice_calc", "libreoffice calc": "libreoffice_calc", "calc": "libreoffice_calc",
    "libreoffice_writer": "libreoffice_writer", "writer": "libreoffice_writer",
    "libreoffice_impress": "libreoffice_impress", "impress": "libreoffice_impress",
    "gimp": "gimp", "vscode": "vs_code", "vs_code": "vs_code", "thunderbird": "thunderbird",
    "vlc": "vlc", "ubuntu_media_player": "vlc",
}

# The commands that show an app is installed: what OSWorld's tasks start it with (Debian names
# LibreOffice's parts lo<part>; cua's desktops start Debian's Chromium as google-chrome).
_COMMANDS = {
    "chrome": ("google-chrome", "chromium"), "libreoffice_calc": ("localc",), "libreoffice_writer": ("lowriter",),
    "libreoffice_impress": ("loimpress",), "gimp": ("gimp",), "vs_code": ("code",), "thunderbird": ("thunderbird",),
    "vlc": ("vlc",),
}
assert set(_SPELLINGS.values()) == set(_COMMANDS) == set(DESKTOP_APPS)


def needed(example: dict) -> list[str]:
    """The apps of DESKTOP_APPS an OSWorld example names in related_apps, in its order; names
    that are no app (os, terminal, pdf, ...) need nothing beyond the base desktop."""
    names = example.get("related_apps") if isinstance(example, dict) else None
    if isinstance(names, str):
        names = [names]
    found = [_SPELLINGS.get(n.strip().lower()) for n in names if isinstance(n, str)] if isinstance(names, list) else []
    return list(dict.fromkeys(a for a in found if a))


def on_this_host() -> list[str]:
    """The apps whose command is on this host's PATH."""
    return [app for app in DESKTOP_APPS if any(shutil.which(c) for c in _COMMANDS[app])]
