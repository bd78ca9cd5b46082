"""fp8 (OCP e4m3fn, e5m2, and the pairs) and i8 conv/gemm cases: inputs, default kernels, verdicts."""
from __future__ import annotations

import sys
import types

import pytest
import torch

from e2egen import metrics
from e2egen.runner.arithmetic.requirements import violations
from e2egen.runner.errors import ProblemError
from e2egen.runner import draws
from e2egen.runner.inputs import generate_inputs
from e2egen.runner.options import BoundModel, Requirements
from e2egen.runner.problem import make_problem
from e2egen.runner import run  # the package's function: importing the submodule first would bind the name `run` to it

CONV = {"n": 2, "c": 16, "k": 8, "hw": [9, 9], "kernel": 3, "pad": 1}
CASES = [("gemm", "fwd", "nt", {"m": 32, "n": 48, "k": 256}), ("conv2d", "fwd", "nhwc", CONV),
         ("conv2d", "bwd_data", "nchw", CONV), ("conv2d", "bwd_weight", "nchw", CONV)]


# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = [pytest.mark.usefixtures("fresh_profiles"), pytest.mark.cpu_paths]  # tests/conftest.py


def f16_accumulating_gemm(a, b):
    """An fp8 gemm whose partial sums pass through f16 (the bug the issue names)."""
    a32, b32 = a.float(), b.float()
    total = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float16)
    for index in range(a.shape[1]):
        total = (total.float() + torch.outer(a32[:, index], b32[index])).half()
    return total.float()


def i16_accumulating_gemm(a, b):
    """An i8 gemm with an i16 accumulator: wraps where the sum leaves [-32768, 32767]."""
    total = torch.zeros(a.shape[0], b.shape[1], dtype=torch.int16)
    for index in range(a.shape[1]):
        total = total + torch.outer(a[:, index].to(torch.int16), b[index].to(torch.int16))
    return total.to(torch.int32)


@pytest.fixture(scope="module", autouse=True)
def kernels():
    module = types.ModuleType("lowbit_wrong_kernels")
    module.f16_accumulating_gemm = f16_accumulating_gemm
    module.i16_accumulating_gemm = i16_accumulating_gemm
    sys.modules[module.__name__] = module
    yield
    del sys.modules[module.__name__]


@pytest.mark.parametrize("dtype", ["f8e4m3fn", "f8e5m2", "f8e4m3fn_f8e5m2", "f8e5m2_f8e4m3fn", "f8e4m3fnuz", "f8e5m2fnuz",
                                   "f8e4m3fnuz_f8e5m2fnuz"])
@pytest.mark.parametrize("op, direction, layout, params", CASES)
def test_fp8_cases_pass_with_torchs_widened_kernel(dtype, op, direction, layout, params):
    result = run(make_problem(op, direction, dtype, layout, params, (-2.0, 2.0), 3), bound=BoundModel())
    assert result.out.dtype == torch.float32 and result.out_dtype == "f32"
    assert metrics.compare(result.ref, result.out, dtype="f32", bound=result.bound).bound_ratio <= 1.0
    arithmetic = result.arithmetic.arithmetic
    assert arithmetic.acc_bits == 24 and arithmetic.inputs == "exact" and not arithmetic.unexplained


def test_a_pair_gives_each_operand_its_own_format():
    inputs = generate_inputs(make_problem("gemm", "fwd", "f8e4m3fn_f8e5m2", "nn", {"m": 8, "n": 8, "k": 64}, (-2.0, 2.0), 1))
    assert inputs["a"].dtype == torch.float8_e4m3fn and inputs["b"].dtype == torch.float8_e5m2
    for name, fmt in (("a", "f8e4m3fn"), ("b", "f8e5m2")):
        values = inputs[name].double()
        assert torch.equal(metrics.round_to(values, fmt), values)


def test_fp8_inputs_are_correctly_rounded_draws():
    problem = make_problem("gemm", "fwd", "f8e4m3fn", "nn", {"m": 16, "n": 16, "k": 64}, (-3.0, 3.0), 9)
    inputs = generate_inputs(problem)
    drawn = draws.uniform((16, 64), -3.0, 3.0, problem.seed, 0, torch.float32)  # fp8: an f32 draw, A is stream 0
    assert torch.equal(inputs["a"].double(), metrics.round_to(drawn.double(), "f8e4m3fn"))


