#!/usr/bin/env bash
# Installs what is missing, then runs the whole test suite.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup_env.sh"
cd "$ROOT"
exec .venv/bin/python -m pytest -q "$@"
