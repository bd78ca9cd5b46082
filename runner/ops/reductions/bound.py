"""The reductions' per-element bounds, composed from runner.bound's pieces (derivation: docs/concepts/reduction-bound.md).

For one output reducing N inputs x_i (exact in float64), u the compute format's unit roundoff as measured
(Arithmetic.acc_bits; bound.acc overrides), G(N) the growth (λ√N, or λN when strict, 2N when truncating),
μ = Σx/N, D = max_i |x_i - μ|, m = Σ|x|/N, W the walk through the partial sums where x was drawn independently
(DrawnSum; absent, the min is G(N)'s term):

    sum    min(G(N)·u·Σ|x|, W)                                the product-sum piece with |b| = 1, or the walk
           + C                                                the common value (CommonValueSum)
           + c_out·ulp_T(out)
    mean   min(G(N)·u·m, W/N) + C/N + 2u·|μ|                  the sum, then the division by N (or ·1/N)
           + c_out·ulp_T(out)
    max    0                                                  the output is one of the inputs
    var    (G(N) + 4)·u·var                                   sum of squares; centring, square, division
           + (min(G(N)·u·m, W/N) + 2u·m + C/N)²·N/(N-c)       the mean's error, second order (two-pass)
           + 2·G(N)·u · (|μ| + D)·D·(N+1)/(N-c)               the running means' errors (Welford, blocked)
           + (N/(N-c) + 1) · tiny                             squares that underflow in the compute format
           + c_out·ulp_T(out)

cumsum: out_i = Σ_{j<=i} x_j; each prefix is a sum of at most N = the row's length elements, so its bound is
the sum's with G(N) and Σ|x| over the prefix, the walk and C over the prefix's own summands:
min(G(N)·u·Σ_{j<=i}|x_j|, W_i) + C_i + c_out·ulp_T(out_i).

Backward (grad_y broadcast back over x's shape; g the grad_y of an element's output):
    sum    0                                                  a copy
    mean   2u·|g|/N + c_out·ulp_T(out)                        the division by N (or ·1/N)
    max    0 at a unique maximum and off the maxima           a copy, or 0
           2u·|g|/c + c_out·ulp_T(out) at c tied maxima        the division among them
    cumsum the forward's bound on the reversed rows           grad_x_i = Σ_{j>=i} grad_y_j
    var    s·δμ + 4u·s·|x - μ| + c_out·ulp_T(out)             grad_x = g·2(x - μ)/(N - c), s = 2|g|/(N - c),
                                                              δμ the mean's bound (as above, without its output)

var's bound covers the two-pass algorithm and the updating ones (Welford, and blocks merged by Chan's
formulas); it does not cover the one-pass E[x²] - E[x]², whose error grows with μ²/var where these terms
grow with |μ|/√var at most.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from e2egen.runner.bound import (BoundModel, CommonValueSum, ComputeRoundings, ComputeSubnormalRounding, DrawnSum, accumulation_term, summand_quantum, ErrorBound, ExactWhere, OutputRounding,
                                 PositiveSumCoefficient, ProductSumCoefficient, ScaledMagnitude, SquaredBound,
                                 SumOfBounds)
from e2egen.runner.ops.reductions.spec import Reduction
from e2egen.runner.problem import Problem

MEAN_DIVISION_ROUNDINGS = 2  # the division by N; or 1/N rounded, then the product
VAR_ELEMENT_ROUNDINGS = 4  # the centring x - μ (2u on its square), the square, the final division by N - c


def reduction_bound(reduction: Reduction, problem: Problem, x: torch.Tensor) -> ErrorBound:
    """The bound of `reduction` (sum, mean, max, var) of x (float64, logical shape) over the problem's axes."""
    params, dtype = problem.params, problem.dtype
    axes, count = params.axes, params.reduced_size
    output = OutputRounding(problem.out_dtype)
    if reduction == "max":
        exact = torch.ones(params.out_shape, dtype=torch.bool, device=x.device)
        return ExactWhere(exact, SumOfBounds((output,)))
    if reduction == "var":
        return var_bound(problem, x, axes, count, params.divisor, dtype, output)
    drawn = problem.drawn_independently("x")
    if reduction == "sum":
        common = CommonValueSum.over(x, axes, dtype, drawn)
        return SumOfBounds((accumulation_term(x, axes, dtype, drawn, common.count, common.absolute_sum), common, output))
    if reduction == "mean":
        common = CommonValueSum.over(x, axes, dtype, drawn, scale=1 / count)
        return SumOfBounds((
            accumulation_term(x, axes, dtype, drawn, common.count, common.absolute_sum, scale=1 / count),
            common,
            ScaledMagnitude(ComputeRoundings(MEAN_DIVISION_ROUNDINGS, dtype), common.signed_sum / count, "division by N"),
            output,
        ))
    raise ValueError(f"unknown reduction {reduction!r}")


