"""The GPU kernels' per-thread code, run on the host by tests/cpp/kernel_emulation.cpp: vector indexing,
grid-stride and tail split, in-place, both index widths, checked bit for bit without a GPU."""

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMPILER = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")


# slow (30 s on 2 cores) and torch-free: CI runs it once, in step 1, not again against each torch.
@pytest.mark.slow
@pytest.mark.skipif(COMPILER is None, reason="needs a C++17 host compiler (g++, c++ or clang++) on PATH")
def test_gpu_kernel_threads_emulated_on_host(tmp_path):
    binary = tmp_path / "kernel_emulation"
    source = ROOT / "tests" / "cpp" / "kernel_emulation.cpp"
    subprocess.run(
        [COMPILER, "-std=c++17", "-O1", "-Wall", "-Werror", f"-I{ROOT / 'csrc'}", str(source), "-o", str(binary)],
        check=True,
    )
    result = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120)
    summary = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 0 and summary.endswith(" 0 failed"), result.stdout[-4000:]
    assert int(summary.split()[0]) > 10000, summary  # every dtype pair x size x grid was run
