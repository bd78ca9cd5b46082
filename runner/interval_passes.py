"""The element-wise steps of the interval primitives (runner/intervals.py), each in one numba pass.

In torch's ops each costs a dozen passes over the elements, and together they were most of an
element-wise bound's time (benchmarks/bench_intervals.py times both):

* fused_outward: an interval's ends rounded outward to a format, the largest value <= lo and the
  smallest >= hi (torch's casts: cast, widen, compare, step, select, the +inf and zero fix-ups, per end).
  From the float64 bits: the magnitude truncated to the format's pattern (the shifted-out bits say
  whether it was exact), one pattern further from zero where a negative value was inexact, then the
  pattern's value. IEEE formats with infinities only (f32, tf32, f16, bf16, f8e5m2). f32, the format
  kernels compute in, takes the hardware's cast instead, stepped down where it rounded up (a third of
  the operations).
* fused_product and fused_sum: intervals.mul and intervals.add whole (the four corner products with
  0·inf as 0, or the sums of the ends; the float64 slack; then the outward rounding above), up to a
  dozen torch passes and their temporaries in one pass.
* fused_quotient and fused_monotone: intervals.div and intervals.monotone after the function's values
  (the corner quotients, or the lesser and greater value with the argument that gave each), each end
  moved out by the primitive's allowance and the slack, then rounded outward: the allowance widths,
  selections and sums of about fifteen torch passes in one.
* fused_width: an allowance's width at each end, (ulps + ulps_per_abs_x·|x|)·ulp_T(y) + absolute, or
  the absolute part alone where x lies inside absolute_inside (metrics.ulp's bit fields, clamps, power
  of two and NaN select, then the products).
* fused_output_side: interval_bound's bound for an output, the side of the interval the output fell on.

Each returns None where it does not apply (no numba, another device, E2E_METRICS_BACKEND=torch, a
layout or format they do not cover), and intervals.py then runs its torch definitions, which these
equal bit for bit, zeros' signs and the ends past the largest value included; a NaN stays a NaN (its
payload and sign are torch's cast's there, and nothing reads them) (tests/runner/test_interval_passes.py):
round_down gives the format's max for +inf and past it, -inf below -max; round_up is -round_down(-x),
so -0.0 for a zero.
"""
from __future__ import annotations

import math

import torch

from e2egen.metrics import numba_kernels, threads
from e2egen.metrics.backend import numba_path
from e2egen.metrics.formats import Format, float_format
from e2egen.metrics.rounding import ulp_emax

__all__ = ["fused_monotone", "fused_output_side", "fused_outward", "fused_product", "fused_quotient", "fused_sum",
           "fused_width"]


