"""What each fused kernel reports per chunk, and how chunks combine.

Both backends (numba on CPU, plain torch on any device) fill one row per chunk
of a float table and an int table with the columns below; `combine` merges
the rows in chunk order into `Totals`. A maximum that no element reached is
-1 with index -1. Indices are flat (row-major) and global. Ties keep the
lowest index: chunks report their first maximal element and are merged in
order.

Element classes (shared by both backends, see compare.py for the rules):
"compared" elements are finite in both ref and out with |ref| <= max_T; the
maxima, sums and histogram run over them. Elements accepted by the ftz
allowance are compared with a difference of zero.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from e2egen.metrics.names import HISTOGRAM_BUCKETS

# Float columns.
(
    F_ABS, F_REL, F_REL_OLD, F_EPS, F_BOUND, F_SUM_SQ_DIFF, F_SUM_SQ_REF, F_MAX_ABS_REF, F_MAX_ABS_OUT,
    F_SUM_SQ_BOUND, F_SUM_S, F_SUM_SQ_S, F_SUM_T, F_SUM_SQ_T,
) = range(14)
N_FLOAT = 14
# The bias sums (bias_z), over compared elements: with u = (out - R(ref)) /
# ulp_T(ref), the output's deviation from the reference rounded as the kernel
# rounds (names.ROUNDING_CODES; u = 0 where ftz accepted the element):
# F_SUM_S = sum(u), F_SUM_SQ_S = sum(u**2),
# F_SUM_T = sum(u * sign(ref)), F_SUM_SQ_T = sum((u * sign(ref))**2)
# (sign(0) = 0). F_SUM_SQ_BOUND = sum((|ref - out| / B)**2) (bound_rms; 0
# without a bound).
# Int columns.
(
    I_IDX_ABS, I_IDX_REL, I_IDX_REL_OLD, I_IDX_EPS, I_IDX_BOUND,
    I_ULP, I_IDX_ULP,
    I_NAN, I_FIRST_NAN, I_INF, I_FIRST_INF, I_OVER, I_FIRST_OVER,
    I_FTZ, I_COMPARED, I_HIST,
) = range(16)
N_HIST = len(HISTOGRAM_BUCKETS)
N_INT = I_HIST + N_HIST
HIST_REF_ZERO = N_HIST - 1

# (float column, its index column) for the float maxima.
FLOAT_MAXIMA = {
    "max_abs_diff": (F_ABS, I_IDX_ABS),
    "max_rel_diff": (F_REL, I_IDX_REL),
    "max_rel_diff_old": (F_REL_OLD, I_IDX_REL_OLD),
    "max_eps_diff": (F_EPS, I_IDX_EPS),
    "bound_ratio": (F_BOUND, I_IDX_BOUND),
}
# (count column, first-index column) for the counted element classes.
COUNTS = {
    "nan_mismatch": (I_NAN, I_FIRST_NAN),
    "inf_mismatch": (I_INF, I_FIRST_INF),
    "overflow": (I_OVER, I_FIRST_OVER),
}


@dataclass(frozen=True)
class Totals:
    maxima: dict[str, tuple[float, int]]  # metric -> (value, flat index or -1)
    counts: dict[str, tuple[int, int]]  # class -> (count, first flat index or -1)
    sum_sq_diff: float
    sum_sq_ref: float
    sum_sq_bound: float
    sum_s: float
    sum_sq_s: float
    sum_t: float
    sum_sq_t: float
    max_abs_ref: float
    max_abs_out: float
    ftz_allowed: int
    compared: int
    histogram: tuple[int, ...]


def _first_max(values: np.ndarray, indices: np.ndarray) -> tuple[float | int, int]:
    chunk = int(np.argmax(values))  # first chunk holding the maximum, so the lowest index
    value = values[chunk]
    return (value, int(indices[chunk])) if value >= 0 else (value, -1)


def combine(floats: np.ndarray, ints: np.ndarray) -> Totals:
    """Merge per-chunk rows (float [chunks, N_FLOAT], int [chunks, N_INT]) in chunk order."""
    maxima = {name: _first_max(floats[:, f], ints[:, i]) for name, (f, i) in FLOAT_MAXIMA.items()}
    maxima = {name: (float(v), i) for name, (v, i) in maxima.items()}
    ulp_value, ulp_index = _first_max(ints[:, I_ULP], ints[:, I_IDX_ULP])
    maxima["max_ulp_diff"] = (float(ulp_value), ulp_index)
    counts = {}
    for name, (count_col, first_col) in COUNTS.items():
        per_chunk = ints[:, count_col]
        nonzero = np.flatnonzero(per_chunk)
        first = int(ints[nonzero[0], first_col]) if nonzero.size else -1
        counts[name] = (int(per_chunk.sum()), first)
    return Totals(
        maxima=maxima,
        counts=counts,
        sum_sq_diff=float(floats[:, F_SUM_SQ_DIFF].sum()),
        sum_sq_ref=float(floats[:, F_SUM_SQ_REF].sum()),
        sum_sq_bound=float(floats[:, F_SUM_SQ_BOUND].sum()),
        sum_s=float(floats[:, F_SUM_S].sum()),
        sum_sq_s=float(floats[:, F_SUM_SQ_S].sum()),
        sum_t=float(floats[:, F_SUM_T].sum()),
        sum_sq_t=float(floats[:, F_SUM_SQ_T].sum()),
        max_abs_ref=float(floats[:, F_MAX_ABS_REF].max()),
        max_abs_out=float(floats[:, F_MAX_ABS_OUT].max()),
        ftz_allowed=int(ints[:, I_FTZ].sum()),
        compared=int(ints[:, I_COMPARED].sum()),
        histogram=tuple(int(c) for c in ints[:, I_HIST:I_HIST + N_HIST].sum(axis=0)),
    )
