"""rounding.round_to, rounding.ulp, rounding.rounding_deviation and encoding.encode in one numba pass
each, for CPU tensors.

Their torch definitions take a dozen to twenty passes over the values (bit fields, shifts, clamps, a
power of two, selects), which is most of the cost where a bound rounds a whole intermediate (a fused
gemm→gemm's A·B, a conv→gemm's convolution, a quantized attention's score chain) or takes its ulps,
and where fp4 inputs are drawn (their codes).
Here numba repeats the same integer arithmetic element by element on every core; rounding.py calls
these where they apply (numba installed, float64 on the CPU) and keeps its torch definitions for other
devices, which these equal bit for bit (tests/metrics/test_metrics_rounding_numba.py). e8m0 (unsigned) is left
to the torch path: it rounds by its own rule (rounding.round_e8m0).
"""
from __future__ import annotations

import numpy as np

from e2egen.metrics import threads
from e2egen.metrics.formats import Format
from e2egen.metrics.numba_kernels import AVAILABLE

__all__ = ["AVAILABLE", "codes_into", "deviation_into", "round_to_into", "ulp_into"]

MAX_SHIFT = 60  # as rounding.MAX_SHIFT: shifts past a 53-bit significand round to zero anyway

if AVAILABLE:
    import numba

    from e2egen.metrics.numba_kernels import align_stack as _align_stack
    from e2egen.metrics.numba_kernels import as_float64 as _float
    from e2egen.metrics.numba_kernels import as_int64 as _bits

    @numba.njit(inline="always", error_model="numpy")
    def _nearest_pattern(x, m, emin):
        """(x's bits, the magnitude pattern of |x| rounded to nearest even in the format (above max_pattern:
        an overflow), whether x is ±inf or NaN): rounding.rounded_pattern, element by element."""
        word = _bits(x)
        magnitude = word & ((1 << 63) - 1)
        biased = magnitude >> 52
        exponent = max(biased, 1) - 1023
        significand = (magnitude & ((1 << 52) - 1)) | (np.int64(biased > 0) << 52)
        shift = min(52 - m + max(emin - exponent, 0), MAX_SHIFT)
        odd = (significand >> shift) & 1
        quanta = (significand + ((np.int64(1) << (shift - 1)) - 1) + odd) >> shift
        return word, (max(exponent - emin, 0) << m) + quanta, biased == 0x7FF

    @numba.njit(inline="always", error_model="numpy")
    def _rounded(x, m, emin, bias, max_pattern, beyond, negative_zero):
        """rounding.round_to's value of x: nearest-even pattern, its value, `beyond` past max or at ±inf,
        no -0 where the format has none, NaN kept."""
        word, pattern, special = _nearest_pattern(x, m, emin)
        field = min(pattern, max_pattern)
        exponent_field = field >> m
        value = np.float64((field & ((1 << m) - 1)) | (np.int64(exponent_field > 0) << m)) * _float(
            (min(max(exponent_field, 1), max_pattern >> m) - bias - m + 1023) << 52)
        value = beyond if pattern > max_pattern or special else value
        negative = word < 0 and (negative_zero or value != 0.0)
        result = -value if negative else value
        return x if x != x else result

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _round_to(values, out, start, stop, m, emin, bias, max_pattern, beyond, negative_zero):
        """rounding.round_to's compute() over values[start:stop]."""
        _align_stack()
        values_c, out_c = values[start:stop], out[start:stop]  # slices from 0: see fused_numba._reduce_chunk
        for i in range(stop - start):
            out_c[i] = _rounded(values_c[i], m, emin, bias, max_pattern, beyond, negative_zero)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _codes(values, out, start, stop, m, emin, max_pattern, bits, overflow, overflow_signed, nan_code,
               negative_zero):
        """encoding.encode's codes of a signed byte format: the nearest-even pattern with the sign, `overflow`
        past max or at ±inf (signed or not), nan_code for NaN; how many NaN there were."""
        _align_stack()
        values_c, out_c = values[start:stop], out[start:stop]
        nans = 0
        for i in range(stop - start):
            x = values_c[i]
            word, pattern, special = _nearest_pattern(x, m, emin)
            over = pattern > max_pattern or special
            pattern = overflow if over else pattern
            signed = (not over or overflow_signed) and word < 0 and (negative_zero or pattern != 0)
            code = pattern | (np.int64(signed) << (bits - 1))
            nan = x != x
            nans += np.int64(nan)
            out_c[i] = nan_code if nan else code
        return nans

    @numba.njit(inline="always", error_model="numpy")
    def _ulp_of(x, m, emin, emax):
        """rounding.ulp's value at x: the gap below at a power of two, clamped to [emin, emax]; NaN kept."""
        magnitude = _bits(x) & ((1 << 63) - 1)
        biased = magnitude >> 52
        power_of_two = ((magnitude & ((1 << 52) - 1)) == 0) & (biased > 0)
        exponent = min(max(max(biased, 1) - 1023 - np.int64(power_of_two), emin), emax)
        gap = _float((exponent - m + 1023) << 52)
        return x if x != x else gap

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _ulp(values, out, start, stop, m, emin, emax):
        """rounding.ulp's compute() over values[start:stop]."""
        _align_stack()
        values_c, out_c = values[start:stop], out[start:stop]
        for i in range(stop - start):
            out_c[i] = _ulp_of(values_c[i], m, emin, emax)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _deviation(exact, error, out, start, stop, m, emin, bias, max_pattern, beyond, negative_zero, emax):
        """rounding.rounding_deviation's compute() over exact[start:stop], error[start:stop]."""
        _align_stack()
        exact_c, error_c, out_c = exact[start:stop], error[start:stop], out[start:stop]
        for i in range(stop - start):
            x, e = exact_c[i], error_c[i]
            rounded = _rounded(x, m, emin, bias, max_pattern, beyond, negative_zero)
            to_boundary = _ulp_of(rounded, m, emin, emax) / 2 - abs(x - rounded)
            step = _ulp_of(abs(x) + e, m, emin, emax)
            out_c[i] = 2 * step + e if e >= to_boundary else 0.0

