#!/usr/bin/env bash
# Creates (or reuses) a virtual environment with torch and builds fused_input_norm into it, editable.
# Rebuilds are incremental: setup.py keeps the objects in build/<venv>-torch<version>-<backend>/ and ninja
# recompiles only what changed (a no-change rebuild takes seconds, the first build a minute or two).
#   VENV=.venv  TORCH_SPEC=torch==2.14.1 (the CUDA 13.0 build; torch==2.13.0 is the CPU-only one here)
#   EXTRAS="pytest hypothesis"  more packages to install
# Source it (`. scripts/setup_env.sh`) to keep the environment's variables, or run it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${VENV:-.venv}
TORCH_SPEC=${TORCH_SPEC:-torch==2.14.1}
EXTRAS=${EXTRAS:-}
export MAX_JOBS=${MAX_JOBS:-2}
# torch would guess CUDA_HOME from the nvcc wrapper on PATH (/usr/local), and fail to link cudart.
if [ -z "${CUDA_HOME:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then export CUDA_HOME=/usr/local/cuda; fi

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "$TORCH_SPEC" numpy setuptools wheel ninja $EXTRAS 2>&1 \
  | { grep -v "^WARNING: Location" || true; }
"$VENV/bin/python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
start=$(date +%s)
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e . 2>&1 \
  | { grep -v "^WARNING: Location" || true; }
echo "fused_input_norm built in $(( $(date +%s) - start )) s"
if [ "${FUSED_INPUT_NORM_SANITIZE:-0}" = 0 ]; then  # a sanitized build loads only under LD_PRELOAD
  "$VENV/bin/python" -c "import torch, fused_input_norm as f; print('build_info', f.build_info())"
fi
