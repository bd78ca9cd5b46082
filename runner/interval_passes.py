"""The element-wise steps of the interval primitives (runner/intervals.py), each in one numba pass.

In torch's ops each costs a dozen passes over the elements, and together they were most of an
element-wise bound's time (benchmarks/bench_intervals.py times both):

* fused_outward: an interval's ends rounded outward to a format, the largest value <= lo and the
  smallest >= hi (torch's casts: cast, widen, compare, step, select, the +inf and zero fix-ups, per end).
  From the float64 bits: the magnitude truncated to the format's pattern (the shifted-out bits say
  whether it was exact), one pattern further from zero where a negative value was inexact, then the
  pattern's value. IEEE formats with infinities only (f32, tf32, f16, bf16, f8e5m2).
* fused_product and fused_sum: intervals.mul and intervals.add whole (the four corner products with
  0·inf as 0, or the sums of the ends; the float64 slack; then the outward rounding above), up to a
  dozen torch passes and their temporaries in one pass.
* fused_width: an allowance's width at each end, (ulps + ulps_per_abs_x·|x|)·ulp_T(y) + absolute, or
  the absolute part alone where x lies inside absolute_inside (metrics.ulp's bit fields, clamps, power
  of two and NaN select, then the products).

Both return None where they do not apply (no numba, another device, E2E_METRICS_BACKEND=torch, a
layout or format they do not cover), and intervals.py then runs its torch definitions, which these
equal bit for bit, zeros' signs and the ends past the largest value included; a NaN stays a NaN (its
payload and sign are torch's cast's there, and nothing reads them) (tests/test_interval_passes.py):
round_down gives the format's max for +inf and past it, -inf below -max; round_up is -round_down(-x),
so -0.0 for a zero.
"""
from __future__ import annotations

import math

import torch

from e2egen.metrics import fused_numba, threads
from e2egen.metrics.backend import numba_path
from e2egen.metrics.formats import float_format
from e2egen.metrics.rounding import ulp_emax

__all__ = ["fused_outward", "fused_product", "fused_sum", "fused_width"]


if fused_numba.AVAILABLE:
    import numba
    import numpy as np

    from e2egen.metrics.fused_numba import _bits, _float

    @numba.njit(inline="always", error_model="numpy")
    def _round_down(x, m, emin, bias, max_pattern, largest):
        """The largest value of the format <= x (NaN stays; +inf and past max: max; below -max: -inf; +0 for 0)."""
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
        a_lo_c, a_hi_c, b_lo_c, b_hi_c = a_lo[start:stop], a_hi[start:stop], b_lo[start:stop], b_hi[start:stop]
        out_lo_c, out_hi_c = out_lo[start:stop], out_hi[start:stop]
        for i in range(stop - start):
            out_lo_c[i], out_hi_c[i] = _widened_outward(a_lo_c[i] + b_lo_c[i], a_hi_c[i] + b_hi_c[i], slack, m, emin,
                                                        bias, max_pattern, largest)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _product(a_lo, a_hi, b_lo, b_hi, out_lo, out_hi, start, stop, slack, m, emin, bias, max_pattern, largest):
        """intervals.mul's ends: the least and greatest of the four corner products (a NaN corner, 0·inf,
        read as 0), widened and rounded outward (_widened_outward)."""
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

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _width(x, y, out, start, stop, ulps, per_abs_x, absolute, added, inside_lo, inside_hi, m, emin, emax):
        """(ulps + per_abs_x·|x|)·ulp_T(y) + added, or absolute where inside_lo <= x <= inside_hi (an empty
        range: never); the roundings in the torch ops' order; ulp as metrics.ulp (rounding.ulp_exponent)
        of y with NaN read as 0."""
        x_c, y_c, out_c = x[start:stop], y[start:stop], out[start:stop]
        for i in range(stop - start):
            value = y_c[i]
            magnitude = _bits(value if value == value else 0.0) & ((1 << 63) - 1)
            biased = magnitude >> 52
            power_of_two = ((magnitude & ((1 << 52) - 1)) == 0) & (biased > 0)
            exponent = min(max(max(biased, 1) - 1023 - np.int64(power_of_two), emin), emax)
            gap = _float((exponent - m + 1023) << 52)
            a = x_c[i]
            ulp_part = (ulps + per_abs_x * abs(a)) * gap
            out_c[i] = absolute if inside_lo <= a <= inside_hi else ulp_part + added


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
    return _binary(_product if fused_numba.AVAILABLE else None, (a_lo, a_hi, b_lo, b_hi), slack, fmt_name)


def fused_sum(a_lo: torch.Tensor, a_hi: torch.Tensor, b_lo: torch.Tensor, b_hi: torch.Tensor, slack: float,
              fmt_name: str) -> tuple[torch.Tensor, torch.Tensor] | None:
    """intervals.add's (lo, hi) for [a_lo, a_hi] + [b_lo, b_hi], as fused_product."""
    return _binary(_sum if fused_numba.AVAILABLE else None, (a_lo, a_hi, b_lo, b_hi), slack, fmt_name)


def _binary(kernel, ends, slack: float, fmt_name: str) -> tuple[torch.Tensor, torch.Tensor] | None:
    """kernel's (lo, hi) of two intervals' ends, rounded outward to the format; None where it does not apply."""
    fmt = float_format(fmt_name)
    ends = [t.contiguous() for t in torch.broadcast_tensors(*ends)]
    if kernel is None or not (fmt.encoding == "ieee" and fmt.has_inf and _on_cpu(*ends)):
        return None
    out_lo, out_hi = torch.empty_like(ends[0]), torch.empty_like(ends[0])
    flat = [t.view(-1).numpy() for t in (*ends, out_lo, out_hi)]
    args = (float(slack), fmt.mantissa_bits, fmt.emin, fmt.bias, fmt.max_pattern, float(fmt.max))
    threads.over_chunks(flat[0].shape[0], lambda start, stop: kernel(*flat, start, stop, *args))
    return out_lo, out_hi


def fused_width(allowance, x: torch.Tensor, y: torch.Tensor, fmt_name: str) -> torch.Tensor | None:
    """intervals.Allowance.width(x, y, fmt) in one numba pass, or None where this path does not apply."""
    fmt = float_format(fmt_name)
    if not _on_cpu(x, y):
        return None
    # Allowance.width: absolute added everywhere, or instead of the ulps inside absolute_inside
    inside, added = allowance.absolute_inside, 0.0
    if inside is None:
        inside, added = (math.inf, -math.inf), float(allowance.absolute)
    out = torch.empty_like(y)
    flat_x, flat_y, flat_out = x.view(-1).numpy(), y.view(-1).numpy(), out.view(-1).numpy()
    args = (float(allowance.ulps), float(allowance.ulps_per_abs_x), float(allowance.absolute), added, float(inside[0]),
            float(inside[1]), fmt.mantissa_bits, fmt.emin, ulp_emax(fmt))
    threads.over_chunks(flat_y.shape[0], lambda start, stop: _width(flat_x, flat_y, flat_out, start, stop, *args))
    return out
