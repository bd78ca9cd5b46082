"""The e2egen command as a user types it: list, run, validate; exit statuses 0, 1, 2."""
from __future__ import annotations

import os

from conftest import REPO, TINY_CONV, TINY_GEMM, catalogue_text, run_cli
from e2egen.invocation import e2egen_command


def test_list_filters_by_glob_and_axis(write_catalogue):
    path = write_catalogue(catalogue_text(TINY_CONV, TINY_GEMM))
    result = run_cli("list", "-c", str(path), "--filter", "dtype=f16 direction=bwd_data,bwd_weight tiny/*")
    assert result.returncode == 0, result.stderr
    ids = [line.split("\t")[0] for line in result.stdout.splitlines()]
    assert len(ids) == 4 and all("/f16/" in i and "/bwd_" in i for i in ids)
    everything = run_cli("list", "-c", str(path)).stdout.splitlines()
    assert len(everything) == 16


def test_list_rejects_unknown_axis(write_catalogue):
    path = write_catalogue(catalogue_text(TINY_GEMM))
    result = run_cli("list", "-c", str(path), "--filter", "dtyp=f16")
    assert result.returncode == 2 and "unknown axis 'dtyp'" in result.stderr and "Traceback" not in result.stderr


def test_run_prints_report_and_passes(write_catalogue):
    path = write_catalogue(catalogue_text(TINY_GEMM))
    result = run_cli("run", "mm/gemm/m8/fwd/f32/tt/r4", "-c", str(path), "--device", "cpu", "--seed", "5")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[PASSED]" in result.stdout and "seed=5" in result.stdout and "rms" in result.stdout
    assert f"repro: {e2egen_command()} run mm/gemm/m8/fwd/f32/tt/r4 --seed 5 --device cpu --catalogue" in result.stdout


def test_run_of_a_wrong_kernel_exits_1(write_catalogue):
    text = catalogue_text(TINY_GEMM.replace('op = "gemm"', 'op = "gemm"\nimpl = "plugin_kernels:gemm_off_by_one_percent"'))
    path = write_catalogue(text)
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}
    result = run_cli("run", "mm/gemm/m8/fwd/f32/nn/r0", "-c", str(path), "--device", "cpu", env=env)
    assert result.returncode == 1
    assert "[FAILED: requirement broken by the measured arithmetic, and numerics outside the bound]" in result.stdout and "reason:" in result.stdout


def test_run_unknown_case_suggests_the_near_one(write_catalogue):
    path = write_catalogue(catalogue_text(TINY_GEMM))
    result = run_cli("run", "mm/gemm/m8/fwd/f32/tt/r5", "-c", str(path))
    assert result.returncode == 2
    assert "no case 'mm/gemm/m8/fwd/f32/tt/r5'" in result.stderr and "did you mean 'mm/gemm/m8/fwd/f32/tt/r4'" in result.stderr


def test_every_command_has_help():
    for command in ("validate", "gen", "list", "run", "import-rocmlir", "nightly", "report", "merge", "runs",
                    "explain", "study", "calibrate", "select"):
        result = run_cli(command, "--help")
        assert result.returncode == 0 and "usage: e2egen" in result.stdout, command
