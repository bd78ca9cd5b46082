"""Bounds of fused chains of products (gemm→gemm, conv→gemm), composed from runner.bound's pieces.

out = R_T(E)·C, E the first product, the reference rounding the intermediate as the op says (every Σ over
products of magnitudes below is upper_matmul's: never below the exact sum, in f32 where that is proven):

    B_out = Σ_n I_mn |C_no|                 the first product's error through the intermediate's
                                           rounding (RoundedIntermediate: 0 where kernel and reference
                                           must round alike, one step of T where they may not; on
                                           independent centred operands at most (λ/2)·sqrt(Σ_n I² C²))
          + F_2 · Σ_n |R_T(E)_mn| |C_no|    the second product sum (the gemm piece over n)
          + c_out · ulp_T(out)              the output rounding

with F_1 = u_in + A(first count) bounding the first product's error by F_1 · Σ|a·b| of that product.

With an element-wise step between the products, out = R_T(f(s·E))·C, the intermediate's deviation comes
from intervals instead (SteppedIntermediate): the kernel's argument lies in s·[E - F_1·Σ|a·b| - r,
E + F_1·Σ|a·b| + r] (r = half a step of T: the kernel may round E to T first); f's acceptance interval
over it, in f32 (runner/intervals.py, the scale's multiply included), holds every value the kernel may
round; rounding is monotone, so its intermediate lies in [R_T(lo), R_T(hi)] and deviates from the
reference's R_T(f(s·E)) by at most I = max(R_T(hi) - R_T(f(sE)), R_T(f(sE)) - R_T(lo)).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import torch

from e2egen import metrics
from e2egen.runner import intervals as iv
from e2egen.runner.bound import Coefficient, OutputRounding, ProductSumCoefficient, RoundedIntermediate, ScaledMagnitude, SumOfBounds
from e2egen.runner.intervals import Interval
from e2egen.runner.ops.chains.intermediates import conv_output, exact_intermediate, exact_product, exact_step
from e2egen.runner.ops.math_functions import FUNCTIONS
from e2egen.runner.options import BoundModel
from e2egen.runner.problem import Problem
from e2egen.runner.upper_matmul import Magnitudes, upper_matmul, upper_product


def rounded_chain_bound(problem: Problem, exact: torch.Tensor, magnitude: torch.Tensor, first_count: int,
                        c: torch.Tensor, first: str, second: str, operands: tuple[torch.Tensor, torch.Tensor]) -> SumOfBounds:
    """The bound of R_T(exact)·c, given the first product's exact value, its Σ|a·b|, length and operands."""
    dtype, fmt = problem.dtype, problem.out_dtype
    c_magnitudes = Magnitudes(c)  # |C|, rounded up to f32 once for both products with it
    rounded = upper_matmul(metrics.round_to(exact, fmt), c_magnitudes)
    return SumOfBounds((
        RoundedIntermediate(exact, magnitude, ProductSumCoefficient(first_count, dtype), fmt, c_magnitudes,
                            source=f"{first}, rounded to {fmt}",
                            independent=independent_products(problem, *operands), dtype=dtype),
        ScaledMagnitude(ProductSumCoefficient(c.shape[-2], dtype), rounded, second),
        OutputRounding(fmt),
    ))


def independent_products(problem: Problem, first: torch.Tensor, second: torch.Tensor) -> bool:
    """Whether the first product's sums err independently of one another (RoundedIntermediate's walk): every input
    drawn independently at random, and the products' mean within their spread (|μ_a·μ_b| <= σ_a·σ_b). Off-centre
    sums share their rounding's lean (CommonValueSum), and set data (a pattern, ones) repeats it."""
    if not all(problem.drawn_independently(name) for name in problem.input_shapes):
        return False
    return abs(float(first.mean()) * float(second.mean())) <= float(first.std()) * float(second.std())


@dataclass(frozen=True, eq=False)
class SteppedIntermediate:
    """R_T(f(s·E)) carried into the output, Σ_n I_n·|following_n| (the module's docstring derives I)."""

    exact: torch.Tensor  # E, float64
    magnitude: torch.Tensor  # Σ|a·b| of the first product
    coefficient: Coefficient
    step: Callable[[Interval], Interval]  # argument interval -> f(s·argument)'s interval in f32
    reference: torch.Tensor  # R_T(f(s·E)), the reference's intermediate
    fmt: str
    following: Magnitudes  # |C|
    source: str = "element-wise step"

    def deviation(self, model: BoundModel) -> torch.Tensor:
        spread = self.magnitude * self.coefficient(model)
        spread = spread + metrics.ulp(self.exact.abs() + spread, self.fmt) / 2
        values = self.step(Interval(self.exact - spread, self.exact + spread))
        low, high = metrics.round_to(values.lo, self.fmt), metrics.round_to(values.hi, self.fmt)
        return torch.maximum(high - self.reference, self.reference - low).clamp_(min=0)

    def evaluate(self, model: BoundModel, ref: torch.Tensor | None = None) -> torch.Tensor:
        return upper_matmul(self.deviation(model), self.following)


def gemm_gemm_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> SumOfBounds:
    a, b, params = inputs64["a"], inputs64["b"], problem.params
    exact, magnitude = exact_product(params, inputs64), upper_matmul(a, b)
    if not params.has_step:
        return rounded_chain_bound(problem, exact, magnitude, params.k, inputs64["c"], "A·B product sum",
                                   "second product sum", (a, b))
    return stepped_chain_bound(problem, exact, magnitude, params.k, inputs64["c"])


def stepped_chain_bound(problem: Problem, exact: torch.Tensor, magnitude: torch.Tensor, first_count: int,
                        c: torch.Tensor) -> SumOfBounds:
    """The bound of R_T(f(scale·exact))·c (the problem's `between` and `scale`): f computed in f32 as the
    kernel contract says."""
    dtype, fmt = problem.dtype, problem.out_dtype
    scale, between = problem.params.scale, problem.params.between
    context = iv.IntervalContext(compute="f32")

    def step(argument: iv.Interval) -> iv.Interval:
        scaled = iv.mul(argument, iv.constant(scale, argument.lo, context), context) if scale != 1.0 else argument
        return FUNCTIONS[between].interval(scaled, context) if between in FUNCTIONS else scaled

    reference = metrics.round_to(exact_step(problem.params, exact), fmt)
    c_magnitudes = Magnitudes(c)  # |C|, rounded up to f32 once for both products with it
    return SumOfBounds((
        SteppedIntermediate(exact, magnitude, ProductSumCoefficient(first_count, dtype), step, reference, fmt, c_magnitudes,
                            source=f"A·B product sum through {between} (scale {scale:g}), rounded to {fmt}"),
        ScaledMagnitude(ProductSumCoefficient(c.shape[-2], dtype), upper_matmul(reference, c_magnitudes),
                        "second product sum"),
        OutputRounding(fmt),
    ))


def conv_gemm_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> SumOfBounds:
    """As gemm→gemm, the first product a 2-d convolution (its Σ|x·w| and its reduction length)."""
    spec, params = problem.spec, problem.params
    exact = exact_intermediate(params, inputs64)
    count = spec.conv_reduction_size(params)
    magnitude = upper_product(inputs64["x"], inputs64["w"], lambda x, w: conv_output(params, {"x": x, "w": w}),
                              count)
    return rounded_chain_bound(problem, exact, magnitude, count, inputs64["c"],
                               "convolution", "gemm product sum", (inputs64["x"], inputs64["w"]))
