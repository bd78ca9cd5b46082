"""cumsum (runner/ops/reductions/): its parameters, bound and probes, and the verdict a generated case gives torch's
kernel, a correct blocked scan, and three wrong scans (runner/ops/reductions/kernels.py). The checks every op
shares (reference against brute force, planted bug, bad keys) are tests/ops/test_conformance.py's."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from e2egen.generator.cases import expand
from e2egen.generator.execute import execute
from e2egen.generator.loader import load_catalogue
from e2egen.runner import ProblemError, make_problem
from e2egen.runner.arithmetic.lookup import probe_problem
from e2egen.runner.kernels import case_kernel
from e2egen.runner.ops import OPS
from e2egen.runner.ops.reductions import kernels
from small_cases import CATALOGUE

# Verdicts on torch's own CPU kernel and its measured arithmetic depend on the CPU path torch takes.
pytestmark = pytest.mark.cpu_paths

IMPL = "e2egen.runner.ops.reductions.kernels:"


def shipped_cases() -> dict[str, object]:
    """The shipped catalogue's forward cumsum cases, by id (the backward: test_reduction_backward.py)."""
    return {case.id: case for case in expand(load_catalogue(str(CATALOGUE)))
            if case.op == "cumsum" and case.direction == "fwd"}


CASES = shipped_cases()
ROWS = [i for i in CASES if "/rows-64x1024/" in i and "/contiguous/" in i]
CHANNELS = [i for i in CASES if "/channels-2x32x14x14-axis1/" in i and "/channels_last/" in i]


def outcome(case_id: str, impl: str | None = None):
    case = CASES[case_id]
    return execute(case if impl is None else dataclasses.replace(case, impl=IMPL + impl), device="cpu")


def test_the_catalogue_has_every_dtype_and_layout():
    assert {(c.dtype, c.layout) for c in CASES.values()} == {
        (d, l) for d in ("f32", "f16", "bf16") for l in ("contiguous", "strided", "channels_last")}


@pytest.mark.parametrize("case_id", ROWS + CHANNELS)
@pytest.mark.parametrize("kernel", [None, *kernels.CORRECT_CUMSUM])
def test_correct_scans_pass(case_id, kernel):
    result = outcome(case_id, kernel)
    assert result.status == "passed", result.report


@pytest.mark.parametrize("case_id, kernel", [(i, k) for i in ROWS for k in ("carry_dropped_cumsum", "exclusive_cumsum")]
                         + [(i, "exclusive_cumsum") for i in CHANNELS])  # rows of 32 fit one block: no carry to lose
def test_a_lost_carry_and_an_exclusive_scan_fail_the_bound(case_id, kernel):
    result = outcome(case_id, kernel)
    assert result.status == "failed"
    assert result.comparison.bound_ratio > 100, result.report


@pytest.mark.parametrize("case_id", [i for i in ROWS if "/f32/" not in i])
def test_a_scan_in_the_input_format_breaks_the_accumulator_requirement(case_id):
    result = outcome(case_id, "input_format_cumsum")
    assert result.status == "failed"
    assert "acc" in result.broken, result.report


def test_the_bias_check_is_left_out_because_prefix_sums_share_roundings():
    """A correct scan of positive data leans: every prefix carries the roundings before it (z ~ 20 here)."""
    case_id = next(i for i in ROWS if "/f32/" in i and i.endswith("/r4"))
    result = outcome(case_id, "blocked_cumsum")
    assert result.status == "passed"
    assert "bias_z" not in result.verdict.tolerances and "bound_rms" in result.verdict.tolerances
    assert OPS["cumsum"].shared_rounding(CASES[case_id].problem().params)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_the_probes_find_torchs_accumulator_at_least_f32_and_an_input_format_scan_narrower(dtype):
    problem = make_problem("cumsum", "fwd", dtype, "contiguous", {"shape": [8, 300]}, (-1.0, 1.0), 3)
    probe = probe_problem(problem)
    torch_found = problem.numerics.probe_arithmetic(probe, case_kernel(problem), torch.device("cpu"), "torch")
    assert torch_found.acc_bits >= 24 and not torch_found.unexplained, torch_found.describe()
    narrow = problem.numerics.probe_arithmetic(probe, kernels.input_format_cumsum, torch.device("cpu"), "mine")
    expected = {"f32": 24, "f16": 11, "bf16": 8}[dtype]
    assert narrow.acc_bits == expected, narrow.describe()


def test_an_exclusive_scan_is_unexplained_by_the_probes():
    problem = make_problem("cumsum", "fwd", "f32", "contiguous", {"shape": [8, 300]}, (-1.0, 1.0), 3)
    found = problem.numerics.probe_arithmetic(probe_problem(problem), kernels.exclusive_cumsum, torch.device("cpu"), "mine")
    assert found.unexplained, found.describe()


def test_the_output_keeps_the_input_shape_and_the_probe_the_axis():
    problem = make_problem("cumsum", "fwd", "f16", "contiguous", {"shape": [4, 1000, 3], "axis": 1}, (-1.0, 1.0), 1)
    assert problem.output_shape == (4, 1000, 3) and problem.reduction_size == 1000
    small = problem.spec.probe_params(problem.params, "fwd")
    assert small.axis == 1 and small.shape[1] <= 32


@pytest.mark.parametrize("axis, words", [([0, 1], "one dim"), (2, "in \\[-2, 1\\]"), ("x", "one dim")])
def test_bad_axes_name_the_key(axis, words):
    with pytest.raises(ProblemError, match=f"axis.*{words}"):
        make_problem("cumsum", "fwd", "f32", "contiguous", {"shape": [4, 8], "axis": axis}, (-1.0, 1.0), 1)
