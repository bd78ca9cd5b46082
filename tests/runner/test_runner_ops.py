"""Every op x direction x layout x dtype on tiny shapes: torch's kernel within
the rounding-error bound of the float64 reference, and the reference equal to
an independent naive implementation."""
from __future__ import annotations

import importlib

import pytest
import torch

from e2egen import metrics
from e2egen.runner import OPS, BoundModel, Skip, make_problem, run
from e2egen.runner.inputs import generate_inputs

# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = pytest.mark.cpu_paths


def _sibling(name):
    package = __name__.rpartition(".")[0]  # tests/ may or may not be a package
    return importlib.import_module(f"{package}.{name}" if package else name)


naive = _sibling("runner_naive")

# Small, but with every geometry feature: stride, padding, dilation, groups.
PARAMS = {
    "conv1d": {"n": 2, "c": 4, "k": 6, "w": 11, "kernel": 3, "stride": 2, "pad": 1, "dilation": 2, "groups": 2},
    "conv2d": {"n": 2, "c": 4, "k": 6, "hw": [7, 6], "kernel": [3, 2], "stride": [2, 1], "pad": [[1, 2], [0, 1]],
               "dilation": [1, 2], "groups": 2},
    "conv3d": {"n": 1, "c": 4, "k": 4, "dhw": [5, 4, 6], "kernel": [2, 3, 3], "stride": [1, 2, 1], "pad": 1, "groups": 2},
    "gemm": {"m": 5, "n": 7, "k": 33, "batch": 2},
    "gemm_gemm": {"m": 5, "n": 9, "k": 33, "o": 3, "batch": 2},
    "conv_gemm": {"n": 2, "c": 3, "k": 5, "hw": [7, 6], "kernel": [3, 2], "stride": [2, 1], "pad": [1, 0],
                  "dilation": [1, 2], "o": 4},
    "attention": {"batch": 2, "heads_q": 4, "heads_kv": 2, "seq_q": 5, "seq_k": 9, "head_dim_qk": 6, "head_dim_v": 3,
                  "causal": True, "align": "bottom-right", "window": [3, -1], "kv_lengths": [9, 4], "return_lse": True,
                  "score_bias": True},
}
# The tensor ops (element-wise, reductions, normalisations) have their own files, with their own naive
# references and wrong kernels: tests/ops/pointwise/test_pointwise_ops.py, test_reduction_ops.py, test_normalization_ops.py.
# scaled_gemm has tests/ops/scaled_gemm/test_scaled_gemm.py (its inputs are quantized, its reference checked against a naive
# per-element scale lookup there).
TENSOR_OPS_TESTED_ELSEWHERE = {name for name, spec in OPS.items() if "contiguous" in spec.layouts} | {"scaled_gemm"}
CASES = [(op, direction, layout, dtype)
         for op, spec in OPS.items() if op not in TENSOR_OPS_TESTED_ELSEWHERE
         for direction in spec.directions for layout in spec.layouts for dtype in spec.dtypes]


def bound_model(device_type: str, op: str, direction: str, dtype: str) -> BoundModel:
    # torch's CPU f16 convolution backward passes lose far more than an f32
    # accumulator would (observed with torch 2.13: up to ~600 f16 ulps for a
    # 576-term bwd_data); hold them to an f16 accumulator's bound instead.
    if device_type == "cpu" and dtype == "f16" and op.startswith("conv") and direction != "fwd":
        return BoundModel(acc="f16")
    return BoundModel()


@pytest.mark.parametrize("op,direction,layout,dtype", CASES, ids=["-".join(c) for c in CASES])
def test_torch_kernel_is_within_the_error_bound(op, direction, layout, dtype):
    i8 = dtype == "i8"  # integer data
    integer = i8 and op != "attention"  # judged exactly, no bound; i8 attention (quantized) writes f16
    params = {**PARAMS[op], "quantized": True} if i8 and op == "attention" else PARAMS[op]
    problem = make_problem(op, direction, dtype, layout, params, (-5.0, 4.0) if i8 else (-1.0, 1.0), seed=11,
                           input_data="integers" if i8 else "uniform")
    model = None if integer else bound_model("cpu" if not torch.cuda.is_available() else "cuda", op, direction, dtype)
    try:
        result = run(problem, bound=model)
    except Skip as skip:
        assert dtype == "tf32" and "tf32" in skip.reason
        pytest.skip(skip.reason)
    assert result.out.shape == problem.output_shape and result.ref.dtype == torch.float64
    comparison = metrics.compare(result.ref, result.out, dtype=result.out_dtype, bound=result.bound)
    verdict = comparison.check({"max_abs_diff": 0.0} if integer else {"bound_ratio": 1.0})
    assert verdict.passed, str(verdict)


@pytest.mark.parametrize("op,direction", [(op, d) for op, spec in OPS.items() if op not in TENSOR_OPS_TESTED_ELSEWHERE
                                          for d in spec.directions])
def test_reference_matches_naive_implementation(op, direction):
    problem = make_problem(op, direction, "f32", OPS[op].layouts[1], PARAMS[op], (-2.0, 3.0), seed=5)
    result = run(problem)
    inputs64 = {name: t.double() for name, t in generate_inputs(problem).items()}
    expected = naive.evaluate(problem, inputs64)
    if op == "attention":  # a weighted mean of v: float64 agrees to a few ulps of max |v|
        assert ((result.ref - expected).abs() <= 1e-12).all()
        return
    magnitude = naive.evaluate(problem, {name: t.abs() for name, t in inputs64.items()})
    # Both sum the same float64 products in different orders: they agree to
    # a few float64 ulps of the sum of magnitudes.
    assert ((result.ref - expected).abs() <= 1e-12 * magnitude).all()


def test_batched_gemm_of_one_is_three_dimensional():
    problem = make_problem("gemm", "fwd", "f32", "tt", {"m": 3, "n": 2, "k": 4, "batch": 1}, (-1.0, 1.0), 0)
    result = run(problem)
    assert result.out.shape == (1, 3, 2) and result.ref.shape == (1, 3, 2)
