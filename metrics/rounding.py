"""ulp, round-to-nearest-even and flush-to-zero for any float format, from its bits.

Everything works on the IEEE layout of float64 with integer operations, so it
is exact for every input and runs the same on any torch device. The fused
torch path reuses the pattern helpers; the numba kernels (fused_numba's
comparison, rounding_numba's round_to and ulp on the CPU) repeat the same
arithmetic element by element.

A "pattern" below is the magnitude bit pattern of a value in the target
format T (exponent field << mantissa_bits | mantissa field, no sign). Patterns
of non-negative values are ordered like the values, so the number of
representable values between two numbers is a difference of patterns.
"""
from __future__ import annotations

import numpy as np
import torch

from e2egen.metrics import rounding_numba
from e2egen.metrics.backend import numba_path
from e2egen.metrics.formats import Format, float_format

F64_MANTISSA_BITS = 52
F64_BIAS = 1023
F64_MAGNITUDE_MASK = (1 << 63) - 1
F64_MANTISSA_MASK = (1 << F64_MANTISSA_BITS) - 1
# Right shifts past the top of a 53-bit significand round to zero anyway;
# capping them keeps torch's shifts well-defined on every device.
MAX_SHIFT = 60


def split_float64(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(is_negative, biased exponent, mantissa field) of a float64 tensor, from its bits."""
    bits = x.view(torch.int64)
    magnitude = bits & F64_MAGNITUDE_MASK
    return bits < 0, magnitude >> F64_MANTISSA_BITS, magnitude & F64_MANTISSA_MASK


def pow2(exponent: torch.Tensor) -> torch.Tensor:
    """2.0**exponent as float64, built from bits (exact; exponent in [-1022, 1023])."""
    return ((exponent + F64_BIAS) << F64_MANTISSA_BITS).view(torch.float64)


def unbiased_exponent(biased: torch.Tensor) -> torch.Tensor:
    """floor(log2|x|) for normal float64, -1022 for float64 subnormals and zero.

    Every format here has emin > -1022, so anything this small is below T's
    normal range and only needs to land there.
    """
    return biased.clamp(min=1) - F64_BIAS


def rounded_pattern(biased: torch.Tensor, mantissa: torch.Tensor, fmt: Format) -> torch.Tensor:
    """Pattern of round_T(|x|), round-to-nearest-even, for finite x.

    |x| = v * 2**(E-52) with v the 53-bit significand. In T's normal range the
    quantum is 2**(E-m); below it, the subnormal quantum 2**(emin-m). Rounding
    v right by the difference gives n quanta; in the normal range n includes
    the implicit bit, so pattern = (E-emin) << m + n, and a carry out of the
    mantissa moves into the exponent field by itself. Results above
    fmt.max_pattern mean the value overflows T.
    """
    m, emin = fmt.mantissa_bits, fmt.emin
    exponent = unbiased_exponent(biased)
    significand = mantissa | ((biased > 0).to(torch.int64) << F64_MANTISSA_BITS)
    below_normal = (emin - exponent).clamp(min=0)
    shift = ((F64_MANTISSA_BITS - m) + below_normal).clamp(max=MAX_SHIFT)
    half_minus_one = (torch.ones_like(shift) << (shift - 1)) - 1
    odd = (significand >> shift) & 1
    quanta = (significand + half_minus_one + odd) >> shift
    return ((exponent - emin).clamp(min=0) << m) + quanta


def pattern_value(pattern: torch.Tensor, fmt: Format) -> torch.Tensor:
    """The non-negative float64 value of magnitude patterns (finite patterns only)."""
    m = fmt.mantissa_bits
    exponent_field = pattern >> m
    significand = (pattern & ((1 << m) - 1)) | ((exponent_field > 0).to(torch.int64) << m)
    scale_exponent = exponent_field.clamp(min=1, max=fmt.max_pattern >> m) - fmt.bias - m
    return significand.to(torch.float64) * pow2(scale_exponent)


def inverse_ulp(biased: torch.Tensor, mantissa: torch.Tensor, fmt: Format) -> torch.Tensor:
    """1 / ulp_T(x) (exact power of two). See ulp() for the definition."""
    return pow2(fmt.mantissa_bits - ulp_exponent(biased, mantissa, fmt))


def ulp_exponent(biased: torch.Tensor, mantissa: torch.Tensor, fmt: Format) -> torch.Tensor:
    """The exponent E with ulp_T(x) = 2**(E - m).

    Inside a binade the gap is 2**(floor(log2|x|) - m); at a power of two the
    smaller gap is the one below, one binade down. Clamping to [emin, emax]
    gives the subnormal gap near zero and the gap below max beyond max (emax - 1
    where max is itself a power of two: e8m0).
    """
    is_power_of_two = (mantissa == 0) & (biased > 0)
    exponent = unbiased_exponent(biased) - is_power_of_two.to(torch.int64)
    return exponent.clamp(min=fmt.emin, max=ulp_emax(fmt))


def ulp_emax(fmt: Format) -> int:
    """The exponent ulp_exponent clamps to from above: emax, or emax - 1 where max is itself a power of two
    (e8m0), whose gap below is one binade down."""
    return fmt.emax - int(fmt.max_pattern & ((1 << fmt.mantissa_bits) - 1) == 0)


# Elements per piece in the helpers below: their temporaries (a dozen int64
# arrays) stay O(piece) rather than O(N).
_PIECE = 1 << 20


def _elementwise(x, compute, fused=None) -> torch.Tensor:
    """compute(float64 piece) over x in pieces; numpy in, numpy out. fused(flat values, flat result), numpy
    arrays, does the same in one numba pass where compare's numba path would run (backend.numba_path)."""
    was_numpy = isinstance(x, np.ndarray)
    tensor = torch.from_numpy(np.ascontiguousarray(x)) if was_numpy else torch.as_tensor(x)
    if not tensor.is_floating_point():
        raise ValueError(f"expected a floating-point tensor, got {tensor.dtype}")
    values = tensor.detach().to(torch.float64).contiguous()
    result = torch.empty_like(values)
    flat_in, flat_out = values.view(-1), result.view(-1)
    if fused is not None and numba_path(values.device):
        fused(flat_in.numpy(), flat_out.numpy())
    else:
        for start in range(0, flat_in.numel(), _PIECE):
            flat_out[start:start + _PIECE] = compute(flat_in[start:start + _PIECE])
    return result.numpy() if was_numpy else result


def ulp(x, dtype) -> torch.Tensor:
    """ulp_T(x) as in the WebGPU CTS: min(b - a) over representable a <= x <= b, a != b.

    So the gap containing x; at a representable x the smaller neighbouring
    gap, which at a power of two is the gap below; at 0 the smallest
    subnormal; beyond T's max (and at ±inf) the ulp of max; NaN for NaN.
    Takes and returns float64 (torch or numpy).
    """
    fmt = float_format(dtype)

    def compute(values: torch.Tensor) -> torch.Tensor:
        _, biased, mantissa = split_float64(values)
        result = pow2(ulp_exponent(biased, mantissa, fmt) - fmt.mantissa_bits)
        return torch.where(torch.isnan(values), values, result)

    return _elementwise(x, compute, lambda values, out: rounding_numba.ulp_into(values, out, fmt, ulp_emax(fmt)))


def _overflow_value(fmt: Format, saturate: bool) -> float:
    """What round_to gives past a signed format's range (its docstring's rule): ±max when saturating or
    where the format has no inf or NaN, else ±inf, else NaN."""
    if saturate or fmt.encoding == "none":
        return fmt.max
    return float("inf") if fmt.has_inf else float("nan")


def round_to(x, dtype, *, saturate: bool = False) -> torch.Tensor:
    """x rounded to T with round-to-nearest-even, returned as float64.

    Rounds once from float64 (torch's float64 -> f16/bf16/fp8 casts go through
    float32 and can round twice). Subnormals are kept. Overflow (|x| beyond
    max + ulp(max)/2, or ±inf; exactly there: max for f8e4m3fn, whose max
    pattern is even, overflow for the others) by T's encoding:

    * "ieee": ±inf.
    * "fn" (f8e4m3fn) and "fnuz" (f8e4m3fnuz, f8e5m2fnuz): NaN, OCP FP8's
      non-saturating conversion, so an overflow never turns into a plausible
      number. torch 2.13's cast to float8_e4m3fn saturates to ±448 instead
      (compare() accepts either); its casts to the fnuz dtypes give NaN (0x80).
    * "none" (f4e2m1, no inf or NaN): ±max (±6), the OCP MX conversion.
    * e8m0: NaN (0xFF), its only non-number.

    saturate=True gives ±max on overflow for every format (OCP FP8's
    saturating mode, PTX's .satfinite: ±inf too); NaN stays NaN.
    Formats without negative zero (fnuz) give +0 for every x that rounds to
    zero. f4e2m1 has no NaN: NaN in gives NaN out (no pattern holds it).
    e8m0 (see round_e8m0) is unsigned with no zero: x < 0 gives NaN, 0 and
    tiny positive x the smallest value 2**-127.
    """
    fmt = float_format(dtype)
    if not fmt.signed:
        return round_e8m0(x, saturate=saturate)
    beyond = _overflow_value(fmt, saturate)

    def compute(values: torch.Tensor) -> torch.Tensor:
        negative, biased, mantissa = split_float64(values)
        pattern = rounded_pattern(biased, mantissa, fmt)
        overflows = (pattern > fmt.max_pattern) | torch.isinf(values)
        magnitude = pattern_value(pattern.clamp(max=fmt.max_pattern), fmt)
        magnitude = torch.where(overflows, torch.full_like(magnitude, beyond), magnitude)
        if not fmt.has_negative_zero:
            negative = negative & (magnitude != 0)
        result = torch.where(negative, -magnitude, magnitude)
        return torch.where(torch.isnan(values), values, result)

    return _elementwise(x, compute, lambda values, out: rounding_numba.round_to_into(values, out, fmt, beyond))


def rounding_deviation(exact: torch.Tensor, error: torch.Tensor, dtype) -> torch.Tensor:
    """How far a value within ±error of `exact` may round from round_to(exact) (both to nearest even in T),
    float64: 0 where exact lies farther than error from every rounding boundary of T (both round alike),
    else error plus two of T's gaps at |exact| + error, the wider side (2·ulp_T(|exact| + error) + error).
    NaN in either gives 0. exact and error: float64 tensors of one shape (error >= 0)."""
    fmt = float_format(dtype)
    exact, error = exact.to(torch.float64).contiguous(), error.to(torch.float64).contiguous()
    if fmt.signed and numba_path(exact.device) and exact.shape == error.shape:
        result = torch.empty_like(exact)
        rounding_numba.deviation_into(exact.view(-1).numpy(), error.view(-1).numpy(), result.view(-1).numpy(), fmt,
                                      _overflow_value(fmt, False), ulp_emax(fmt))
        return result
    rounded = round_to(exact, fmt)
    to_boundary = ulp(rounded, fmt) / 2 - (exact - rounded).abs()
    step = ulp(exact.abs() + error, fmt)  # the gap where exact + ε may round: the wider one
    return torch.where(error >= to_boundary, 2 * step + error, 0.0)


def e8m0_exponent(values: torch.Tensor) -> torch.Tensor:
    """The unbiased exponent e of round_e8m0(x) = 2**e (int64; before clamping to [-127, 127]).

    Between 2**E and 2**(E+1) the nearer is 2**(E+1) from the midpoint 1.5 * 2**E
    up (a tie goes up: both neighbours have the odd significand 1, and torch's
    float8_e8m0fnu cast does the same), so e = E + (the first mantissa bit).
    """
    _, biased, mantissa = split_float64(values)
    return unbiased_exponent(biased) + (mantissa >> (F64_MANTISSA_BITS - 1))


def round_e8m0(x, *, saturate: bool = False) -> torch.Tensor:
    """x rounded to the nearest E8M0 value 2**e, e in [-127, 127], as float64.

    Positive x below 2**-127 gives 2**-127 (E8M0 has no zero, so that is the
    nearest value), and so do ±0; x from 2**127 * 1.5 up (+inf too) overflows
    to NaN (0xFF), or 2**127 with saturate=True; negative x and NaN give NaN
    (no sign bit). torch's float8_e8m0fnu cast differs for negative x: it
    drops the sign (-3 -> 4).
    """
    def compute(values: torch.Tensor) -> torch.Tensor:
        exponent = e8m0_exponent(values)
        overflows = (exponent > 127) | (values == float("inf"))
        result = pow2(exponent.clamp(min=-127, max=127))
        top = torch.full_like(result, 2.0 ** 127 if saturate else float("nan"))
        result = torch.where(overflows, top, result)
        invalid = torch.isnan(values) | (values < 0)
        return torch.where(invalid, torch.full_like(result, float("nan")), result)

    return _elementwise(x, compute)


def flush_subnormals(x, dtype) -> torch.Tensor:
    """x with every value that is subnormal in T (0 < |x| < min_normal) set to zero of its sign.

    +0 where T has no negative zero (fnuz); x unchanged for e8m0, which has no subnormals.
    """
    fmt = float_format(dtype)

    def compute(values: torch.Tensor) -> torch.Tensor:
        if not fmt.has_subnormals:
            return values
        if not fmt.has_negative_zero:
            values = values + 0.0  # -0 + 0 = +0
        subnormal = (values != 0) & (values.abs() < fmt.min_normal)
        zero = torch.zeros_like(values)
        if fmt.has_negative_zero:
            zero = torch.copysign(zero, values)
        return torch.where(subnormal, zero, values)

    return _elementwise(x, compute)


def ordered(negative: torch.Tensor, pattern: torch.Tensor) -> torch.Tensor:
    """Sign-magnitude patterns mapped to integers ordered like the values (-0 and +0 both 0)."""
    return torch.where(negative, -pattern, pattern)


