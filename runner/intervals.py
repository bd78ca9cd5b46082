"""Acceptance intervals for element-wise math, as the WebGPU CTS primer defines them (shared/seeds/001).

An `Interval` holds, per element, every value a correct kernel may produce: lo <= hi, float64 tensors.
A primitive maps intervals to intervals: the exact function's image of the argument interval (the
ends for a monotone function; the four corner products or quotients for mul and div), each end moved
out by the primitive's allowance at that end, then rounded outward to the format the kernel computes
in (every value that format can hold inside or just around the interval). A function defined through
others inherits its accuracy: sigmoid is 1 / (1 + exp(-x)), evaluated primitive by primitive on
intervals, so its interval holds every result of a kernel whose steps are each within their
allowance. The last step rounds the compute format's interval outward to the output format.

float64 evaluates each exact function; its own error (a few float64 ulps) is covered by moving every
end out by F64_SLACK relative.

Allowances live in one table, ALLOWANCES: primitive -> compute format -> Allowance. The figures are
the CTS's where it has them (exp, log, division, inverse square root; sqrt inherits from 1 / rsqrt
and pow from exp(y·log x), as there); log1p, which the CTS leaves out, 3 ulps relative everywhere (near 0
too: the reason to call it instead of log(1 + x)); tanh, which the CTS leaves out, gets twice the maximum error
CUDA's math library documents for tanhf (2 ulp); erf 2 ulps plus an absolute 2^-20
(16 ulps of 1: torch's own vectorised f32 erf needs 2^-21 near -1). add, sub and mul are correctly
rounded. A catalogue overrides them with `bound.ulps` / `bound.abs_error` (every inexact primitive).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch

from e2egen import metrics
from e2egen.metrics.formats import float_format
from e2egen.metrics.rounding import pattern_value, rounded_pattern, split_float64

from e2egen.runner.interval_passes import fused_monotone, fused_outward, fused_product, fused_quotient, fused_sum, fused_width

F64_SLACK = 2.0 ** -50  # relative: float64's own libm error (a few ulps of 2^-52)
COMPUTE_FORMATS = ("f32", "f16", "bf16")


@dataclass(frozen=True)
class Allowance:
    """How far a primitive's result may be from the exact one: (ulps + ulps_per_abs_x·|x|) ulps of the
    compute format at the exact result, plus `absolute`; inside `absolute_inside` = [a, b] of the
    argument, `absolute` replaces the ulps (the CTS's log near 1)."""

    ulps: float = 0.0
    ulps_per_abs_x: float = 0.0
    absolute: float = 0.0
    absolute_inside: tuple[float, float] | None = None

    def width(self, x: torch.Tensor, y: torch.Tensor, fmt: str) -> torch.Tensor:
        fused = fused_width(self, x, y, fmt)  # the same values in one numba pass, where it applies
        if fused is not None:
            return fused
        ulp_part = (self.ulps + self.ulps_per_abs_x * x.abs()) * _ulp(y, fmt)
        if self.absolute_inside is None:
            return ulp_part + self.absolute
        a, b = self.absolute_inside
        return torch.where((x >= a) & (x <= b), torch.full_like(ulp_part, self.absolute), ulp_part)

    @property
    def exact(self) -> bool:
        return self == CORRECTLY_ROUNDED


CORRECTLY_ROUNDED = Allowance()


def _per_format(f32: Allowance, f16: Allowance, bf16: Allowance | None = None) -> Mapping[str, Allowance]:
    return {"f32": f32, "f16": f16, "bf16": bf16 or f16}


ALLOWANCES: Mapping[str, Mapping[str, Allowance]] = {
    "exp": _per_format(Allowance(3, 2), Allowance(1, 2)),
    # log: absolute 2^-21 (f32) / 2^-7 (f16) inside [0.5, 2]; bf16 keeps f16's 8 ulps of 1 there (2^-4)
    "log": _per_format(Allowance(3, absolute=2.0 ** -21, absolute_inside=(0.5, 2.0)),
                       Allowance(3, absolute=2.0 ** -7, absolute_inside=(0.5, 2.0)),
                       Allowance(3, absolute=2.0 ** -4, absolute_inside=(0.5, 2.0))),
    # log1p: relative everywhere, near 0 too (what tells it from log(1 + x)); libm's log1pf is within 1-2 ulps
    "log1p": _per_format(Allowance(3), Allowance(3)),
    "div": _per_format(Allowance(2.5), Allowance(2.5)),
    "rsqrt": _per_format(Allowance(2), Allowance(2)),
    "tanh": _per_format(Allowance(4), Allowance(2)),
    # erf's values lie in [-1, 1], so an absolute part, as the CTS gives sin and cos: torch's vectorised
    # f32 erf (in its gelu) is off by up to 2^-21 where erf is near -1 (gelu at x in [-4, -2.5])
    "erf": _per_format(Allowance(2, absolute=2.0 ** -20), Allowance(2, absolute=2.0 ** -10)),
}


@dataclass(frozen=True)
class IntervalContext:
    """The format the kernel computes in and any catalogue override of the allowances."""

    compute: str = "f32"
    ulps: float | None = None
    abs_error: float | None = None

    def allowance(self, primitive: str) -> Allowance:
        table = ALLOWANCES[primitive][self.compute]
        if self.ulps is None and self.abs_error is None:
            return table
        return Allowance(ulps=table.ulps if self.ulps is None else self.ulps,
                         ulps_per_abs_x=table.ulps_per_abs_x if self.ulps is None else 0.0,
                         absolute=table.absolute if self.abs_error is None else self.abs_error,
                         absolute_inside=table.absolute_inside if self.abs_error is None else None)


@dataclass(frozen=True)
class Interval:
    lo: torch.Tensor
    hi: torch.Tensor = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.hi is None:
            object.__setattr__(self, "hi", self.lo)

    @classmethod
    def point(cls, values: torch.Tensor) -> "Interval":
        return cls(values, values)


# -- rounding outward ---------------------------------------------------------------------------
def _ulp(y: torch.Tensor, fmt: str) -> torch.Tensor:
    return metrics.ulp(torch.nan_to_num(y, posinf=math.inf, neginf=-math.inf), fmt)


def _magnitude_rounded(magnitude: torch.Tensor, fmt: str, up: bool) -> torch.Tensor:
    """|x| rounded down or up to the format (float64); beyond max: max when down, inf when up."""
    spec = float_format(fmt)
    _, biased, mantissa = split_float64(magnitude)
    pattern = rounded_pattern(biased, mantissa, spec)
    value = pattern_value(pattern.clamp(max=spec.max_pattern), spec)
    beyond = pattern > spec.max_pattern
    if up:
        step = (~beyond) & (value < magnitude)
        pattern = pattern + step.to(pattern.dtype)
        over = pattern > spec.max_pattern
        result = pattern_value(pattern.clamp(max=spec.max_pattern), spec)
        return torch.where(over | beyond | torch.isinf(magnitude), torch.full_like(result, math.inf), result)
    step = beyond | (value > magnitude)
    pattern = (pattern - step.to(pattern.dtype)).clamp(max=spec.max_pattern)
    result = pattern_value(pattern, spec)
    return torch.where(torch.isinf(magnitude), torch.full_like(result, spec.max), result)


def round_down(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """The largest value of the format <= x (float64 in and out; -inf below -max, max for +inf; NaN stays;
    +0 for zeros)."""
    if fmt not in COMPUTE_FORMATS:  # IEEE formats with infinities, torch's casts round to nearest
        return _round_down_by_pattern(x, fmt)
    narrow = float_format(fmt).torch_dtype
    # torch's cast may round twice on the way (float64 -> f32 -> f16), yet each rounding is monotone, so
    # the cast is one of the two format values around x; one step down where it is the upper one.
    cast = x.to(narrow)
    above = cast.to(torch.float64) > x
    cast = torch.where(above, torch.nextafter(cast, torch.full_like(cast, -math.inf)), cast)
    result = cast.to(torch.float64).masked_fill_(x == math.inf, float_format(fmt).max)
    return result.add_(0.0)  # -0 + 0 is +0: one zero, as the pattern path gives


def _round_down_by_pattern(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """round_down for any format metrics knows, from its bit patterns (formats torch has no dtype for)."""
    negative = x < 0
    magnitude = x.abs()
    result = torch.where(negative, -_magnitude_rounded(magnitude, fmt, up=True), _magnitude_rounded(magnitude, fmt, up=False))
    return torch.where(torch.isnan(x), x, result)


def round_up(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """The smallest value of the format >= x."""
    return -round_down(-x, fmt)


def outward(lo: torch.Tensor, hi: torch.Tensor, fmt: str) -> Interval:
    fused = fused_outward(lo, hi, fmt)  # the same values in one numba pass, where it applies
    return Interval(*fused) if fused is not None else Interval(round_down(lo, fmt), round_up(hi, fmt))


def _slack(values: torch.Tensor) -> torch.Tensor:
    return values.abs() * F64_SLACK


# -- primitives -----------------------------------------------------------------------------------
def monotone(arg: Interval, function: Callable[[torch.Tensor], torch.Tensor], primitive: str,
             context: IntervalContext) -> Interval:
    """A monotone primitive (increasing or decreasing) on an interval, with its allowance at both ends."""
    at_lo = function(arg.lo)
    at_hi = at_lo if arg.hi is arg.lo else function(arg.hi)  # a point (an input): one evaluation
    allowance = context.allowance(primitive)
    fused = fused_monotone(arg.lo, arg.hi, at_lo, at_hi, allowance, F64_SLACK, context.compute)  # the same, one pass
    if fused is not None:
        return Interval(*fused)
    increasing = at_lo <= at_hi
    low_x, high_x = torch.where(increasing, arg.lo, arg.hi), torch.where(increasing, arg.hi, arg.lo)
    low, high = torch.minimum(at_lo, at_hi), torch.maximum(at_lo, at_hi)
    low = low - allowance.width(low_x, low, context.compute) - _slack(low)
    high = high + allowance.width(high_x, high, context.compute) + _slack(high)
    return outward(low, high, context.compute)


def add(a: Interval, b: Interval, context: IntervalContext) -> Interval:
    fused = fused_sum(a.lo, a.hi, b.lo, b.hi, F64_SLACK, context.compute)  # the same in one numba pass
    if fused is not None:
        return Interval(*fused)
    low, high = a.lo + b.lo, a.hi + b.hi
    return outward(low - _slack(low), high + _slack(high), context.compute)


def negate(a: Interval) -> Interval:
    return Interval(-a.hi, -a.lo)


def mul(a: Interval, b: Interval, context: IntervalContext) -> Interval:
    fused = fused_product(a.lo, a.hi, b.lo, b.hi, F64_SLACK, context.compute)  # the same in one numba pass
    if fused is not None:
        return Interval(*fused)
    corners = torch.stack([a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi])
    corners = torch.nan_to_num(corners, nan=0.0, posinf=math.inf, neginf=-math.inf)  # 0·inf: the 0 end
    low, high = corners.amin(0), corners.amax(0)
    return outward(low - _slack(low), high + _slack(high), context.compute)


def div(a: Interval, b: Interval, context: IntervalContext) -> Interval:
    """a / b with the division's allowance; any value when b's interval holds 0."""
    allowance = context.allowance("div")
    fused = fused_quotient(a.lo, a.hi, b.lo, b.hi, allowance, F64_SLACK, context.compute)  # the same in one pass
    if fused is not None:
        return Interval(*fused)
    corners = torch.stack([a.lo / b.lo, a.lo / b.hi, a.hi / b.lo, a.hi / b.hi])
    low, high = corners.amin(0), corners.amax(0)
    low = low - allowance.width(torch.zeros_like(low), low, context.compute) - _slack(low)
    high = high + allowance.width(torch.zeros_like(high), high, context.compute) + _slack(high)
    spans_zero = (b.lo <= 0) & (b.hi >= 0)
    low = torch.where(spans_zero, torch.full_like(low, -math.inf), low)
    high = torch.where(spans_zero, torch.full_like(high, math.inf), high)
    return outward(low, high, context.compute)


def constant(value: float, like: torch.Tensor, context: IntervalContext) -> Interval:
    """A constant as the kernel holds it: value rounded to the compute format, either neighbour."""
    exact = torch.tensor(value, dtype=torch.float64, device=like.device)
    held = outward(exact, exact, context.compute)  # rounded once, then seen at every element
    return Interval(held.lo.expand_as(like), held.hi.expand_as(like))


def exp(a: Interval, context: IntervalContext) -> Interval:
    return monotone(a, torch.exp, "exp", context)


def log(a: Interval, context: IntervalContext) -> Interval:
    return monotone(a, torch.log, "log", context)


def log1p(a: Interval, context: IntervalContext) -> Interval:
    return monotone(a, torch.log1p, "log1p", context)


def tanh(a: Interval, context: IntervalContext) -> Interval:
    return monotone(a, torch.tanh, "tanh", context)


def erf(a: Interval, context: IntervalContext) -> Interval:
    return monotone(a, torch.erf, "erf", context)


def rsqrt(a: Interval, context: IntervalContext) -> Interval:
    return monotone(a, torch.rsqrt, "rsqrt", context)


def relu(a: Interval, context: IntervalContext) -> Interval:
    """max(x, 0): exact (the ends are values of the compute format already)."""
    return Interval(a.lo.clamp(min=0), a.hi.clamp(min=0))


def to_output(interval: Interval, out_format: str) -> Interval:
    """The last rounding, compute format -> output format: every output value inside or around."""
    return outward(interval.lo, interval.hi, out_format)
