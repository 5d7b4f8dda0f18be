#!/usr/bin/env bash
# transformers' own processor tests against the HF adapters: tests/test_transformers_suite.py runs the common
# mixins of transformers' test suite (tests/test_image_processing_common.py, tests/test_video_processing_common.py)
# on transformers' Qwen-VL processors and on FusedHFImageProcessor / FusedHFVideoProcessor, with any call the
# adapters hand back to transformers failing the test. transformers' wheel has no tests; its sdist on PyPI
# has the mixins (not tests/models/): this downloads the sdist of the INSTALLED transformers once into
# .ci-cache/ (git-ignored; cache it in CI) and points the module at it. ~20-40 s of tests.
#
#   bash scripts/test_transformers_suite.sh [pytest args]      (VENV=.venv by default)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${VENV:-.venv}/bin/python"
VERSION="$("$PY" -c 'import transformers; print(transformers.__version__)')"
SUITE="$PWD/.ci-cache/transformers-$VERSION"

if [ ! -f "$SUITE/tests/test_image_processing_common.py" ]; then
  echo "test_transformers_suite: downloading the sdist of transformers $VERSION (its tests/ only is kept)"
  mkdir -p .ci-cache/sdist "$SUITE"
  # --no-build-isolation: pip reads the sdist's metadata with the venv's setuptools instead of installing a
  # fresh build environment (minutes saved on a cold runner).
  "$PY" -m pip download --quiet --no-deps --no-binary :all: --no-build-isolation "transformers==$VERSION" \
    -d .ci-cache/sdist
  tar xzf ".ci-cache/sdist/transformers-$VERSION.tar.gz" -C "$SUITE" --strip-components=1 \
    "transformers-$VERSION/tests"
  if [ ! -f "$SUITE/tests/test_image_processing_common.py" ]; then
    echo "test_transformers_suite: the sdist of transformers $VERSION has no tests/test_image_processing_common.py" >&2
    exit 1
  fi
fi
# The mixins import parameterized (a test-only dependency of transformers').
"$PY" -c 'import parameterized' 2>/dev/null || "$PY" -m pip install --quiet parameterized

FUSED_INPUT_NORM_TRANSFORMERS_TESTS="$SUITE" exec "$PY" -m pytest -q -p no:cacheprovider -rfEsx \
  tests/test_transformers_suite.py "$@"
