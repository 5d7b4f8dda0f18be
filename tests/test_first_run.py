"""A new user's first command on a fresh machine with stock pip and no GPU: scripts/demo.sh picks a torch it can
install from what pip reaches, and never stops at "set this variable yourself". Run in a throwaway HOME with
pip configured to see nothing but PyPI (DEMO_PLAN_ONLY=1: the choice, without the install)."""

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def plan(tmp_path: pathlib.Path, **env: str) -> subprocess.CompletedProcess:
    base = {"HOME": str(tmp_path / "home"), "PATH": "/usr/local/bin:/usr/bin:/bin", "DEMO_PLAN_ONLY": "1"}
    (tmp_path / "home").mkdir(exist_ok=True)
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo.sh")],
        env=base | env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU machine takes the CUDA torch, not this path")
def test_with_pip_seeing_only_pypi_the_demo_still_picks_a_torch(tmp_path):
    """PyPI has no +cpu wheel: the script asks PyTorch's CPU index itself, and where that does not answer either
    (no network but PyPI), it takes PyPI's default torch and says why and what it costs."""
    result = plan(tmp_path, PIP_CONFIG_FILE=os.devnull, VENV=str(tmp_path / "venv"))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "demo plan: TORCH_SPEC=" in out, out
    if "from PyTorch's CPU wheel index" in out:  # where that index is reachable
        assert "torch-2.13.0+cpu" in out, out
    else:
        assert "so PyPI's default torch==2.14.1: a CUDA build, which runs on the CPU but installs ~5.9 GB" in out, out
        assert "demo plan: TORCH_SPEC=torch==2.14.1" in out, out
    assert "PIP_EXTRA_INDEX_URL" not in out + result.stderr  # never "set this yourself"


def test_where_pips_sources_have_the_cpu_wheel_it_is_taken(tmp_path):
    """With this machine's pip configuration (a wheel store that holds torch 2.13.0+cpu), the CPU-only wheel."""
    probe = subprocess.run(
        ["python3", "-m", "pip", "download", "-q", "--no-deps", "-d", str(tmp_path / "probe"), "torch==2.13.0+cpu"],
        capture_output=True,
        timeout=180,
    )
    if probe.returncode != 0:
        pytest.skip("pip's configured sources here have no torch 2.13.0+cpu")
    if shutil.which("nvidia-smi") is not None:
        pytest.skip("a GPU machine takes the CUDA torch")
    result = plan(tmp_path, HOME=os.environ.get("HOME", str(tmp_path)), VENV=str(tmp_path / "venv"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "torch==2.13.0+cpu from pip's configured sources" in result.stdout, result.stdout
    assert "torch-2.13.0+cpu" in result.stdout.splitlines()[-1], result.stdout
