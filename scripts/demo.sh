#!/usr/bin/env bash
# One command, fresh machine -> the main job on real photos (python -m fused_input_norm.demo): an engine's
# image path from JPEG bytes to pixel_values, three ways: transformers' processor on the CPU, the processor
# with normalize off + FusedInputNorm on the device, and FusedImageProcessor on the device; the PCIe bytes,
# time per image and difference of each, and a plot (matplotlib). Arguments go to the demo.
#
# Which torch: TORCH_SPEC if set. Otherwise, with an NVIDIA GPU visible (`nvidia-smi -L` lists one, or, with
# no nvidia-smi, /dev/nvidia0 exists), torch 2.14.1 (the CUDA 13.0 build) in .venv, as scripts/test.sh.
# Without one, the CPU-only torch 2.13.0+cpu in .venv-demo-cpu (~0.2 GB instead of ~5.9 GB; its own venv,
# so a CUDA .venv is left alone); a VENV set by hand that already has a torch keeps that torch.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

gpu_visible() {
  if command -v nvidia-smi > /dev/null 2>&1; then
    nvidia-smi -L 2> /dev/null | grep -q "^GPU "
  else
    [ -e /dev/nvidia0 ]
  fi
}

CPU_TORCH=torch==2.13.0+cpu
picked_cpu=0
if [ -n "${TORCH_SPEC:-}" ]; then
  echo "demo: torch from TORCH_SPEC: $TORCH_SPEC"
elif gpu_visible; then
  TORCH_SPEC=torch==2.14.1
  echo "demo: an NVIDIA GPU is visible: $TORCH_SPEC (the CUDA 13.0 build) in ${VENV:-.venv}"
elif [ -n "${VENV:-}" ] && installed=$("$VENV/bin/python" -c \
  "import importlib.metadata as m; print(m.version('torch'))" 2> /dev/null); then
  TORCH_SPEC=torch==$installed
  echo "demo: no visible GPU; keeping the torch $installed that $VENV has (set TORCH_SPEC to change it)"
else
  TORCH_SPEC=$CPU_TORCH
  VENV=${VENV:-.venv-demo-cpu}
  picked_cpu=1
  echo "demo: no visible GPU (nvidia-smi lists none / no /dev/nvidia0): the CPU-only $TORCH_SPEC in $VENV" \
    "(~0.2 GB; the CUDA torch would be ~5.9 GB). TORCH_SPEC=torch==2.14.1 picks the CUDA build anyway."
fi
VENV=${VENV:-.venv}
export VENV TORCH_SPEC

# The demo compares against transformers' processors, whose default backend is torchvision, which must match
# torch; without it, the demo takes their *Pil classes. PyPI's torchvision wheels are CUDA builds: 0.28.0
# (torch==2.13.0's) needs libtorch_cuda, so next to the CPU-only torch its import fails (operator
# torchvision::nms does not exist) and takes transformers down with it. Hence none there.
case "$TORCH_SPEC" in
  torch==2.14.1 | torch==2.14.1+cu*) torchvision=torchvision==0.29.1 ;;
  *) torchvision="" ;;
esac
if ! EXTRAS="scikit-image transformers matplotlib $torchvision ${EXTRAS:-}" bash scripts/setup_env.sh; then
  if [ "$picked_cpu" = 1 ]; then
    echo "demo: setting up $VENV with $TORCH_SPEC failed. If pip found no $TORCH_SPEC: PyPI's x86-64 Linux torch" \
      "wheels are CUDA builds; add PyTorch's CPU wheel index (PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu)" \
      "or take the CUDA build (TORCH_SPEC=torch==2.14.1)."
  fi
  exit 1
fi
"$VENV/bin/python" -m fused_input_norm.demo "$@"
