#!/usr/bin/env bash
# The vLLM plugin against the real vllm 0.34.0: creates (or reuses) .venv-vllm, installs the package (not
# editable) and runs the files in TESTS below, each with what it covers and its time on the shared 2-core
# machine (~15 min in all).
# vllm pins torch==2.14.0, so it goes in with --no-deps beside torch 2.14.1, with only the requirements
# from its METADATA that importing its config, plugin loader, CustomOp, FusedMMInputNorm, dummy weight
# loader and multimodal processors needs (at the versions it asks for; transformers' Mistral backend needs
# pycountry, jsonschema, pydantic-extra-types and tiktoken, the processor cache blake3; LLaVA's and InternVL's
# model modules import vLLM's OpenAI protocol (openai, fastapi, starlette, oss-harmony) and compressed-tensors'
# loguru; transformers' SmolVLMProcessor refuses to build without num2words), and none of its GPU
# kernel packages (flashinfer, cutlass-dsl, tilelang, ...); numba gets its llvmlite (vLLM's Kimi-K2.5 fused
# path runs numba). This package is installed as users install it, not editable, so vLLM finds the plugin
# through real entry-point metadata.
#   VENV=.venv-vllm  FUSED_INPUT_NORM_FORCE_CPU=1 (as for setup.py)  WHEEL=<a built wheel> installs it instead of
#   building this tree (CI: step 3's wheel)  extra arguments go to pytest
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${VENV:-.venv-vllm}
case $VENV in /*) ;; *) VENV=$PWD/$VENV ;; esac  # absolute or relative to the repository root
export MAX_JOBS=${MAX_JOBS:-2}
if [ -z "${CUDA_HOME:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then export CUDA_HOME=/usr/local/cuda; fi
pip_install() {
  # The resolver's complaints about vllm's unmet pins (torch==2.14.0, its GPU packages) are expected.
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 \
    | { grep -v -e "^WARNING: Location" -e "^vllm 0.34.0 requires" -e "^ERROR: pip's dependency resolver" || true; }
}

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
start=$(date +%s)
pip_install torch==2.14.1 torchvision==0.29.1 numpy "setuptools>=77,<81" wheel ninja pytest pytest-xdist
pip_install "pydantic>=2.12.0" regex psutil "pyzmq>=25.0.0" "requests>=2.33.0" "transformers>=5.16.1,<5.23.0" \
  "aiohttp>=3.14.4" "pillow>=13.0.0" pybase64 cachetools cbor2 msgspec cloudpickle py-cpuinfo "prometheus_client>=0.18.0" \
  einops uvloop pycountry jsonschema pydantic-extra-types tiktoken blake3 \
  "openai>=2.25.0" "fastapi>=0.133.0,<0.137.0" "starlette>=1.0.1" "oss-harmony>=0.0.11" loguru num2words
pip_install --no-deps vllm==0.34.0 "llguidance>=1.7.0,<1.8.0" xgrammar==0.2.8 apache-tvm-ffi==0.1.11 outlines_core==0.2.14 \
  lm-format-enforcer==0.11.3 compressed-tensors==0.17.0 "mistral_common>=1.13.0" "opencv-python-headless>=4.13.0" numba==0.65.0 llvmlite==0.47.0
echo "vllm environment ready in $(( $(date +%s) - start )) s"
start=$(date +%s)
if [ -n "${WHEEL:-}" ]; then  # CI: step 3's wheel (the extension is not compiled a second time)
  pip_install --no-deps --force-reinstall "$WHEEL"
else
  pip_install --no-build-isolation --no-deps --force-reinstall .
fi
echo "fused_input_norm installed in $(( $(date +%s) - start )) s"
# From outside the source tree, so the installed copy is the one imported.
(cd / && "$VENV/bin/python" -c "import fused_input_norm as f; assert 'site-packages' in f.__file__, f.__file__; print('installed:', f.__file__, f.build_info())")
# The files, in the order they run:
TESTS=(
  tests/test_vllm.py                # FusedMMInputNorm and the plugin's registration
  tests/test_vllm_processor.py      # the processors vLLM holds, plugin on vs off
  tests/test_vllm_families.py       # every family: Qwen-VL, LLaVA, PaliGemma, Gemma 3, GLM-4.1V, InternVL, LLaVA-OV, ...
  tests/test_vllm_server.py         # the server's request path
  tests/test_vllm_hostile.py        # hostile per-request kwargs, plugin on vs off (~40 s)
  tests/test_vllm_generic.py        # the generic path: 14 architectures (GLM-OCR for its videos) (~2.7 min)
  tests/test_vllm_gemma4.py         # Gemma 4, Gemma 4 Unified, DiffusionGemma images + videos by the gemma4 families (~95 s)
  tests/test_vllm_copies.py         # copies served by a family; processors vLLM builds elsewhere, GLM-4V-9B by the generic path, Ovis2.5/2.6 (~35-70 s)
  tests/test_vllm_deepseek_ocr.py   # vLLM's own DeepSeek-OCR processor: DeepSeek-OCR, -2, Unlimited-OCR (~110 s)
  tests/test_vllm_deepseek_vl2.py   # vLLM's own DeepSeek-VL2 processor: its plan against vLLM's, hand-backs (in-process)
  tests/test_vllm_internvl_family.py  # vLLM's own InternVL-style processors: H2OVL, Nemotron VL, Nano VL images+videos (~100 s of CPU)
  tests/test_vllm_moondream3.py     # vLLM's own Moondream 3 processor: HfMoondream, Moondream3ForCausalLM (~65 s)
  tests/test_vllm_step3.py          # vLLM's own Step3-VL processor: hand-backs, SHA checks (in-process)
  tests/test_vllm_own.py            # vLLM's own OpenVLA, Isaac, Step3-VL, DeepSeek-VL2 processors on vs off, one process a side (~60 s)
  tests/test_vllm_kimi.py           # vLLM's own Kimi processor (numba-fused in vLLM): Kimi-K2.5 images + video chunks, K3, K3.1 (~70 s at load 6, ~40 s of CPU)
  tests/test_vllm_deepseek_v4.py    # vLLM's own DeepSeek-V4 / V4.1 vision processor (~35-100 s; vLLM imports the model)
  tests/test_vllm_mistral.py        # Mistral-format checkpoints (mistral_common's ImageEncoder): Mistral Small 3.1, Pixtral-12B; IPP off and on (~30 s)
  tests/test_vllm_dots3_note.py     # vLLM's own dots3.note processor, in-process (CPU vLLM cannot load the model) (~25 s)
  tests/test_vllm_reach.py          # scripts/vllm_reach.py's table against the installed registry (~20 s)
  tests/test_vllm_pool.py           # the output pool under vLLM's processor cache and ZMQ
)
# bin/pytest, not `python -m pytest`: the latter puts the source tree first on sys.path, and the tests must
# import the installed copy.
# Two pytest-xdist workers, a file each at a time (loadfile: a file's module fixtures, its vLLM subprocesses
# plugin on and off, run once).
"$VENV/bin/pytest" -q -rs -n "${PYTEST_WORKERS:-2}" --dist loadfile "${TESTS[@]}" "$@"
