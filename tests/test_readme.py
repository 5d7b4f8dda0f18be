"""Every ```python block of README.md runs as written, each in a fresh interpreter, so the README cannot rot.

The indented shell blocks (setup, build, CMake, benchmark commands) are not run here: they build or time
things, and CI runs the same commands through scripts/."""

import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[tuple[int, str]]:
    text = README.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, m.start()) + 2, m.group(1))
        for m in re.finditer(r"^```python\n(.*?)^```$", text, re.M | re.S)
    ]


def test_readme_has_python_blocks():
    assert len(python_blocks()) >= 2


@pytest.mark.parametrize("line,code", python_blocks(), ids=lambda v: f"line{v}" if isinstance(v, int) else "")
def test_block_runs(line, code, tmp_path):
    if "VideoProcessor(" in code and importlib.util.find_spec("torchvision") is None:
        pytest.skip("transformers' video processors (the block's reference) need torchvision, not installed here")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"README.md:{line} failed:\n{result.stderr[-3000:]}"