if numba_kernels.AVAILABLE:
    import numba
    import numpy as np

    from e2egen.metrics.numba_kernels import (
        align_stack as _align_stack, as_int64 as _bits, as_int32 as _bits32,
        as_float64 as _float, as_float32 as _float32)

    @numba.njit(inline="always", error_model="numpy")
    def _round_down_f32(x, largest):
        """_round_down for f32 by the hardware's cast, as intervals.round_down does it in torch: the cast is
        one of the two f32 values around x (round to nearest), one step down where it is the upper one."""
        cast = np.float32(x)
        word = _bits32(cast)
        # the next value down: a smaller pattern above zero, a larger one below (-0 steps to -min_subnormal);
        # a cast of +0 is never above x, since a negative x casts to -0 or below
        below = _float32(np.int32(word - 1) if word > 0 else np.int32(word + 1))
        return (largest if x == np.inf else np.float64(below if np.float64(cast) > x else cast)) + 0.0

    @numba.njit(inline="always", error_model="numpy")
    def _round_down(x, m, emin, bias, max_pattern, largest):
        """The largest value of the format <= x (NaN stays; +inf and past max: max; below -max: -inf; +0 for 0)."""
        if m == 23 and emin == -126:  # f32 (and tf32, held as f32's values): the hardware's cast, fewer operations
            return _round_down_f32(x, largest)
        word = _bits(x)
        negative = word < 0
        magnitude = word & ((1 << 63) - 1)
        biased = magnitude >> 52
        exponent = max(biased, 1) - 1023
        significand = (magnitude & ((1 << 52) - 1)) | (np.int64(biased > 0) << 52)
        shift = min(52 - m + max(emin - exponent, 0), 63)  # below the format's subnormals every bit goes
        inexact = (significand & ((np.int64(1) << shift) - 1)) != 0
        pattern = (max(exponent - emin, 0) << m) + (significand >> shift) + np.int64(negative & inexact)
        field = min(pattern, max_pattern)  # decoded as fused_numba._measure decodes out's bits
        exponent_field = field >> m
        value = np.float64((field & ((1 << m) - 1)) | (min(exponent_field, 1) << m)) * _float(
            (max(exponent_field, 1) - bias - m + 1023) << 52)
        value = (np.inf if negative else largest) if pattern > max_pattern else value
        value = -value if negative else value
        return (x if x != x else value) + 0.0  # NaN stays NaN; -0 + 0 is +0

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _outward(lo, hi, out_lo, out_hi, start, stop, m, emin, bias, max_pattern, largest):
        _align_stack()
        lo_c, hi_c, out_lo_c, out_hi_c = lo[start:stop], hi[start:stop], out_lo[start:stop], out_hi[start:stop]
        for i in range(stop - start):  # slices from 0: see fused_numba._reduce_chunk
            out_lo_c[i] = _round_down(lo_c[i], m, emin, bias, max_pattern, largest)
            out_hi_c[i] = -_round_down(-hi_c[i], m, emin, bias, max_pattern, largest)

    @numba.njit(inline="always", error_model="numpy")
    def _widened_outward(low, high, slack, m, emin, bias, max_pattern, largest):
        """intervals.py's outward(low - _slack(low), high + _slack(high)): each end moved out by
        |end|·slack, then rounded outward as _outward rounds."""
        return (_round_down(low - abs(low) * slack, m, emin, bias, max_pattern, largest),
                -_round_down(-(high + abs(high) * slack), m, emin, bias, max_pattern, largest))

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _sum(a_lo, a_hi, b_lo, b_hi, out_lo, out_hi, start, stop, slack, m, emin, bias, max_pattern, largest):
        """intervals.add's ends: the sums of the ends, widened and rounded outward (_widened_outward)."""
        _align_stack()
        a_lo_c, a_hi_c, b_lo_c, b_hi_c = a_lo[start:stop], a_hi[start:stop], b_lo[start:stop], b_hi[start:stop]
        out_lo_c, out_hi_c = out_lo[start:stop], out_hi[start:stop]
        for i in range(stop - start):
            out_lo_c[i], out_hi_c[i] = _widened_outward(a_lo_c[i] + b_lo_c[i], a_hi_c[i] + b_hi_c[i], slack, m, emin,
                                                        bias, max_pattern, largest)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _product(a_lo, a_hi, b_lo, b_hi, out_lo, out_hi, start, stop, slack, m, emin, bias, max_pattern, largest):
        """intervals.mul's ends: the least and greatest of the four corner products (a NaN corner, 0·inf,
        read as 0), widened and rounded outward (_widened_outward)."""
        _align_stack()
        a_lo_c, a_hi_c, b_lo_c, b_hi_c = a_lo[start:stop], a_hi[start:stop], b_lo[start:stop], b_hi[start:stop]
        out_lo_c, out_hi_c = out_lo[start:stop], out_hi[start:stop]
        for i in range(stop - start):
            corner_1, corner_2 = a_lo_c[i] * b_lo_c[i], a_lo_c[i] * b_hi_c[i]
            corner_3, corner_4 = a_hi_c[i] * b_lo_c[i], a_hi_c[i] * b_hi_c[i]
            corner_1 = corner_1 if corner_1 == corner_1 else 0.0
            corner_2 = corner_2 if corner_2 == corner_2 else 0.0
            corner_3 = corner_3 if corner_3 == corner_3 else 0.0
            corner_4 = corner_4 if corner_4 == corner_4 else 0.0
            low = min(min(corner_1, corner_2), min(corner_3, corner_4))
            high = max(max(corner_1, corner_2), max(corner_3, corner_4))
            # a zero's sign may differ from torch's amin/amax here; _round_down makes every zero +0 (and
            # the upper end -0) either way
            out_lo_c[i], out_hi_c[i] = _widened_outward(low, high, slack, m, emin, bias, max_pattern, largest)

    @numba.njit(inline="always", error_model="numpy")
    def _allowance_width(x, y, ulps, per_abs_x, absolute, added, inside_lo, inside_hi, m, emin, emax):
        """Allowance.width at one element: (ulps + per_abs_x·|x|)·ulp_T(y) + added, or absolute where
        inside_lo <= x <= inside_hi (an empty range: never); the roundings in the torch ops' order; ulp as
        metrics.ulp (rounding.ulp_exponent) of y with NaN read as 0."""
        magnitude = _bits(y if y == y else 0.0) & ((1 << 63) - 1)
        biased = magnitude >> 52
        power_of_two = ((magnitude & ((1 << 52) - 1)) == 0) & (biased > 0)
        exponent = min(max(max(biased, 1) - 1023 - np.int64(power_of_two), emin), emax)
        gap = _float((exponent - m + 1023) << 52)
        ulp_part = (ulps + per_abs_x * abs(x)) * gap
        return absolute if inside_lo <= x <= inside_hi else ulp_part + added

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _width(x, y, out, start, stop, ulps, per_abs_x, absolute, added, inside_lo, inside_hi, m, emin, emax):
        _align_stack()
        x_c, y_c, out_c = x[start:stop], y[start:stop], out[start:stop]
        for i in range(stop - start):
            out_c[i] = _allowance_width(x_c[i], y_c[i], ulps, per_abs_x, absolute, added, inside_lo, inside_hi, m,
                                        emin, emax)

    @numba.njit(inline="always", error_model="numpy")
    def _allowed_outward(low, high, low_x, high_x, slack, ulps, per_abs_x, absolute, added, inside_lo, inside_hi, m,
                         emin, emax, bias, max_pattern, largest):
        """intervals.py's ends of an inexact primitive: low - width(low_x, low) - |low|·slack and
        high + width(high_x, high) + |high|·slack, in that order, then rounded outward."""
        low_width = _allowance_width(low_x, low, ulps, per_abs_x, absolute, added, inside_lo, inside_hi, m, emin,
                                     emax)
        high_width = _allowance_width(high_x, high, ulps, per_abs_x, absolute, added, inside_lo, inside_hi, m, emin,
                                      emax)
        return (_round_down((low - low_width) - abs(low) * slack, m, emin, bias, max_pattern, largest),
                -_round_down(-((high + high_width) + abs(high) * slack), m, emin, bias, max_pattern, largest))

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _monotone(lo, hi, at_lo, at_hi, out_lo, out_hi, start, stop, slack, ulps, per_abs_x, absolute, added,
                  inside_lo, inside_hi, m, emin, emax, bias, max_pattern, largest):
        """intervals.monotone's ends from the function's values at both ends: the lesser value and its
        argument below, the greater above (NaN if either value is), moved out by the allowance and the
        slack and rounded outward (_allowed_outward). Where the values are equal either may be taken: they
        differ at most in a zero's sign, which the allowance ignores and the rounding drops."""
        _align_stack()
        lo_c, hi_c, at_lo_c, at_hi_c = lo[start:stop], hi[start:stop], at_lo[start:stop], at_hi[start:stop]
        out_lo_c, out_hi_c = out_lo[start:stop], out_hi[start:stop]
        for i in range(stop - start):
            a, b = at_lo_c[i], at_hi_c[i]
            # both ends loaded, then chosen: a load under a condition (lo_c[i] if ... else hi_c[i]) is
            # vectorised as a gather, slower than the two loads
            x_lo, x_hi = lo_c[i], hi_c[i]
            increasing = a <= b
            either_nan = (a != a) | (b != b)
            low = np.nan if either_nan else (a if increasing else b)
            high = np.nan if either_nan else (b if increasing else a)
            out_lo_c[i], out_hi_c[i] = _allowed_outward(
                low, high, x_lo if increasing else x_hi, x_hi if increasing else x_lo, slack, ulps,
                per_abs_x, absolute, added, inside_lo, inside_hi, m, emin, emax, bias, max_pattern, largest)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _quotient(a_lo, a_hi, b_lo, b_hi, out_lo, out_hi, start, stop, slack, ulps, per_abs_x, absolute, added,
                  inside_lo, inside_hi, m, emin, emax, bias, max_pattern, largest):
        """intervals.div's ends: the least and greatest of the four corner quotients (NaN if any is),
        moved out by the division's allowance (at x = 0) and the slack and rounded outward; any value
        (-inf, inf before the rounding) where b's interval holds 0."""
        _align_stack()
        a_lo_c, a_hi_c, b_lo_c, b_hi_c = a_lo[start:stop], a_hi[start:stop], b_lo[start:stop], b_hi[start:stop]
        out_lo_c, out_hi_c = out_lo[start:stop], out_hi[start:stop]
        for i in range(stop - start):
            corner_1, corner_2 = a_lo_c[i] / b_lo_c[i], a_lo_c[i] / b_hi_c[i]
            corner_3, corner_4 = a_hi_c[i] / b_lo_c[i], a_hi_c[i] / b_hi_c[i]
            any_nan = (corner_1 != corner_1) | (corner_2 != corner_2) | (corner_3 != corner_3) | (corner_4 != corner_4)
            low = np.nan if any_nan else min(min(corner_1, corner_2), min(corner_3, corner_4))
            high = np.nan if any_nan else max(max(corner_1, corner_2), max(corner_3, corner_4))
            if (b_lo_c[i] <= 0.0) & (b_hi_c[i] >= 0.0):
                low, high = -np.inf, np.inf
            out_lo_c[i], out_hi_c[i] = _allowed_outward(low, high, 0.0, 0.0, slack, ulps, per_abs_x, absolute, added,
                                                        inside_lo, inside_hi, m, emin, emax, bias, max_pattern,
                                                        largest)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _output_side(lo, hi, ref, out, bound, start, stop):
        """interval_bound's bound for the output: hi - ref where out >= ref, else ref - lo, each clamped at 0
        as torch's clamp_(min=0) does (NaN and -0 stay), 0 where ref is NaN or infinite."""
        _align_stack()
        lo_c, hi_c, ref_c, out_c, bound_c = lo[start:stop], hi[start:stop], ref[start:stop], out[start:stop], \
            bound[start:stop]
        for i in range(stop - start):
            r = ref_c[i]
            below = r - lo_c[i]
            above = hi_c[i] - r
            below = 0.0 if below < 0.0 else below
            above = 0.0 if above < 0.0 else above
            side = above if out_c[i] >= r else below
            bound_c[i] = 0.0 if r != r or r == np.inf or r == -np.inf else side


