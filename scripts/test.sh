#!/usr/bin/env bash
# One command, fresh machine -> the whole test suite: sets up the environment (scripts/setup_env.sh, same
# knobs) and runs pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
EXTRAS="pytest hypothesis expecttest ${EXTRAS:-}" bash scripts/setup_env.sh
VENV=${VENV:-.venv}
"$VENV/bin/python" -m pytest -q -rs "$@"
