"""Bounds of fused chains of products (gemm→gemm, conv→gemm), composed from runner.bound's pieces.

out = R_T(E)·C, E the first product, the reference rounding the intermediate as the op says:

    B_out = Σ_n I_mn |C_no|                 the first product's error through the intermediate's
                                           rounding (RoundedIntermediate: 0 where kernel and reference
                                           must round alike, one step of T where they may not)
          + F_2 · Σ_n |R_T(E)_mn| |C_no|    the second product sum (the gemm piece over n)
          + c_out · ulp_T(out)              the output rounding

with F_1 = u_in + A(first count) bounding the first product's error by F_1 · Σ|a·b| of that product.
"""
from __future__ import annotations

from typing import Mapping

import torch

from e2egen import metrics

from .bound import OutputRounding, ProductSumCoefficient, RoundedIntermediate, ScaledMagnitude, SumOfBounds
from .problem import Problem


def rounded_chain_bound(problem: Problem, exact: torch.Tensor, magnitude: torch.Tensor, first_count: int,
                        c: torch.Tensor, first: str, second: str) -> SumOfBounds:
    """The bound of R_T(exact)·c, given the first product's exact value, its Σ|a·b| and length."""
    dtype, fmt = problem.dtype, problem.out_dtype
    c_abs = c.abs()
    rounded = torch.matmul(metrics.round_to(exact, fmt).abs(), c_abs)
    return SumOfBounds((
        RoundedIntermediate(exact, magnitude, ProductSumCoefficient(first_count, dtype), fmt, c_abs,
                            source=f"{first}, rounded to {fmt}"),
        ScaledMagnitude(ProductSumCoefficient(c.shape[-2], dtype), rounded, second),
        OutputRounding(fmt),
    ))


def gemm_gemm_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> SumOfBounds:
    a, b = inputs64["a"], inputs64["b"]
    return rounded_chain_bound(problem, torch.matmul(a, b), torch.matmul(a.abs(), b.abs()), problem.params.k,
                               inputs64["c"], "A·B product sum", "second product sum")


def conv_gemm_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> SumOfBounds:
    """As gemm→gemm, the first product a 2-d convolution (its Σ|x·w| and its reduction length)."""
    spec, params = problem.spec, problem.params
    exact = spec.conv_output(params, inputs64)
    magnitude = spec.conv_output(params, {"x": inputs64["x"].abs(), "w": inputs64["w"].abs()})
    return rounded_chain_bound(problem, exact, magnitude, spec.conv_reduction_size(params), inputs64["c"],
                               "convolution", "gemm product sum")