def round_to_into(values: np.ndarray, out: np.ndarray, fmt: Format, beyond: float) -> None:
    """out = round_to(values) for a signed format (flat contiguous float64 arrays); `beyond`: the value
    an overflow takes (±inf, NaN or max, by the format's encoding and saturate)."""
    args = (fmt.mantissa_bits, fmt.emin, fmt.bias, fmt.max_pattern, float(beyond), bool(fmt.has_negative_zero))
    threads.over_chunks(values.shape[0], lambda start, stop: _round_to(values, out, start, stop, *args))


def codes_into(values: np.ndarray, out: np.ndarray, fmt: Format, saturate: bool) -> int:
    """out (uint8) = encoding.encode(values) for a signed byte format (flat contiguous arrays): the codes of
    round_to(values, saturate=saturate), NaN as the format's NaN code (0 where it has none); returns how
    many values were NaN (encode refuses them for a format without NaN)."""
    if saturate or fmt.encoding == "none":
        overflow, overflow_signed = fmt.max_pattern, True  # ±max
    elif fmt.has_inf:
        overflow, overflow_signed = fmt.max_pattern + 1, True  # ±inf: the pattern above max
    else:
        overflow, overflow_signed = fmt.nan_pattern, False  # NaN, without a sign
    nan_code = fmt.nan_pattern if fmt.nan_pattern is not None else 0
    args = (fmt.mantissa_bits, fmt.emin, fmt.max_pattern, fmt.bits, overflow, overflow_signed, nan_code,
            bool(fmt.has_negative_zero))
    return sum(threads.over_chunks(values.shape[0], lambda start, stop: _codes(values, out, start, stop, *args)))


def deviation_into(exact: np.ndarray, error: np.ndarray, out: np.ndarray, fmt: Format, beyond: float,
                   emax: int) -> None:
    """out = rounding.rounding_deviation(exact, error) for a signed format (flat contiguous float64 arrays);
    beyond and emax as round_to_into's and ulp_into's."""
    args = (fmt.mantissa_bits, fmt.emin, fmt.bias, fmt.max_pattern, float(beyond), bool(fmt.has_negative_zero), emax)
    threads.over_chunks(exact.shape[0], lambda start, stop: _deviation(exact, error, out, start, stop, *args))


def ulp_into(values: np.ndarray, out: np.ndarray, fmt: Format, emax: int) -> None:
    """out = ulp_T(values) (flat contiguous float64 arrays); emax: rounding.ulp_emax(fmt)."""
    args = (fmt.mantissa_bits, fmt.emin, emax)
    threads.over_chunks(values.shape[0], lambda start, stop: _ulp(values, out, start, stop, *args))
