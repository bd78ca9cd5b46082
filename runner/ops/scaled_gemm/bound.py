"""The bound of a scaled gemm, composed from the product-sum pieces (runner/bound.py).

For random data: the elements and scales are exact values of their formats, so A ⊙ scale_a and
B ⊙ scale_b are exact in float64, and each output sums K products t_i = a_i·sa_i·b_i·sb_i:

    B = (u_in + A) · Σ|t_i|  +  r · u_f32 · Σ|t_i|  +  c_out · ulp_T(ref)
        └ ProductSumError ┘    └ scale roundings ┘    └ OutputRounding ┘

The first term is gemm's, with the kernel's measured arithmetic (fp8 products are exact in f32; the
accumulator is what the probes found: Hopper's fp8 tensor cores are reported to keep fewer bits). The
scales enter by multiplication: a power of two (e8m0) is exact, so r = 0 when both scales are e8m0; with
an f32 scale a kernel rounds up to three times per term on the way (sa·sb, then times the partial or
element, or each operand's dequantization and their product), so r = 3: each rounding is relative to a
block's partial sum or to a term, and a partial's magnitude is at most Σ|t_i| of its block.

For a structured pattern (runner/ops/scaled_gemm/scaling.py) every correct kernel's sum is exact in f32, so the only
error left is the one rounding to the output format: the bound is |round_T(ref) - ref|, which accepts
exactly the correctly rounded result (either neighbour at a tie) and, where ref is a value of T, only ref.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from e2egen import metrics
from e2egen.runner.bound import (ErrorBound, FormatRoundings, OutputRounding, ProductSumError, ScaledMagnitude,
                                 SumOfBounds)
from e2egen.runner.magnitude import F64_UNIT_ROUNDOFF, widening
from e2egen.runner.options import BoundModel
from e2egen.runner.problem import Problem

F32_SCALE_ROUNDINGS = 3


@dataclass(frozen=True, eq=False)
class CorrectlyRounded:
    """Exact up to the one rounding to the output format: |round_T(ref) - ref| per element."""

    out_dtype: str
    source = "correctly rounded"

    def evaluate(self, model: BoundModel, ref: torch.Tensor) -> torch.Tensor:
        return (metrics.round_to(ref, self.out_dtype) - ref).abs_()


def scaled_gemm_bound(problem: Problem, a: torch.Tensor, b: torch.Tensor) -> ErrorBound:
    """The output's bound from the dequantized operands (float64, exact)."""
    params = problem.params
    if params.pattern not in ("random", "varied"):
        return CorrectlyRounded(params.output_format)
    terms = torch.matmul(a.abs(), b.abs()).mul_(widening(params.k, F64_UNIT_ROUNDOFF))
    roundings = 0 if params.scale_formats == ("e8m0", "e8m0") else F32_SCALE_ROUNDINGS
    parts: list[ErrorBound] = [ProductSumError(terms, params.k, problem.dtype)]
    if roundings:
        parts.append(ScaledMagnitude(FormatRoundings("f32", roundings), terms, "scale roundings"))
    parts.append(OutputRounding(params.output_format))
    return SumOfBounds(tuple(parts))
