#!/usr/bin/env bash
# One command, fresh machine -> the whole test suite: sets up the environment (scripts/setup_env.sh, same
# knobs) and runs pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Test-only: transformers (+ torchvision, its default image backend, matched to torch) and scikit-image's
# real photos for the processor parity tests.
case "${TORCH_SPEC:-torch==2.14.1}" in
  torch==2.14.1) torchvision=torchvision==0.29.1 ;;
  *) torchvision="" ;;  # no torchvision wheel here for other torch versions: transformers uses PIL
esac
EXTRAS="pytest hypothesis expecttest transformers scikit-image $torchvision ${EXTRAS:-}" bash scripts/setup_env.sh
VENV=${VENV:-.venv}
"$VENV/bin/python" -m pytest -q -rs "$@"