def backward_bound(reduction: Reduction, problem: Problem, grad_y: torch.Tensor, x: torch.Tensor) -> ErrorBound:
    """The bound of grad_x for sum, mean and max (grad_y, x float64, logical shapes): sum's is a copy (exact),
    mean's one division by N (or a product with 1/N rounded), max's a copy at a unique maximum and a division
    among tied ones (exact elsewhere: 0)."""
    params, dtype = problem.params, problem.dtype
    output = OutputRounding(problem.out_dtype)
    kept = grad_y.reshape([1 if dim in params.axes else size for dim, size in enumerate(params.shape)])
    if reduction == "sum":
        return ExactWhere(torch.ones(params.shape, dtype=torch.bool, device=x.device), SumOfBounds((output,)))
    if reduction == "mean":
        share = kept.abs().div(params.reduced_size).expand(params.shape)
        return SumOfBounds((ScaledMagnitude(ComputeRoundings(MEAN_DIVISION_ROUNDINGS, dtype), share, "division by N"),
                            output))
    if reduction == "max":
        maxima = x == x.amax(dim=params.axes, keepdim=True)
        count = maxima.sum(dim=params.axes, keepdim=True)
        tied = maxima & (count > 1)
        share = torch.where(tied, kept.abs() / count, 0.0)
        return ExactWhere(~tied, SumOfBounds((
            ScaledMagnitude(ComputeRoundings(MEAN_DIVISION_ROUNDINGS, dtype), share, "division among tied maxima"),
            output)))
    if reduction == "var":
        return var_backward_bound(problem, kept, x)
    raise ValueError(f"{reduction} has no backward")


@dataclass(frozen=True, eq=False)
class SpreadOverReduced:
    """A per-output bound (the mean's), each output's spread over the elements it reduced, times `factor` there."""

    bound: ErrorBound
    factor: torch.Tensor  # x's shape
    kept_shape: tuple[int, ...]  # the output's shape with the reduced dims kept as 1

    def evaluate(self, model: BoundModel, ref: torch.Tensor | None = None) -> torch.Tensor:
        return self.bound.evaluate(model, None).reshape(self.kept_shape) * self.factor


def var_backward_bound(problem: Problem, kept: torch.Tensor, x: torch.Tensor) -> SumOfBounds:
    """grad_x = g·2(x - μ)/(N - c), g the element's grad_y (`kept`: grad_y with the reduced dims kept as 1):
    |δ| <= s·δμ + 4u·s·|x - μ| + c_out·ulp_T(out), s = 2|g|/(N - c): the mean's error (its own bound, as the
    forward's), the subtraction, and the scale's rounding and the two products."""
    params, axes, dtype = problem.params, problem.params.axes, problem.dtype
    scale = kept.abs().mul(2 / params.divisor).expand(params.shape)
    deviations = (x - x.mean(dim=axes, keepdim=True)).abs_()
    mean_error = SumOfBounds(_var_mean_error(problem, x, axes, params.reduced_size, dtype))
    return SumOfBounds((
        SpreadOverReduced(mean_error, scale, tuple(kept.shape)),
        ScaledMagnitude(ComputeRoundings(4, dtype), scale * deviations, "x - μ, the scale 2/(N - c) and its products"),
        OutputRounding(problem.out_dtype),
    ))


