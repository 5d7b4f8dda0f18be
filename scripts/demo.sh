#!/usr/bin/env bash
# One command, fresh machine -> the main job on real photos (python -m fused_input_norm.demo): an engine's
# image path from JPEG bytes to pixel_values, three ways: transformers' processor on the CPU, the processor
# with normalize off + FusedInputNorm on the device, and FusedImageProcessor on the device; the PCIe bytes,
# time per image and difference of each, and a plot (matplotlib). Arguments go to the demo.
#
# Which torch: TORCH_SPEC if set. Otherwise, with an NVIDIA GPU visible (`nvidia-smi -L` lists one, or, with
# no nvidia-smi, /dev/nvidia0 exists), torch 2.14.1 (the CUDA 13.0 build) in .venv, as scripts/test.sh.
# Without one, the CPU-only torch 2.13.0+cpu in .venv-demo-cpu (~0.2 GB wheel, 1.4 GB venv, instead of ~5.9 GB;
# its own venv, so a CUDA .venv is left alone), from the first source that has it: pip's own configured
# sources (a mirror or wheel store), then PyTorch's CPU wheel index, which this script passes itself (PyPI
# has no +cpu wheels). Where neither answers, PyPI's default torch 2.14.1, a CUDA build that runs on the CPU
# (~5.9 GB): said, with why. A VENV set by hand that already has a torch keeps that torch.
# DEMO_PLAN_ONLY=1 prints the choice and stops (the tests run it with pip seeing nothing but PyPI).
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
CPU_INDEX=https://download.pytorch.org/whl/cpu
# The CPU-only wheel, fetched once into a folder beside the venv, from the first source that has it; prints
# the wheel's path and its source, or nothing. Short timeouts: an index that does not answer costs seconds.
fetch_cpu_torch() {
  local dir=$1 source
  for source in "pip's configured sources" "PyTorch's CPU wheel index ($CPU_INDEX)"; do
    local extra=()
    [[ $source == PyTorch* ]] && extra=(--index-url "$CPU_INDEX")
    if python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --timeout 15 --retries 1       -d "$dir" "${extra[@]}" "$CPU_TORCH" > /dev/null 2>&1; then
      echo "$(ls "$dir"/torch-*.whl | head -1)|$source"
      return
    fi
  done
}

if [ -n "${TORCH_SPEC:-}" ]; then
  echo "demo: torch from TORCH_SPEC: $TORCH_SPEC"
elif gpu_visible; then
  TORCH_SPEC=torch==2.14.1
  echo "demo: an NVIDIA GPU is visible: $TORCH_SPEC (the CUDA 13.0 build) in ${VENV:-.venv}"
elif [ -n "${VENV:-}" ] && installed=$("$VENV/bin/python" -c \
  "import importlib.metadata as m; print(m.version('torch'))" 2> /dev/null); then
  TORCH_SPEC=torch==$installed
  echo "demo: no visible GPU; keeping the torch $installed that $VENV has (set TORCH_SPEC to change it)"
elif [ -z "${VENV:-}" ] && installed=$(.venv-demo-cpu/bin/python -c \
  "import importlib.metadata as m; print(m.version('torch'))" 2> /dev/null); then
  VENV=.venv-demo-cpu
  TORCH_SPEC=torch==$installed
  echo "demo: no visible GPU; reusing $VENV (torch $installed)"
else
  echo "demo: no visible GPU (nvidia-smi lists none / no /dev/nvidia0): looking for the CPU-only $CPU_TORCH" \
    "(a 0.2 GB wheel; the CUDA build is ~5.9 GB installed)"
  wheels=${VENV:-.venv-demo-cpu}.wheels
  mkdir -p "$wheels"
  found=$(fetch_cpu_torch "$wheels")
  if [ -n "$found" ]; then
    TORCH_SPEC=${found%%|*}
    VENV=${VENV:-.venv-demo-cpu}
    echo "demo: $CPU_TORCH from ${found#*|}, into $VENV. TORCH_SPEC=torch==2.14.1 picks the CUDA build anyway."
  else
    TORCH_SPEC=torch==2.14.1
    echo "demo: neither pip's sources nor PyTorch's CPU index ($CPU_INDEX) answered with $CPU_TORCH, so PyPI's" \
      "default $TORCH_SPEC: a CUDA build, which runs on the CPU but installs ~5.9 GB (its nvidia-* wheels) and" \
      "takes a few minutes more to download. Set TORCH_SPEC to choose another."
  fi
fi
if [ "${DEMO_PLAN_ONLY:-0}" = 1 ]; then
  echo "demo plan: TORCH_SPEC=$TORCH_SPEC VENV=${VENV:-.venv}"
  exit 0
fi
VENV=${VENV:-.venv}
export VENV TORCH_SPEC

# The demo compares against transformers' processors, whose default backend is torchvision, which must match
# torch; without it, the demo takes their *Pil classes. PyPI's torchvision wheels are CUDA builds: 0.28.0
# (torch==2.13.0's) needs libtorch_cuda, so next to the CPU-only torch its import fails (operator
# torchvision::nms does not exist) and takes transformers down with it. Hence none there.
case "$TORCH_SPEC" in
  # and torchcodec, for the video case's MP4 (FFmpeg's libraries: setup_env.sh)
  torch==2.14.1 | torch==2.14.1+cu*) torchvision="torchvision==0.29.1 torchcodec==0.17.0" ;;
  # A wheel file (the CPU-only torch fetched above): no torchvision (the reason is above).
  *) torchvision="" ;;
esac
EXTRAS="scikit-image transformers matplotlib $torchvision ${EXTRAS:-}" bash scripts/setup_env.sh
"$VENV/bin/python" -m fused_input_norm.demo "$@"
