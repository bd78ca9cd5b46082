"""--e2e-kernel-time: 'warm' (default) repeats a fast kernel's first call and records the repeat; 'first' (make pr)
records the first call and repeats nothing."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import TINY_GEMM, catalogue_text, run_cli

COUNTING_KERNEL = '''
import os


def gemm(a, b):
    with open(os.environ["CALLS_FILE"], "a") as calls:
        calls.write("call\\n")
    return a @ b
'''

# conftest's tiny gemms (nn and tt: two kernel signatures) through the counting kernel, one range each
GEMMS = TINY_GEMM.replace('op = "gemm"', 'op = "gemm"\nimpl = "counting_kernel:gemm"').replace('["r0", "r4"]', '["r0"]')


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """The generated suite, run once already so the kernel's arithmetic is probed and cached: the runs below
    count only the cases' own calls."""
    root = tmp_path_factory.mktemp("kernel_time")
    (root / "configs.toml").write_text(catalogue_text(GEMMS), encoding="utf-8")
    (root / "counting_kernel.py").write_text(COUNTING_KERNEL, encoding="utf-8")
    result = run_cli("gen", "configs.toml", "--out", "e2e", cwd=root)
    assert result.returncode == 0, result.stderr
    result = pytest_run(root, root / "probe-calls")
    assert result.returncode == 0, result.stdout + result.stderr
    return root


def pytest_run(root, calls_file, *option: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CALLS_FILE": str(calls_file), "PYTHONPATH": str(root), "E2EGEN_PROFILES": str(root / "profiles")}
    return subprocess.run([sys.executable, "-m", "pytest", "e2e", "-p", "no:cacheprovider", "-q", "-n", "0",
                           "--e2e-device", "cpu", *option], cwd=root, capture_output=True, text=True, env=env)


@pytest.mark.parametrize(("option", "calls"), [((), 4), (("--e2e-kernel-time", "warm"), 4), (("--e2e-kernel-time", "first"), 2)])
def test_the_kernel_is_called_again_only_for_a_warm_time(suite, tmp_path, option, calls):
    """Two cases (nn and tt: two signatures): each kernel call twice for a warm time, once for the first call."""
    calls_file = tmp_path / "calls"
    result = pytest_run(suite, calls_file, *option)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
    assert calls_file.read_text().count("call\n") == calls
