"""Choosing the backend, and the torch path standing alone where numba is missing."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import HANG_LIMIT, REPO
from e2egen.metrics import compare, fused_numba
from e2egen.metrics.backend import ENV_VAR, choose

ROOT = REPO


def test_environment_variable_forces_the_torch_backend(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "torch")
    ref = torch.randn(10, dtype=torch.float64)
    assert compare(ref, ref.to(torch.float16), "f16").backend == "torch"


def test_unknown_environment_value_names_the_variable_and_choices(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "numpy")
    with pytest.raises(ValueError, match=f"unknown metrics {ENV_VAR} 'numpy'.*auto, numba, torch"):
        choose(None, torch.device("cpu"))


def test_auto_picks_numba_on_cpu_when_installed(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert choose(None, torch.device("cpu")) == ("numba" if fused_numba.AVAILABLE else "torch")
    assert choose(None, torch.device("cuda")) == "torch"  # the device path is plain torch


def test_numba_backend_refuses_other_devices():
    if not fused_numba.AVAILABLE:
        pytest.skip("no numba")
    with pytest.raises(ValueError, match="CPU only"):
        choose("numba", torch.device("cuda"))


def test_without_numba_the_package_imports_and_compares():
    # Block numba's import in a fresh interpreter: metrics must fall back to
    # torch by itself and give the same verdict.
    script = (
        "import sys; sys.modules['numba'] = None\n"
        "import torch, metrics\n"
        "from metrics import fused_numba\n"
        "assert not fused_numba.AVAILABLE\n"
        "ref = torch.linspace(-3, 3, 1001, dtype=torch.float64)\n"
        "c = metrics.compare(ref, ref.to(torch.bfloat16), 'bf16')\n"
        "assert c.backend == 'torch', c.backend\n"
        "print(c.max_ulp_diff, c.max_eps_diff, c.histogram['0'])\n"
        "try:\n"
        "    metrics.compare(ref, ref.to(torch.bfloat16), 'bf16', backend='numba')\n"
        "except ValueError as e:\n"
        "    print('refused:', e)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(ENV_VAR, None)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=HANG_LIMIT)
    assert result.returncode == 0, result.stderr
    ref = torch.linspace(-3, 3, 1001, dtype=torch.float64)
    c = compare(ref, ref.to(torch.bfloat16), "bf16")
    lines = result.stdout.splitlines()
    assert lines[0] == f"{c.max_ulp_diff} {c.max_eps_diff} {c.histogram['0']}"
    assert "numba is not installed" in lines[1]