def _on_cpu(*tensors: torch.Tensor) -> bool:
    return (all(t.shape == tensors[0].shape and t.dtype == torch.float64 and t.is_contiguous() for t in tensors)
            and all(t.device == tensors[0].device for t in tensors) and numba_path(tensors[0].device))


def fused_outward(lo: torch.Tensor, hi: torch.Tensor, fmt_name: str) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(round_down(lo), round_up(hi)) to the format in one numba pass, or None where this path does not apply."""
    fmt = float_format(fmt_name)
    if not (fmt.encoding == "ieee" and fmt.has_inf and _on_cpu(lo, hi)):
        return None
    out_lo, out_hi = torch.empty_like(lo), torch.empty_like(hi)
    flat_lo, flat_hi = lo.view(-1).numpy(), hi.view(-1).numpy()
    flat_out_lo, flat_out_hi = out_lo.view(-1).numpy(), out_hi.view(-1).numpy()
    args = (fmt.mantissa_bits, fmt.emin, fmt.bias, fmt.max_pattern, float(fmt.max))
    threads.over_chunks(flat_lo.shape[0], lambda start, stop: _outward(flat_lo, flat_hi, flat_out_lo, flat_out_hi,
                                                                      start, stop, *args))
    return out_lo, out_hi


def fused_product(a_lo: torch.Tensor, a_hi: torch.Tensor, b_lo: torch.Tensor, b_hi: torch.Tensor, slack: float,
                  fmt_name: str) -> tuple[torch.Tensor, torch.Tensor] | None:
    """intervals.mul's (lo, hi) for [a_lo, a_hi]·[b_lo, b_hi] in one numba pass, or None where this path does
    not apply. Ends broadcast from a scalar (intervals.constant) are written out first."""
    fmt = float_format(fmt_name)
    return _ends_pass(_kernel("_product"), (a_lo, a_hi, b_lo, b_hi), (float(slack), fmt.mantissa_bits, fmt.emin), fmt)


def fused_sum(a_lo: torch.Tensor, a_hi: torch.Tensor, b_lo: torch.Tensor, b_hi: torch.Tensor, slack: float,
              fmt_name: str) -> tuple[torch.Tensor, torch.Tensor] | None:
    """intervals.add's (lo, hi) for [a_lo, a_hi] + [b_lo, b_hi], as fused_product."""
    fmt = float_format(fmt_name)
    return _ends_pass(_kernel("_sum"), (a_lo, a_hi, b_lo, b_hi), (float(slack), fmt.mantissa_bits, fmt.emin), fmt)


