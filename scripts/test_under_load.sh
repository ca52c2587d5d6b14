#!/usr/bin/env bash
# The whole test suite on a busy machine: one CPU burner per core (stress-ng) runs beside it,
# as other work would on a shared host. Prints the suite's wall time. Arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if ! command -v stress-ng >/dev/null; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq stress-ng >/dev/null
fi
bash "$ROOT/scripts/setup_env.sh"
stress-ng --cpu "$(nproc)" --quiet &
LOAD=$!
trap 'kill "$LOAD" 2>/dev/null || true; wait "$LOAD" 2>/dev/null || true' EXIT
start=$(date +%s)
status=0
bash "$ROOT/scripts/test.sh" "$@" || status=$?
echo "[under load] suite took $(( $(date +%s) - start )) s beside stress-ng --cpu $(nproc); exit $status"
exit "$status"
