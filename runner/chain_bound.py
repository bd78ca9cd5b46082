"""Bounds of fused chains of products (gemm→gemm, conv→gemm), composed from runner.bound's pieces.

out = R_T(A·B)·C, the reference rounding the intermediate as the op says:

    B_out = Σ_n I_mn |C_no|                 the first product's error through the intermediate's
                                           rounding (RoundedIntermediate: 0 where kernel and reference
                                           must round alike, one step of T where they may not)
          + F_2 · Σ_n |R_T(E)_mn| |C_no|    the second product sum (the gemm piece over n)
          + c_out · ulp_T(out)              the output rounding

with E = A·B exact and F_1 = u_in + A(k) bounding the first product's error by F_1 · Σ_k |A||B|.
"""
from __future__ import annotations

from typing import Mapping

import torch

from e2egen import metrics

from .bound import OutputRounding, ProductSumCoefficient, RoundedIntermediate, ScaledMagnitude, SumOfBounds
from .problem import Problem


def gemm_gemm_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> SumOfBounds:
    params, dtype, fmt = problem.params, problem.dtype, problem.out_dtype
    a, b, c = inputs64["a"], inputs64["b"], inputs64["c"]
    exact = torch.matmul(a, b)
    c_abs = c.abs()
    second = torch.matmul(metrics.round_to(exact, fmt).abs(), c_abs)
    return SumOfBounds((
        RoundedIntermediate(exact, torch.matmul(a.abs(), b.abs()), ProductSumCoefficient(params.k, dtype), fmt, c_abs,
                            source="A·B product sum, rounded to " + fmt),
        ScaledMagnitude(ProductSumCoefficient(params.n, dtype), second, "second product sum"),
        OutputRounding(fmt),
    ))


def conv_gemm_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> SumOfBounds:
    """As gemm→gemm, the first product a 2-d convolution (its Σ|x·w| and its reduction length C·R·S)."""
    params, dtype, fmt = problem.params, problem.dtype, problem.out_dtype
    spec = problem.spec
    exact = spec.conv_output(params, inputs64)
    magnitude = spec.conv_output(params, {"x": inputs64["x"].abs(), "w": inputs64["w"].abs()})
    first_count = params.conv.c * params.conv.kernel[0] * params.conv.kernel[1]
    c_abs = inputs64["c"].abs()
    second = torch.matmul(metrics.round_to(exact, fmt).abs(), c_abs)
    return SumOfBounds((
        RoundedIntermediate(exact, magnitude, ProductSumCoefficient(first_count, dtype), fmt, c_abs,
                            source="convolution, rounded to " + fmt),
        ScaledMagnitude(ProductSumCoefficient(params.conv.k, dtype), second, "gemm product sum"),
        OutputRounding(fmt),
    ))
