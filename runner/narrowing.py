"""float64 <-> the 16-bit input formats (f16, bf16) in one pass over the data.

Input generation rounds tens of millions of float64 draws to f16/bf16 and
hands the reference the same values back in float64. torch's own casts round
float64 -> f16/bf16 twice (through f32), and the exact torch path
(inputs._round_to_odd_f32) makes five full-size passes; here each element is
read once and its result written once, from the bits, on every core
(metrics.threads). The arithmetic is metrics.rounding's: rounded_pattern for
narrowing (round to nearest, ties to even, subnormals kept, ±inf past the
largest finite value) and pattern_value for widening, so the results equal
metrics.round_to bit for bit (tests/runner/test_runner_narrowing.py).

numba is optional: AVAILABLE is False without it, and inputs.py falls back
to the torch path.
"""
from __future__ import annotations

import numpy as np
import torch

from e2egen.metrics import threads
from e2egen.metrics.formats import Format, float_format

from e2egen.metrics.numba_kernels import AVAILABLE  # re-exported: whether this module's kernels exist

if AVAILABLE:
    import numba
NARROW_DTYPES = {torch.float16: "f16", torch.bfloat16: "bf16"}
# Elements per task: large enough that the thread hand-off is noise, small enough to split the work evenly.
_CHUNK = 1 << 20

if AVAILABLE:
    from e2egen.metrics.numba_kernels import align_stack as _align_stack, as_int64 as _bits, as_float64 as _float

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _narrow(values, out, start, stop, m, emin, max_pattern, inf_pattern, nan_pattern):
        _align_stack()
        # slices indexed from 0 (as metrics.fused_numba._reduce_chunk): indexed from `start`, numba's
        # negative-index fix-up made every load a gather, 4x slower
        bits, out_c = values.view(np.int64)[start:stop], out[start:stop]
        for i in range(stop - start):
            word = bits[i]
            sign = (word >> 48) & 0x8000  # arithmetic shift: the sign lands in bit 15, the rest is masked off
            biased = (word >> 52) & 0x7FF
            mantissa = word & 0xFFFFFFFFFFFFF
            exponent = max(biased, 1) - 1023
            significand = mantissa | (np.int64(biased > 0) << 52)
            shift = min(52 - m + max(emin - exponent, 0), 60)
            odd = (significand >> shift) & 1
            quanta = (significand + ((np.int64(1) << (shift - 1)) - 1) + odd) >> shift
            pattern = (max(exponent - emin, 0) << m) + quanta
            pattern = inf_pattern if pattern > max_pattern else pattern
            pattern = (nan_pattern if mantissa != 0 else inf_pattern) if biased == 0x7FF else pattern
            out_c[i] = pattern | sign

    @numba.njit(inline="always", error_model="numpy")
    def magnitude_value(magnitude, m, exponent_mask, bias, flush):
        """The float64 value of a magnitude's bits (no sign) in a format with m mantissa bits, its exponent
        field's all-ones `exponent_mask` and `bias`: the integer significand times a power of two built from
        its bits, both exact (every such format's values are float64 normals), inf and NaN; with `flush`, a
        subnormal becomes zero. pattern_value's arithmetic, and magnitude.py's for f32 bits."""
        exponent = (magnitude >> m) & exponent_mask
        mantissa = magnitude & ((np.int64(1) << m) - 1)
        significand = (mantissa | (np.int64(exponent > 0) << m)) * np.int64(not (flush and exponent == 0))
        value = np.float64(significand) * _float((max(exponent, 1) - bias - m + 1023) << 52)
        return (np.inf if mantissa == 0 else np.nan) if exponent == exponent_mask else value

    @numba.njit(inline="always", error_model="numpy")
    def pattern_value(pattern, m, exponent_mask, bias, flush):
        """The float64 value of a 16-bit pattern (uint16) of a format with m mantissa bits, its exponent
        field's all-ones `exponent_mask` and `bias`: metrics.rounding.pattern_value's arithmetic, with the
        sign, inf and NaN; with `flush`, a subnormal becomes a zero of its sign. Arithmetic rather than a
        table look-up, so that the loops using it vectorise (a look-up is a gather: 17.6 against 11.9 ms
        for 45M f16 values). runner/magnitude.py's widening scan inlines it, and numba's cache notices
        changes to a kernel's own file only: after changing this, touch that file too."""
        bits = np.int64(pattern)
        return _float(_bits(magnitude_value(bits & 0x7FFF, m, exponent_mask, bias, flush)) | ((bits >> 15) << 63))

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _widen(patterns, out, start, stop, m, exponent_mask, bias, flush):
        _align_stack()
        patterns_c, out_c = patterns[start:stop], out[start:stop]  # from 0, as _narrow's
        for i in range(stop - start):
            out_c[i] = pattern_value(patterns_c[i], m, exponent_mask, bias, flush)

def narrow(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Contiguous CPU float64 -> f16/bf16 (same shape), rounded once to nearest even."""
    fmt = _format(dtype)
    flat = _flat_float64(values)
    out = torch.empty(flat.numel(), dtype=torch.uint16)
    source, target = flat.numpy(), out.numpy()
    inf_pattern = ((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits
    nan_pattern = inf_pattern | (1 << (fmt.mantissa_bits - 1))
    _over_chunks(len(source), lambda start, stop: _narrow(source, target, start, stop, fmt.mantissa_bits, fmt.emin,
                                                          fmt.max_pattern, inf_pattern, nan_pattern))
    return out.view(dtype).view(values.shape)


def widen(values: torch.Tensor, flush_subnormals: bool = False) -> torch.Tensor:
    """Contiguous CPU f16/bf16 -> float64 (exact), same shape; with flush_subnormals, the format's
    subnormals become zeros of their sign (metrics.flush_subnormals) in the same pass."""
    _format(values.dtype)
    if values.device.type != "cpu" or not values.is_contiguous():
        raise ValueError("widen takes a contiguous CPU tensor")
    patterns = values.view(torch.uint16).reshape(-1).numpy()
    out = np.empty(len(patterns), dtype=np.float64)
    layout = pattern_layout(values.dtype)
    _over_chunks(len(patterns), lambda start, stop: _widen(patterns, out, start, stop, *layout, flush_subnormals))
    return torch.from_numpy(out).view(values.shape)


def pattern_layout(dtype: torch.dtype) -> tuple[int, int, int]:
    """pattern_value's (m, exponent_mask, bias) for a 16-bit dtype."""
    fmt = _format(dtype)
    return fmt.mantissa_bits, (1 << fmt.exponent_bits) - 1, fmt.bias


def _format(dtype: torch.dtype) -> Format:
    if not AVAILABLE:
        raise RuntimeError("runner.narrowing needs numba")
    if dtype not in NARROW_DTYPES:
        raise ValueError(f"narrowing handles {', '.join(map(str, NARROW_DTYPES))}, not {dtype}")
    return float_format(NARROW_DTYPES[dtype])


def _flat_float64(values: torch.Tensor) -> torch.Tensor:
    if values.dtype != torch.float64 or values.device.type != "cpu" or not values.is_contiguous():
        raise ValueError(f"narrow takes a contiguous CPU float64 tensor, got {values.dtype} on {values.device}")
    return values.detach().reshape(-1)


def _over_chunks(length: int, work) -> None:
    starts = range(0, length, _CHUNK)
    threads.run(lambda start: work(start, min(start + _CHUNK, length)), starts)