def fused_quotient(a_lo: torch.Tensor, a_hi: torch.Tensor, b_lo: torch.Tensor, b_hi: torch.Tensor, allowance,
                   slack: float, fmt_name: str) -> tuple[torch.Tensor, torch.Tensor] | None:
    """intervals.div's (lo, hi) for [a_lo, a_hi] / [b_lo, b_hi] with the division's allowance, as fused_product."""
    fmt = float_format(fmt_name)
    return _ends_pass(_kernel("_quotient"), (a_lo, a_hi, b_lo, b_hi), (float(slack), *_allowance_args(allowance, fmt)),
                      fmt)


def fused_monotone(lo: torch.Tensor, hi: torch.Tensor, at_lo: torch.Tensor, at_hi: torch.Tensor, allowance,
                   slack: float, fmt_name: str) -> tuple[torch.Tensor, torch.Tensor] | None:
    """intervals.monotone's (lo, hi) from a monotone function's values at_lo, at_hi at the argument's ends lo,
    hi, with the primitive's allowance, in one numba pass; None where this path does not apply."""
    fmt = float_format(fmt_name)
    return _ends_pass(_kernel("_monotone"), (lo, hi, at_lo, at_hi), (float(slack), *_allowance_args(allowance, fmt)), fmt)


def _kernel(name: str):
    """The numba kernel of that name, or None without numba."""
    return globals()[name] if numba_kernels.AVAILABLE else None


