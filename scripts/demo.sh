#!/usr/bin/env bash
# One command, fresh machine -> the main job: normalize real photos through the op and compare its
# throughput with the eager implementation engines use today (python -m fused_input_norm.demo).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
EXTRAS="scikit-image ${EXTRAS:-}" bash scripts/setup_env.sh
VENV=${VENV:-.venv}
"$VENV/bin/python" -m fused_input_norm.demo "$@"
