"""fp8 outputs (out_dtype f8e4m3fn or f8e5m2; runner/dtypes.SATURATING_OUT_DTYPES): the result rounded to the
format and saturated to ± its largest finite value. torch's kernels and correct alternates pass, inside the
output's range and beyond it; a kernel that does not saturate fails, with the cause named."""
from __future__ import annotations

import pytest
import torch

from e2egen.api import judge
from e2egen.runner import make_problem
from e2egen.runner.inputs import generate_inputs
from e2egen.runner.ops import OPS
from e2egen.runner.reference import ReferenceOptions, compute_reference

pytestmark = pytest.mark.usefixtures("fresh_profiles")  # tests/conftest.py: the probes run on this code

IMPL = "e2egen.runner.ops.product_sum.kernels:"
GEMM = {"m": 32, "n": 48, "k": 256}
# (dtype, out_dtype, a range whose sums pass the output's largest finite value)
BEYOND = [("f8e4m3fn", "f8e4m3fn", (-8.0, 8.0)), ("f8e5m2", "f8e5m2", (-256.0, 256.0)),
          ("f8e4m3fn", "f8e5m2", (-64.0, 64.0))]


@pytest.mark.parametrize("dtype, out_dtype, beyond", BEYOND)
@pytest.mark.parametrize("kernel", ["torch", "fp8_f32", "fp8_split_k"])
def test_correct_kernels_pass_inside_and_beyond_the_output_s_range(kernel, dtype, out_dtype, beyond):
    for data_range in ((-1.0, 1.0), beyond):
        outcome = judge(None if kernel == "torch" else IMPL + kernel, "gemm", {**GEMM, "out_dtype": out_dtype}, dtype,
                        layout="nt", data_range=data_range)
        assert outcome.passed, (data_range, outcome.reason)


@pytest.mark.parametrize("dtype, out_dtype, beyond", BEYOND)
def test_an_unsaturated_conversion_fails_with_its_cause(dtype, out_dtype, beyond):
    outcome = judge(IMPL + "fp8_unsaturated", "gemm", {**GEMM, "out_dtype": out_dtype}, dtype, layout="nt",
                    data_range=beyond)
    assert not outcome.passed
    assert f"where its {out_dtype} output saturates" in outcome.reason and "does not saturate" in outcome.reason
    # where no sum reaches the largest finite value the two conversions agree
    assert judge(IMPL + "fp8_unsaturated", "gemm", {**GEMM, "out_dtype": out_dtype}, dtype, layout="nt").passed


def test_the_reference_saturates_and_the_probes_read_an_f32_output():
    problem = make_problem("gemm", "fwd", "f8e4m3fn", "nt", {**GEMM, "out_dtype": "f8e4m3fn"}, (-8.0, 8.0), 1)
    inputs64 = {name: t.to(torch.float64) for name, t in generate_inputs(problem).items()}
    unclamped = inputs64["a"] @ inputs64["b"]
    reference = compute_reference(problem, inputs64, ReferenceOptions()).value
    assert float(unclamped.abs().max()) > 448 and float(reference.abs().max()) == 448
    assert torch.equal(reference, unclamped.clamp(-448, 448))
    assert OPS["gemm"].probe_params(problem.params, "fwd").out_dtype == "f32"
    assert OPS["conv2d"].probe_params(make_problem(
        "conv2d", "fwd", "f8e5m2", "nchw", {"n": 2, "c": 8, "k": 8, "hw": 6, "kernel": 3, "out_dtype": "f8e5m2"},
        (-1.0, 1.0), 1).params, "fwd").out_dtype == "f32"


def test_an_fp8_conv_writing_fp8_passes_torch_s_kernel():
    shape = {"n": 2, "c": 16, "k": 16, "hw": 8, "kernel": 3, "pad": 1, "out_dtype": "f8e4m3fn"}
    for data_range in ((-1.0, 1.0), (-16.0, 16.0)):
        outcome = judge(None, "conv2d", shape, "f8e4m3fn", layout="nchw", data_range=data_range)
        assert outcome.passed, outcome.reason


def test_scaled_gemm_refuses_an_fp8_output_naming_the_formats_it_writes():
    from e2egen.runner.errors import ProblemError

    with pytest.raises(ProblemError) as error:
        make_problem("scaled_gemm", "fwd", "f8e4m3fn", "nt", {**GEMM, "out_dtype": "f8e4m3fn"}, (-1.0, 1.0), 0)
    assert error.value.key == "out_dtype" and "f32, bf16 or f16" in str(error.value)
