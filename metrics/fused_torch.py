"""The fused comparison in plain torch ops, chunk by chunk, on any device.

Each chunk computes every metric with elementwise ops and a few reductions;
per-chunk results stay on the device and are stacked and copied to the host
once at the end, so a CUDA run synchronises once. Memory is O(chunk) (times
the number of threads on the CPU).
The rules are in compare.py's docstring; fused_numba.py applies the same
ones and tests check that the two agree.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from e2egen.metrics import partials as P
from e2egen.metrics import threads
from e2egen.metrics.formats import Format
from e2egen.metrics.names import HISTOGRAM_EDGES
from e2egen.metrics.rounding import inverse_ulp, ordered, rounded_pattern, split_float64

MISSING = -1.0  # below every real value of a maximum (all are >= 0)


def _first_max(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    index = torch.argmax(values)  # documented to return the first maximal element
    return values[index], index


def _first_true(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return mask.sum(), torch.argmax(mask.to(torch.uint8))


def _classes(ref, negative, out_negative, out_pattern, fmt: Format):
    """Boolean masks (nan_mismatch, inf_mismatch, overflow, compared) by the rules in compare.py."""
    abs_ref = ref.abs()
    ref_nan = torch.isnan(ref)
    out_nonfinite = out_pattern > fmt.max_pattern
    if fmt.has_inf:
        out_inf = out_pattern == fmt.max_pattern + 1
        out_nan = out_pattern > fmt.max_pattern + 1
    else:
        out_inf = torch.zeros_like(out_nonfinite)
        out_nan = out_nonfinite

    # Exact results beyond max_T (±inf included): judged by the CTS overflow rule.
    beyond = (abs_ref > fmt.max) & ~ref_nan
    overflow = beyond & ~torch.isinf(ref)
    same_sign = out_negative == negative
    out_is_max = out_pattern == fmt.max_pattern
    if fmt.has_inf:
        near = abs_ref < fmt.overflow_limit
        acceptable = same_sign & (out_inf | (out_is_max & near))
    else:
        acceptable = out_nan | (same_sign & out_is_max)
    wrong_overflow = beyond & ~acceptable
    in_range = ~ref_nan & ~beyond
    nan_mismatch = (ref_nan & ~out_nan) | (in_range & out_nan) | (wrong_overflow & out_nan)
    inf_mismatch = (in_range & out_inf) | (wrong_overflow & ~out_nan)
    return nan_mismatch, inf_mismatch, overflow, in_range & ~out_nonfinite


def _chunk(ref, out, out_bits, bound, fmt: Format, ftz: bool, rel_floor: float, offset: int, edges, mode: int):
    """One row of each per-chunk table (partials.py) for a chunk starting at flat index `offset`."""
    negative, biased, mantissa = split_float64(ref)
    abs_ref = ref.abs()
    bits = out_bits.to(torch.int64) & ((1 << fmt.bits) - 1)
    out_negative = (bits >> (fmt.bits - 1)) == 1
    out_pattern = bits & ((1 << (fmt.bits - 1)) - 1)
    nan_mismatch, inf_mismatch, overflow, compared = _classes(ref, negative, out_negative, out_pattern, fmt)

    if ftz:
        ftz_allowed = compared & (out_pattern == 0) & (ref != 0) & (abs_ref < fmt.min_normal)
    else:
        ftz_allowed = torch.zeros_like(compared)
    measured = compared & ~ftz_allowed

    zero = torch.zeros((), dtype=torch.float64, device=ref.device)
    missing = torch.full((), MISSING, dtype=torch.float64, device=ref.device)
    diff = torch.where(measured, (ref - out).abs(), zero)
    rel = diff / abs_ref
    nonzero_ref = compared & (ref != 0)
    inverse = inverse_ulp(biased, mantissa, fmt)
    eps = diff * inverse
    rounded = rounded_pattern(biased, mantissa, fmt)
    # the deviation from the result rounded as the kernel rounds (partials.py), in ulps: |ref| in quanta
    # of T, nearest-even (0), toward zero (1), up (2) or down (3), back to a value exactly
    quantum = torch.ldexp(torch.ones_like(abs_ref), (torch.clamp(biased, min=1) - 1023).clamp(min=fmt.emin) - fmt.mantissa_bits)
    in_quanta = abs_ref / quantum
    if mode == 0:
        kept = torch.round(in_quanta)
    elif mode == 1:
        kept = torch.floor(in_quanta)
    else:
        up = (mode == 2) != negative  # rounding up raises a positive magnitude, lowers a negative one
        kept = torch.where(up, torch.ceil(in_quanta), torch.floor(in_quanta))
    expected = torch.where(negative, -kept * quantum, kept * quantum)
    u1 = torch.where(measured, (out - expected) * inverse, zero)
    u2 = torch.where(ref == 0, zero, torch.where(negative, -u1, u1))
    ulp_distance = (ordered(negative, rounded)
                    - ordered(out_negative, out_pattern)).abs()
    ulp_distance = torch.where(measured, ulp_distance, torch.where(compared, 0, -1))

    maxima = {
        P.F_ABS: torch.where(compared, diff, missing),
        P.F_REL: torch.where(nonzero_ref, rel, missing),
        P.F_REL_OLD: torch.where(compared & (abs_ref > rel_floor), rel, missing),
        P.F_EPS: torch.where(compared, eps, missing),
    }
    if bound is not None:
        ratio = torch.where(diff == 0, zero, diff / bound)
        maxima[P.F_BOUND] = torch.where(compared, ratio, missing)
        sum_sq_bound = torch.where(compared, ratio * ratio, zero).sum()
    else:
        sum_sq_bound = zero

    floats = [missing] * P.N_FLOAT
    ints = [torch.full((), -1, dtype=torch.int64, device=ref.device)] * P.N_INT
    for (float_col, index_col) in P.FLOAT_MAXIMA.values():
        if float_col in maxima:
            floats[float_col], ints[index_col] = _first_max(maxima[float_col])
    ints[P.I_ULP], ints[P.I_IDX_ULP] = _first_max(ulp_distance)
    for mask, (count_col, first_col) in zip((nan_mismatch, inf_mismatch, overflow), P.COUNTS.values()):
        ints[count_col], ints[first_col] = _first_true(mask)
    floats[P.F_SUM_SQ_DIFF] = (diff * diff).sum()
    floats[P.F_SUM_SQ_REF] = torch.where(compared, ref * ref, zero).sum()
    floats[P.F_SUM_SQ_BOUND] = sum_sq_bound
    floats[P.F_SUM_S], floats[P.F_SUM_SQ_S] = u1.sum(), (u1 * u1).sum()
    floats[P.F_SUM_T], floats[P.F_SUM_SQ_T] = u2.sum(), (u2 * u2).sum()
    floats[P.F_MAX_ABS_REF] = torch.where(compared, abs_ref, zero).max()
    floats[P.F_MAX_ABS_OUT] = torch.where(compared, out.abs(), zero).max()
    ints[P.I_FTZ] = ftz_allowed.sum()
    ints[P.I_COMPARED] = compared.sum()

    bucket = torch.bucketize(rel, edges, right=True)  # the number of edges <= rel
    bucket = torch.where(ref == 0, P.HIST_REF_ZERO, bucket)
    bucket = torch.where(compared, bucket, P.N_HIST)  # out of range: dropped below
    histogram = torch.bincount(bucket, minlength=P.N_HIST + 1)[: P.N_HIST]

    index_cols = [c for _, c in P.FLOAT_MAXIMA.values()] + [P.I_IDX_ULP] + [c for _, c in P.COUNTS.values()]
    for col in index_cols:
        ints[col] = ints[col] + offset
    float_row = torch.stack([f.to(torch.float64) for f in floats])
    int_row = torch.cat([torch.stack([i.to(torch.int64) for i in ints[: P.I_HIST]]), histogram])
    return float_row, int_row


def partials(ref, out, out_bits, bound, fmt: Format, ftz: bool, rel_floor: float,
             chunk: int, mode: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per-chunk rows (see partials.py) for flat ref (float64), out (T) and out's bits; mode: the rounding
    the bias sums measure the deviation from (names.ROUNDING_CODES: 0 nearest)."""
    # Histogram edges; the first, the smallest positive double, splits rel == 0 from rel > 0.
    edges = torch.tensor((math.ulp(0.0),) + HISTOGRAM_EDGES, dtype=torch.float64, device=ref.device)

    def one(start: int):
        stop = start + chunk
        out_f64 = out[start:stop].to(torch.float64)
        bound_chunk = None if bound is None else bound[start:stop]
        return _chunk(ref[start:stop], out_f64, out_bits[start:stop], bound_chunk, fmt, ftz, rel_floor, start, edges,
                      mode)

    starts = range(0, ref.numel(), chunk)
    # On the CPU, chunks small enough that each torch op runs serially go to
    # our threads (see threads.py); on a device, ops queue asynchronously.
    rows = threads.run(one, starts) if ref.device.type == "cpu" else [one(s) for s in starts]
    float_rows, int_rows = zip(*rows)
    # The only device-to-host copies of the whole comparison.
    return torch.stack(float_rows).cpu().numpy(), torch.stack(int_rows).cpu().numpy()
