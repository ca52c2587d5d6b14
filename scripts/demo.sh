#!/usr/bin/env bash
# A real rollout: installs what is missing, runs configs/demo.yaml, prints a summary.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup_env.sh"
cd "$ROOT"
exec .venv/bin/cua rollout configs/demo.yaml "$@"
