"""scripts/rl_loop_demo.sh: DART-GUI's decoupled loop on real parts (a tiny vLLM fleet, MariaDB,
MiniWoB++): rollout rows, one trainer step and its checkpoint row, the fleet reloaded onto it by
the rollout itself, and rows sampled by the new checkpoint; then everything is stopped."""

import signal
import subprocess

import psutil
import pytest
from helpers.cli import ROOT
from helpers.processes import signal_group

pytestmark = pytest.mark.slow  # the whole RL loop: vLLM, MariaDB, torch

TIMEOUT_S = 480


def _run(work) -> subprocess.CompletedProcess:
    # A session of its own: on a timeout the whole script gets SIGTERM, and its trap stops what it started.
    proc = subprocess.Popen(["bash", str(ROOT / "scripts/rl_loop_demo.sh"), str(work)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        signal_group(proc, signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        pytest.fail(f"rl_loop_demo.sh took over {TIMEOUT_S} s:\n{out}\n{err}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_rl_loop_demo_trains_reloads_and_samples_from_the_new_checkpoint(tmp_path):
    work = tmp_path / "work"
    r = _run(work)
    assert r.returncode == 0, r.stdout + r.stderr
    summary = dict(line.split(": ", 1) for line in r.stdout.split("== rl loop summary ==\n", 1)[1].splitlines())

    before, ckpt = str(work / "tiny-vlm"), str(work / "ckpt" / "v1")
    assert summary["model_version before"] == before and int(summary["rows before"]) >= 6
    assert summary["checkpoint"] == f"v1 {ckpt}"
    assert int(summary["rows used by the trainer"]) >= 6
    # The rollout reloaded its fleet onto the checkpoint row's path, and its later rows say so.
    assert summary["model_version after"] == ckpt and int(summary["rows after"]) >= 1
    assert summary["policy_version after"] == "1"
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"} <= {
        p.name for p in (work / "ckpt" / "v1").iterdir()}
    assert "checkpoint v1 of run 'dart-loop'" in (work / "trainer.log").read_text()

    # Nothing is left running: every process the demo started (servers, MariaDB, rollout) names its work folder.
    assert not (work / "fleet" / "fleet.json").exists()
    left = [p.info for p in psutil.process_iter(["pid", "cmdline"]) if str(work) in " ".join(p.info["cmdline"] or [])]
    assert not left
