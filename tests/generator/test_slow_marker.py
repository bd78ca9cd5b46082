"""Cases marked slow: skipped on the CPU by default (with the reason), run with --e2e-run-slow or a -m naming slow,
and by the nightly sweep."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import catalogue_text, run_cli
from e2egen.generator.plugin import slow_skip_reason

# One config marked slow (2 cases: nn, tt), one not (2 cases); small, so every run is quick.
SLOW_GEMM = """
[[suite]]
name = "mm"
op = "gemm"
dtypes = ["f32"]
layouts = ["nn", "tt"]
ranges = ["r0"]

[[suite.config]]
name = "big"
m = 8
n = 8
k = 16
markers = ["slow"]

[[suite.config]]
name = "small"
m = 4
n = 4
k = 8
"""
SLOW_IDS = ["mm/gemm/big/fwd/f32/nn/r0", "mm/gemm/big/fwd/f32/tt/r0"]


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    root = tmp_path_factory.mktemp("slow")
    (root / "configs.toml").write_text(catalogue_text(SLOW_GEMM), encoding="utf-8")
    result = run_cli("gen", "configs.toml", "--out", "e2e", cwd=root)
    assert result.returncode == 0, result.stderr
    return root


def pytest_run(root, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "e2e", "-p", "no:cacheprovider", "-v", "-rs", "-n", "0", *args],
                          cwd=root, capture_output=True, text=True, env=env)


def outcomes(result: subprocess.CompletedProcess) -> dict[str, str]:
    """case id -> PASSED / SKIPPED / FAILED, from -v's line per test ("e2e/test_mm.py::test_mm[ID] PASSED")."""
    found = {}
    for line in result.stdout.splitlines():
        if "::" in line and "[" in line:
            words = line.split("]", 1)
            status = words[1].split()[0] if len(words) > 1 and words[1].split() else ""
            found[words[0].split("[", 1)[1]] = status
    return found


def test_slow_cases_are_skipped_on_the_cpu_by_default_with_how_to_run_them(suite):
    result = pytest_run(suite, "--e2e-device", "cpu")
    assert result.returncode == 0, result.stdout + result.stderr
    seen = outcomes(result)
    assert {seen[i] for i in SLOW_IDS} == {"SKIPPED"}
    assert [s for i, s in seen.items() if i not in SLOW_IDS] == ["PASSED", "PASSED"]
    assert "marked slow: skipped on the CPU by default; run it with --e2e-run-slow" in result.stdout
    assert "2 passed, 2 skipped" in result.stdout


@pytest.mark.parametrize("args", [("--e2e-run-slow",), ("-m", "slow"), ("-m", "gemm or slow")])
def test_run_slow_or_a_marker_expression_naming_slow_runs_them(suite, args):
    result = pytest_run(suite, "--e2e-device", "cpu", *args)
    assert result.returncode == 0, result.stdout + result.stderr
    seen = outcomes(result)
    assert {seen[i] for i in SLOW_IDS} == {"PASSED"}
    assert "SKIPPED" not in seen.values()


def test_not_slow_deselects_them(suite):
    result = pytest_run(suite, "--e2e-device", "cpu", "-m", "not slow")
    assert result.returncode == 0, result.stdout + result.stderr
    assert set(outcomes(result).values()) == {"PASSED"} and not set(SLOW_IDS) & set(outcomes(result))
    assert "2 deselected" in result.stdout


def test_the_device_from_the_environment_counts(suite):
    import os

    result = pytest_run(suite, env={**os.environ, "E2E_DEVICE": "cpu"})
    assert {outcomes(result)[i] for i in SLOW_IDS} == {"SKIPPED"}, result.stdout


@pytest.mark.parametrize("device, run_slow, markexpr, runs", [
    ("cpu", False, "", False),
    ("cpu", False, "pr", False),
    ("cpu", False, "slowish or pr", False),
    ("cpu", True, "pr", True),
    ("cpu", False, "slow", True),
    ("cpu", False, "pr and not slow", True),  # deselected by pytest anyway
    ("cuda", False, "", True),
    ("cuda", False, "pr", True),
])
def test_the_rule(device, run_slow, markexpr, runs):
    assert (slow_skip_reason(device, run_slow, markexpr) is None) == runs


def test_xdist_workers_skip_them_too(suite):
    result = pytest_run(suite, "--e2e-device", "cpu", "-n", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed, 2 skipped" in result.stdout


def test_the_nightly_sweep_runs_slow_cases_on_the_cpu(suite):
    from e2egen.nightly.store import Store

    result = run_cli("nightly", "--catalogue", "configs.toml", "--out", "e2e", "--store", "results/e2e.sqlite",
                     "--no-progress", "--no-report", "--workers", "0", "--device", "cpu", cwd=suite)
    assert result.returncode == 0, result.stdout + result.stderr
    with Store(suite / "results/e2e.sqlite", create=False) as store:
        (run,) = store.runs()
        statuses = {r.case_id: r.status for r in store.records(run.run_id)}
    assert len(statuses) == 4 and set(statuses.values()) == {"passed"}
