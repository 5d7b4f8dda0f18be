"""The repository's own files: build outputs that the README's commands leave in the tree stay out of git."""

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "path",
    [
        "fused_input_norm-0.1.0-cp310-abi3-linux_x86_64.whl",  # `pip wheel --no-build-isolation --no-deps .`
        "dist/fused_input_norm-0.1.0-cp310-abi3-linux_x86_64.whl",  # scripts/check_wheel.sh's WHEEL_DIR in CI
        "fused_input_norm/_C.abi3.so",  # the editable build's extension
        ".venv-demo-cpu/bin/python",  # scripts/demo.sh's venv on a machine without a GPU
    ],
)
def test_build_outputs_are_ignored(path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    result = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT)
    assert result.returncode == 0, f"{path} is not covered by .gitignore"


def test_every_python_package_folder_is_in_the_wheel():
    """setuptools is given the package list by hand (pyproject.toml): a subpackage missing from it would be
    missing from the wheel (python -m fused_input_norm.bench would fail once installed)."""
    tomllib = pytest.importorskip("tomllib", reason="Python 3.11+ reads TOML")

    root = pathlib.Path(__file__).resolve().parent.parent
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(root).parts) for init in (root / "fused_input_norm").rglob("__init__.py")}
    assert found == listed, f"pyproject.toml lists {sorted(listed)}, the tree has {sorted(found)}"