def _ends_pass(kernel, ends, args: tuple, fmt: Format) -> tuple[torch.Tensor, torch.Tensor] | None:
    """kernel's (lo, hi) from four end tensors, rounded outward to the format; None where it does not apply.
    args: the kernel's arguments after its range; the format's limits for the rounding follow them."""
    if kernel is None or not (fmt.encoding == "ieee" and fmt.has_inf) or not numba_path(ends[0].device):
        return None  # checked before broadcasting: the torch definitions take the ends as they are
    ends = [t.contiguous() for t in torch.broadcast_tensors(*ends)]
    if not _on_cpu(*ends):
        return None
    out_lo, out_hi = torch.empty_like(ends[0]), torch.empty_like(ends[0])
    flat = [t.view(-1).numpy() for t in (*ends, out_lo, out_hi)]
    args = (*args, fmt.bias, fmt.max_pattern, float(fmt.max))
    threads.over_chunks(flat[0].shape[0], lambda start, stop: kernel(*flat, start, stop, *args))
    return out_lo, out_hi


def _allowance_args(allowance, fmt: Format) -> tuple:
    """Allowance.width's terms as _allowance_width takes them: the absolute part added everywhere, or instead
    of the ulps inside absolute_inside."""
    inside, added = allowance.absolute_inside, 0.0
    if inside is None:
        inside, added = (math.inf, -math.inf), float(allowance.absolute)
    return (float(allowance.ulps), float(allowance.ulps_per_abs_x), float(allowance.absolute), added, float(inside[0]),
            float(inside[1]), fmt.mantissa_bits, fmt.emin, ulp_emax(fmt))


def fused_width(allowance, x: torch.Tensor, y: torch.Tensor, fmt_name: str) -> torch.Tensor | None:
    """intervals.Allowance.width(x, y, fmt) in one numba pass, or None where this path does not apply."""
    if not _on_cpu(x, y):
        return None
    out = torch.empty_like(y)
    flat_x, flat_y, flat_out = x.view(-1).numpy(), y.view(-1).numpy(), out.view(-1).numpy()
    args = _allowance_args(allowance, float_format(fmt_name))
    threads.over_chunks(flat_y.shape[0], lambda start, stop: _width(flat_x, flat_y, flat_out, start, stop, *args))
    return out


def fused_output_side(lo: torch.Tensor, hi: torch.Tensor, ref: torch.Tensor, out: torch.Tensor) -> torch.Tensor | None:
    """interval_bound's bound for an output (out as float64) in one numba pass, or None where it does not apply."""
    if not _on_cpu(lo, hi, ref, out):
        return None
    bound = torch.empty_like(ref)
    flat = [t.view(-1).numpy() for t in (lo, hi, ref, out, bound)]
    threads.over_chunks(flat[0].shape[0], lambda start, stop: _output_side(*flat, start, stop))
    return bound
