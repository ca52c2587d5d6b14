#!/usr/bin/env bash
# The real pipeline, end to end: build a tiny random vision-language model,
# start a 2-server vLLM fleet on the CPU, roll out MiniWoB++ tasks through it,
# print the stats, stop the fleet. Installs whatever is missing first.
# `bash scripts/demo.sh --random` skips the fleet (random-action baseline).
# `bash scripts/demo.sh --desktop` plays OSWorld-format tasks on cua's own Linux desktops:
# their oracle answers first (every task scores 1), then the tiny model through the fleet.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup_env.sh"
cd "$ROOT"
CUA=.venv/bin/cua

if [ "${1:-}" = "--random" ]; then
    $CUA rollout configs/demo.yaml
    $CUA stats --by domain "$(ls -td results/demo-2* | head -1)"
    exit
fi

if [ "${1:-}" = "--desktop" ]; then
    $CUA rollout configs/osworld-oracle.yaml
    $CUA stats --by domain "$(ls -td results/osworld-oracle-* | head -1)"
fi

[ -f build/tiny-vlm/config.json ] || .venv/bin/python scripts/make_tiny_vlm.py build/tiny-vlm
$CUA start-models --cpu 2 --config configs/fleet-cpu.yaml --fleet fleet/fleet.json --detach
trap '$CUA stop-models --fleet fleet/fleet.json' EXIT
$CUA models --fleet fleet/fleet.json
if [ "${1:-}" = "--desktop" ]; then
    $CUA rollout configs/osworld-fleet.yaml
    $CUA stats --by domain "$(ls -td results/osworld-fleet-* | head -1)"
else
    $CUA rollout configs/demo-fleet.yaml
    $CUA stats --by domain "$(ls -td results/demo-fleet-* | head -1)"
fi
