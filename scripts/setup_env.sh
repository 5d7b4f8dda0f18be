#!/usr/bin/env bash
# Creates (or reuses) a virtual environment with torch and builds fused_input_norm into it, editable.
# Rebuilds are incremental: setup.py keeps the objects in build/<venv>-torch<version>-<backend>/ and ninja
# recompiles only what changed (a no-change rebuild takes seconds; a first build on 2 cores ~1-2 min CPU-only,
# ~2.5-4 min with the CUDA kernels, longer while other builds share the cores).
#   VENV=.venv  TORCH_SPEC=torch==2.14.1 (the CUDA 13.0 build; torch==2.13.0 is the CPU-only one here)
#   EXTRAS="pytest hypothesis"  more packages to install
# pip runs quiet and the compiler prints nothing until it is done, so each step says what it does and how
# long it usually takes before it starts, and how long it took when it ends: a long step is not a hang.
# Source it (`. scripts/setup_env.sh`) to keep the environment's variables, or run it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${VENV:-.venv}
TORCH_SPEC=${TORCH_SPEC:-torch==2.14.1}
EXTRAS=${EXTRAS:-}
export MAX_JOBS=${MAX_JOBS:-2}
# torch would guess CUDA_HOME from the nvcc wrapper on PATH (/usr/local), and fail to link cudart.
if [ -z "${CUDA_HOME:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then export CUDA_HOME=/usr/local/cuda; fi

setup_start=$(date +%s)
step() { echo "setup_env: $*"; step_start=$(date +%s); }
took() { echo "setup_env:   $* in $(($(date +%s) - step_start)) s"; }
quiet_pip() { "$VENV/bin/python" -m pip "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }; }

if [ ! -x "$VENV/bin/python" ]; then
  step "creating the virtual environment $VENV (a few seconds)"
  python3 -m venv "$VENV"
  took "created"
  fresh=1
else
  fresh=0
fi
# torchcodec (encoded videos) loads FFmpeg's shared libraries (major versions 4-8) at run time, which pip does
# not install. As root with apt-get (Debian, Ubuntu), the ffmpeg package brings them (~15 s here); otherwise say
# so: without them encoded videos are refused, named, and their tests skip.
if [[ " $EXTRAS " == *" torchcodec"* ]] && ! ldconfig -p 2> /dev/null | grep -q 'libavcodec\.so\.'; then
  if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    step "installing FFmpeg's libraries for torchcodec (apt-get install ffmpeg; 15-60 s)"
    apt-get update -qq > /dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ffmpeg > /dev/null
    took "FFmpeg's libraries installed"
  else
    echo "setup_env: torchcodec needs FFmpeg's libraries (sudo apt-get install ffmpeg, or conda install ffmpeg);" \
      "without them encoded videos are refused and their tests skip"
  fi
fi
packages=("$TORCH_SPEC" numpy setuptools wheel ninja $EXTRAS)
if [ "$fresh" = 1 ] || ! "$VENV/bin/python" -c "import torch" 2> /dev/null; then
  step "installing ${packages[*]} into $VENV (pip -q: silent until done, 1-2 min in a new venv on 2 cores;" \
    "the CUDA torch is ~5.9 GB installed with its nvidia-* wheels, the CPU-only one a 0.2 GB wheel)"
else
  step "checking ${packages[*]} in $VENV (seconds when all are installed)"
fi
quiet_pip install -q --disable-pip-version-check "${packages[@]}"
took "packages ready"
"$VENV/bin/python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"

# What setup.py will build (as its gpu_backend() decides; torch.utils.cpp_extension is not imported here, it
# warns on a GPU-less machine), and whether ninja has objects from an earlier build.
plan=$("$VENV/bin/python" - << 'PY'
import os
import shutil
import sys

import torch

force_cpu, sanitize = (os.environ.get(f"FUSED_INPUT_NORM_{k}", "0") not in ("", "0") for k in ("FORCE_CPU", "SANITIZE"))
if sanitize:
    backend = "cpu-sanitize"
elif force_cpu:
    backend = "cpu"
elif torch.version.hip is not None:
    backend = "hip"
elif torch.version.cuda is not None and (os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or shutil.which("nvcc")):
    backend = "cuda"
else:
    backend = "cpu"
print(backend, os.path.join("build", f"{os.path.basename(sys.prefix).lstrip('.')}-torch{torch.__version__}-{backend}"))
PY
)
read -r backend build_dir <<< "$plan"
case "$backend" in
  cuda) what="the CUDA kernels (TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-8.0;9.0+PTX}) and the CPU ones"; first="~2.5-4 min" ;;
  hip) what="the HIP kernels (PYTORCH_ROCM_ARCH=${PYTORCH_ROCM_ARCH:-gfx90a;gfx942}) and the CPU ones"; first="several minutes" ;;
  *) what="the CPU-only extension"; first="~1-2 min" ;;
esac
if [ -f "$build_dir/.ninja_log" ]; then
  expect="objects kept in $build_dir: seconds if nothing changed, a minute or two if a kernel source did"
else
  expect="first build: $first on 2 cores with MAX_JOBS=$MAX_JOBS; the compiler is silent until done"
fi
step "building fused_input_norm, $what ($expect)"
quiet_pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
took "fused_input_norm built"
if [ "${FUSED_INPUT_NORM_SANITIZE:-0}" = 0 ]; then  # a sanitized build loads only under LD_PRELOAD
  step "import check (a few seconds)"
  "$VENV/bin/python" -c "import torch, fused_input_norm as f; print('build_info', f.build_info())"
  took "imported"
fi
echo "setup_env: $VENV ready in $(($(date +%s) - setup_start)) s"
