#!/usr/bin/env bash
# One command, fresh machine -> the main job on real photos (python -m fused_input_norm.demo): an engine's
# Qwen2-VL image path (the processor's resize, then patchify + normalize on the device), HWC -> NCHW for
# CLIP/SigLIP, and the op's throughput against the eager code engines run today. Arguments go to the demo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The demo compares against transformers' Qwen2-VL processor, whose default backend is torchvision
# (matched to torch; without a wheel for this torch, transformers falls back to PIL).
case "${TORCH_SPEC:-torch==2.14.1}" in
  torch==2.14.1) torchvision=torchvision==0.29.1 ;;
  *) torchvision="" ;;
esac
EXTRAS="scikit-image transformers $torchvision ${EXTRAS:-}" bash scripts/setup_env.sh
VENV=${VENV:-.venv}
"$VENV/bin/python" -m fused_input_norm.demo "$@"