def test_an_f16_accumulating_fp8_kernel_is_measured_and_fails_require_acc_f32():
    problem = make_problem("gemm", "fwd", "f8e4m3fn", "nn", {"m": 16, "n": 16, "k": 128}, (-2.0, 2.0), 4)
    result = run(problem, impl="lowbit_wrong_kernels:f16_accumulating_gemm", bound=BoundModel())
    arithmetic = result.arithmetic.arithmetic
    assert arithmetic.acc_bits == 11
    assert [v.key for v in violations(Requirements(acc="f32"), arithmetic, "f8e4m3fn")] == ["acc"]


@pytest.mark.parametrize("op, direction, layout, params", CASES)
def test_i8_is_exact_with_i32_outputs(op, direction, layout, params):
    result = run(make_problem(op, direction, "i8", layout, params, (-5.0, 4.0), 3, "integers"), bound=None)
    assert result.out.dtype == torch.int32 and result.out_dtype == "i32"
    comparison = metrics.compare(result.ref, result.out, dtype="i32")
    assert comparison.mismatches == 0 and comparison.overflow == 0


def test_i8_sums_beyond_i32_are_reported_as_overflow_not_wrapped_silently():
    problem = make_problem("gemm", "fwd", "i8", "nn", {"m": 4, "n": 4, "k": 300_000}, (120.0, 127.0), 3, "integers")
    result = run(problem, bound=None)
    comparison = metrics.compare(result.ref, result.out, dtype="i32")
    assert comparison.overflow == 16 and float(result.ref.min()) > 2 ** 31 - 1


def test_an_i16_accumulator_wraps_and_fails():
    problem = make_problem("gemm", "fwd", "i8", "nn", {"m": 8, "n": 8, "k": 64}, (100.0, 127.0), 3, "integers")
    result = run(problem, impl="lowbit_wrong_kernels:i16_accumulating_gemm", bound=None)
    comparison = metrics.compare(result.ref, result.out, dtype="i32")
    assert comparison.mismatches > 0 and comparison.overflow == 0


def test_ranges_must_fit_the_formats():
    with pytest.raises(ProblemError, match="448"):
        make_problem("gemm", "fwd", "f8e4m3fn", "nn", {"m": 4, "n": 4, "k": 4}, (-500.0, 1.0), 1)
    with pytest.raises(ProblemError, match="448"):  # a pair: the smaller largest value of the two
        make_problem("gemm", "fwd", "f8e5m2_f8e4m3fn", "nn", {"m": 4, "n": 4, "k": 4}, (-1000.0, 1.0), 1)
    with pytest.raises(ProblemError, match="127"):
        make_problem("gemm", "fwd", "i8", "nn", {"m": 4, "n": 4, "k": 4}, (-200.0, 1.0), 1, "integers")


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
@pytest.mark.parametrize("out_dtype", ["bf16", "f16"])
def test_an_fp8_conv_writes_the_output_format_it_is_asked_for(direction, out_dtype):
    params = {"n": 2, "c": 8, "k": 8, "hw": 6, "kernel": 3, "pad": 1, "out_dtype": out_dtype}
    problem = make_problem("conv2d", direction, "f8e4m3fn", "nhwc", params, (-2.0, 2.0), 3)
    result = run(problem, bound=BoundModel())
    assert result.out.dtype == {"bf16": torch.bfloat16, "f16": torch.float16}[out_dtype] and result.out_dtype == out_dtype
    assert result.ref.dtype == torch.float64
    assert metrics.compare(result.ref, result.out, out_dtype, bound=result.bound).bound_ratio <= 1.0
    with pytest.raises(ProblemError, match="out_dtype applies to fp8 and fp4"):
        make_problem("conv2d", direction, "f16", "nhwc", params, (-2.0, 2.0), 3)


def _gemm_in_i16(a, b):
    """An i8 gemm whose running sums are kept in i16: they wrap once |partial sum| passes 32767."""
    return torch.matmul(a.to(torch.int16), b.to(torch.int16)).to(torch.int32)


def test_an_i16_accumulator_shows_only_on_i8_s_whole_range():
    """rocMLIR's -5..4 data never wraps an i16 sum; [-128, 127] (now a valid i8 range) does."""
    import e2egen

    shape = {"m": 32, "n": 32, "k": 256}
    assert e2egen.judge(_gemm_in_i16, "gemm", shape, "i8", data_range=(-5, 4), integer_data=True).passed
    wrapped = e2egen.judge(_gemm_in_i16, "gemm", shape, "i8", data_range=(-128, 127), integer_data=True)
    assert wrapped.status == "failed" and "max_abs_diff" in wrapped.reason
    assert e2egen.judge(None, "gemm", shape, "i8", data_range=(-128, 127), integer_data=True).passed
