#!/usr/bin/env bash
# DART-GUI's decoupled RL loop, end to end on the CPU, in about a minute and a half:
#   a tiny vLLM fleet and a MariaDB on loopback; a `--watch` rollout (configs/dart-loop.yaml) writes
#   DART's trajectory folders and `rollout_run` rows; scripts/dart_trainer_example.py trains one step
#   on them and inserts checkpoint v1; the rollout (model.reload_from: mysql) reloads the fleet onto
#   it; a second batch of tasks then gives rows whose model_version is v1's path. Prints a summary.
#   bash scripts/rl_loop_demo.sh [WORK_DIR]   # default: a temporary folder, removed after a success
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
CUA="$ROOT/.venv/bin/cua"
RUN_ID=dart-loop        # DART's run id: the rollout's storage.mysql.run_id and the trainer's --run-id
MIN_ROWS=6              # rows the trainer waits for (the first batch makes 12)
WAIT_S=180              # for each stage
if [ $# -gt 0 ]; then WORK="$(mkdir -p "$1" && cd "$1" && pwd)"; KEEP=1; else WORK="$(mktemp -d)"; KEEP=0; fi
FLEET="$WORK/fleet/fleet.json"
T0=$SECONDS
DB_UP=0 FLEET_UP=0 ROLLOUT_PID=""

say() { echo "[rl-loop $((SECONDS - T0))s] $*"; }
sql() { "$PY" "$ROOT/scripts/mariadb_local.py" sql "$WORK/db" "$1"; }
rows_of() { sql "SELECT COUNT(*) FROM rollout_run WHERE run_id = '$RUN_ID' AND model_version = '$1'"; }

stop_rollout() {
    # Ctrl-C as a user would: the rollout stops claiming, passes its last rows on and exits (130);
    # a second one ends its runners at once.
    [ -n "$ROLLOUT_PID" ] || return 0
    local pid=$ROLLOUT_PID i
    ROLLOUT_PID=""
    for signal in INT INT KILL; do
        kill -s $signal "$pid" 2>/dev/null || break
        for i in $(seq 60); do kill -0 "$pid" 2>/dev/null && sleep 0.5 || break; done
        kill -0 "$pid" 2>/dev/null || break
    done
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local rc=$?
    stop_rollout
    [ $FLEET_UP = 1 ] && { "$CUA" stop-models --fleet "$FLEET" >/dev/null || rc=1; }
    [ $DB_UP = 1 ] && { "$PY" "$ROOT/scripts/mariadb_local.py" stop "$WORK/db" || rc=1; }
    if [ $rc != 0 ]; then
        echo "rl-loop FAILED (exit $rc); logs in $WORK: rollout.log, trainer.log, fleet/" >&2
        [ -f "$WORK/rollout.log" ] && tail -n 15 "$WORK/rollout.log" >&2
    elif [ $KEEP = 0 ]; then
        rm -rf "$WORK"
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_until WHAT CONDITION...: poll CONDITION (a command) for up to WAIT_S seconds.
wait_until() {
    local what=$1 deadline=$((SECONDS + WAIT_S))
    shift
    until "$@"; do
        if [ -n "$ROLLOUT_PID" ] && ! kill -0 "$ROLLOUT_PID" 2>/dev/null; then
            echo "the rollout exited while waiting for $what" >&2
            return 1
        fi
        if [ $SECONDS -ge $deadline ]; then
            echo "timed out after ${WAIT_S}s waiting for $what" >&2
            return 1
        fi
        sleep 1
    done
}

say "work folder: $WORK"
"$PY" "$ROOT/scripts/make_tiny_vlm.py" "$WORK/tiny-vlm" >/dev/null 2>&1
MODEL="$WORK/tiny-vlm"

CUA_DART_DB="$("$PY" "$ROOT/scripts/mariadb_local.py" start "$WORK/db")"
export CUA_DART_DB
DB_UP=1
say "MariaDB up"

FLEET_UP=1  # from here on: stop-models cleans up whatever start-models launched
"$CUA" start-models --cpu 1 --config "$ROOT/configs/fleet-cpu.yaml" --model "$MODEL" --served-model-name tiny-vlm \
    --base-port 8600 --fleet "$FLEET" --detach >/dev/null
say "fleet serves $MODEL"

"$CUA" rollout "$ROOT/configs/dart-loop.yaml" --watch --fleet "$FLEET" --set "run.results_dir=$WORK/results" \
    --set "storage.dart.root=$WORK/dart" --set "storage.mysql.run_id=$RUN_ID" >"$WORK/rollout.log" 2>&1 &
ROLLOUT_PID=$!
say "rollout started (pid $ROLLOUT_PID); training once $MIN_ROWS rows are in"

"$PY" "$ROOT/scripts/dart_trainer_example.py" --db-url-env CUA_DART_DB --model "$MODEL" --out-root "$WORK/ckpt" \
    --run-id "$RUN_ID" --min-rows $MIN_ROWS --timeout $WAIT_S >"$WORK/trainer.log" 2>&1 \
    || { tail -n 5 "$WORK/trainer.log" >&2; exit 1; }
grep -E "^(rows:|advantages:|checkpoint )" "$WORK/trainer.log"
CKPT="$(sql "SELECT path FROM checkpoint WHERE run_id = '$RUN_ID' AND version = 'v1'")"
say "checkpoint row v1: $CKPT"

fleet_serves() {
    "$PY" -c 'import json, sys; s = json.load(open(sys.argv[1]))["servers"]
sys.exit(not s or any(x.get("model_version") != sys.argv[2] for x in s))' "$FLEET" "$1"
}
wait_until "the rollout to reload the fleet onto $CKPT (model.reload_from: mysql)" fleet_serves "$CKPT"
say "fleet reloaded onto v1"

# A second batch (the finished tasks again, as new samples) dropped into the watched queue samples from v1.
RUN="$(ls -d "$WORK"/results/dart-loop-*)"
"$PY" - "$RUN/queue" <<'EOF'
import json, os, sys
from pathlib import Path
queue = Path(sys.argv[1])
for f in sorted((queue / "done").glob("*.json")):
    task = {k: v for k, v in json.loads(f.read_text()).items() if k not in ("lease", "attempt", "errors")}
    task["sample"] += 10
    tmp = queue / "pending" / f".{f.stem}.again"  # claimers skip dot files: the task appears whole
    tmp.write_text(json.dumps(task))
    os.replace(tmp, queue / "pending" / f"{f.stem}-again.json")
EOF
say "second batch queued"

# The loop's last link: rows sampled by the reloaded fleet carry v1's path as their model_version.
rows_after_reload() { [ "$(rows_of "$CKPT")" -ge 1 ]; }
wait_until "rollout_run rows with model_version $CKPT" rows_after_reload
queue_drained() { ! compgen -G "$RUN/queue/pending/*.json" >/dev/null \
    && ! compgen -G "$RUN/queue/claimed/*.json" >/dev/null; }
wait_until "the second batch to finish" queue_drained
stop_rollout
say "rollout stopped"

echo "== rl loop summary =="
echo "rows before: $(rows_of "$MODEL")"
echo "model_version before: $MODEL"
echo "checkpoint: v1 $CKPT"
echo "rows used by the trainer: $(sql "SELECT COUNT(*) FROM rollout_run WHERE run_id = '$RUN_ID' AND used > 0")"
echo "rows after: $(rows_of "$CKPT")"
echo "model_version after: $CKPT"
echo "policy_version after: $("$PY" -c 'import json, sys
print(*sorted({s["policy_version"] for s in json.load(open(sys.argv[1]))["servers"]}))' "$FLEET")"
echo "seconds: $((SECONDS - T0))"
