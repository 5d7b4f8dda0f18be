#!/usr/bin/env bash
# One command, fresh machine -> the whole test suite: sets up the environment (scripts/setup_env.sh, same
# knobs) and runs pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Test-only: transformers (+ torchvision, its default image backend, and torchcodec, its video decoder, matched
# to torch), scikit-image's real photos for the processor parity tests, and opencv-python-headless, the reference
# of the cv2 resize filters (tests/test_resize_cv2.py).
case "${TORCH_SPEC:-torch==2.14.1}" in
  # torchcodec decodes encoded videos, as transformers' video processors do (FFmpeg's libraries: setup_env.sh)
  torch==2.14.1) torchvision="torchvision==0.29.1 torchcodec==0.17.0" ;;
  # None for other torch versions: PyPI's torchvision wheels are CUDA builds (0.28.0, torch 2.13's, fails to
  # import beside the CPU-only torch 2.13.0+cpu); transformers uses its PIL backend instead.
  *) torchvision="" ;;
esac
EXTRAS="pytest pytest-xdist hypothesis expecttest transformers scikit-image matplotlib opencv-python-headless $torchvision ${EXTRAS:-}" bash scripts/setup_env.sh
VENV=${VENV:-.venv}
# pytest-xdist workers: one per two cores (torch runs each test's ops on two threads or more), at most 4
# (each holds its own torch and transformers, ~1-2 GB); below 4 cores the suite runs in this process: on the
# 2-core CI machine, idle, two workers were no faster (308-325 s against 295 s in one process: module fixtures
# run once per worker). PYTEST_WORKERS=N overrides. loadgroup: the multi-GiB tests (xdist_group "gibibytes")
# share one worker, so they never run side by side.
cores=$(nproc)
workers=$((cores / 2 < 4 ? cores / 2 : 4))
workers=${PYTEST_WORKERS:-$((workers < 2 ? 0 : workers))}
"$VENV/bin/python" -m pytest -q -rs -n "$workers" --dist loadgroup "$@"