@dataclass(frozen=True, eq=False)
class Reversed:
    """A bound computed on rows reversed along `axis` (a suffix scan as a prefix scan), evaluated on the
    reference in its own order."""

    bound: ErrorBound
    axis: int

    def evaluate(self, model: BoundModel, ref: torch.Tensor) -> torch.Tensor:
        return self.bound.evaluate(model, ref.flip(self.axis)).flip(self.axis)


def cumsum_backward_bound(problem: Problem, grad_y: torch.Tensor) -> ErrorBound:
    """grad_x's bound: every suffix sum of grad_y is a prefix sum of the reversed rows."""
    axis = problem.params.axis
    return Reversed(cumsum_bound(problem, grad_y.flip(axis), "grad_y"), axis)


def cumsum_bound(problem: Problem, x: torch.Tensor, name: str = "x") -> ErrorBound:
    """The bound of every prefix sum of x (float64, logical shape, the input `name`) along the problem's axis."""
    params, axis = problem.params, problem.params.axis
    prefix_magnitudes = x.abs().cumsum(dim=axis)
    counts = torch.arange(1, params.length + 1, dtype=x.dtype, device=x.device)
    counts = counts.reshape([-1 if dim == axis % x.dim() else 1 for dim in range(x.dim())])
    spread = None
    if problem.drawn_independently(name):
        spread = torch.cummax(x, dim=axis).values - torch.cummin(x, dim=axis).values
    prefix_sums = x.cumsum(dim=axis)
    accumulation = (DrawnSum.prefixes(x, axis, problem.dtype, counts, prefix_sums, prefix_magnitudes) if spread is not None
                    else ScaledMagnitude(ProductSumCoefficient(params.length, problem.dtype), prefix_magnitudes, "prefix sum"))
    return SumOfBounds((accumulation,
                        CommonValueSum(counts, problem.dtype, prefix_sums.abs_(), prefix_magnitudes, spread,
                                       quantum=summand_quantum(x, prefix_magnitudes, axis, prefix=True)),
                        OutputRounding(problem.out_dtype)))


def _var_mean_error(problem: Problem, x: torch.Tensor, axes: tuple[int, ...], count: int,
                    dtype: str) -> tuple[ErrorBound, ...]:
    """The bound of var's mean, per output, without an output rounding: the sum's accumulation and common value,
    then the division by N (on m = Σ|x|/N). The forward squares it; the backward spreads it over its group."""
    drawn = problem.drawn_independently("x")
    common = CommonValueSum.over(x, axes, dtype, drawn, scale=1 / count)
    return (accumulation_term(x, axes, dtype, drawn, common.count, common.absolute_sum, scale=1 / count), common,
            ScaledMagnitude(ComputeRoundings(MEAN_DIVISION_ROUNDINGS, dtype), common.absolute_sum / count, "division by N"))


def var_bound(problem: Problem, x: torch.Tensor, axes: tuple[int, ...], count: int, divisor: int, dtype: str,
              output: OutputRounding) -> SumOfBounds:
    """var = Σ(x - μ)² / divisor over `axes` (count elements each): the bound of docs/concepts/reduction-bound.md."""
    mean = x.mean(dim=axes, keepdim=True)
    deviations = x - mean
    variance = deviations.square().sum(dim=axes) / divisor
    largest_deviation = deviations.abs().amax(dim=axes)  # D
    mean_error = SquaredBound(_var_mean_error(problem, x, axes, count, dtype),  # the mean's own bound, squared
                              count / divisor, "mean's error (second order)")
    running_means = ((mean.abs().reshape(largest_deviation.shape) + largest_deviation).mul_(largest_deviation)
                     .mul_((count + 1) / divisor))
    return SumOfBounds((
        ScaledMagnitude(PositiveSumCoefficient(count, dtype), variance, "sum of squares"),
        ScaledMagnitude(ComputeRoundings(VAR_ELEMENT_ROUNDINGS, dtype), variance, "centring, squares, division"),
        mean_error,
        ScaledMagnitude(PositiveSumCoefficient(count, dtype, per_step=2), running_means, "running means (updates)"),
        ScaledMagnitude(ComputeSubnormalRounding(dtype), torch.full_like(variance, count / divisor + 1),
                        "underflowing squares"),
        output,
    ))
