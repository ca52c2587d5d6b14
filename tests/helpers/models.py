"""The tiny random Qwen2-VL of scripts/make_tiny_vlm.py: built in this process, or served by real vLLM."""

import importlib.util
import subprocess
import sys
from pathlib import Path

from helpers.cli import ROOT, run_cua

# The shared fleet's pixel limit (conftest's tiny_vllm), a flag of the server's own: 160x210 MiniWoB screens
# become 84x112, 12 image tokens (test_trainer_records rebuilds that count from the records).
TINY_VLLM_MAX_PIXELS = 112 * 112


def build_tiny_vlm(out: Path) -> Path:
    """The tiny random Qwen2-VL of scripts/make_tiny_vlm.py, built in this process (fast, offline)."""
    spec = importlib.util.spec_from_file_location("make_tiny_vlm", ROOT / "scripts" / "make_tiny_vlm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build(out)


def start_tiny_fleet(work: Path, servers: int, base_port: int, max_pixels: int | None = None) -> Path:
    """Build the tiny random Qwen2-VL in `work` and serve it with real vLLM on the CPU (start-models
    configs/fleet-cpu.yaml, with the server's own pixel limit when given); the fleet file."""
    model = work / "tiny-vlm"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_vlm.py"), str(model)], check=True,
                   capture_output=True)
    config = ROOT / "configs/fleet-cpu.yaml"
    if max_pixels is not None:
        limit = "  limit-mm-per-prompt: {image: 5, video: 0}"
        text = config.read_text()
        assert limit in text
        config = work / "fleet.yaml"
        config.write_text(text.replace(limit, f"{limit}\n  mm-processor-kwargs: {{max_pixels: {max_pixels}}}"))
    fleet_file = work / "fleet.json"
    r = run_cua("start-models", "--cpu", str(servers), "--model", str(model),
                "--config", str(config), "--fleet", str(fleet_file),
                "--base-port", str(base_port), "--detach", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return fleet_file
