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


_MAXIMA = [(name, f, i) for name, (f, i) in FLOAT_MAXIMA.items()]
_SUM_COLUMNS = [F_SUM_SQ_DIFF, F_SUM_SQ_REF, F_SUM_SQ_BOUND, F_SUM_S, F_SUM_SQ_S, F_SUM_T, F_SUM_SQ_T]
_COUNTED_COLUMNS = [count for count, _ in COUNTS.values()]
_FIRST_COLUMNS = [first for _, first in COUNTS.values()]
_INT_SUM_COLUMNS = [*_COUNTED_COLUMNS, I_FTZ, I_COMPARED, *range(I_HIST, I_HIST + N_HIST)]


def combine(floats: np.ndarray, ints: np.ndarray) -> Totals:
    """Merge per-chunk rows (float [chunks, N_FLOAT], int [chunks, N_INT]) in chunk order."""
    if floats.shape[0] > 1:
        floats, ints = _merged(floats, ints)
    return _totals(floats[0].tolist(), ints[0].tolist())


def _merged(floats: np.ndarray, ints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows merged into one row of the same columns: each maximum and its index from the first chunk
    that reaches it (so the lowest index), each count's first index from the first chunk that has one, the
    sums as numpy sums a column (pairwise; tests/metrics/test_metrics_partials.py), the counts added."""
    merged_floats = np.empty((1, N_FLOAT))
    merged_ints = np.empty((1, N_INT), np.int64)
    value_columns = [f for _, f, _ in _MAXIMA]
    index_columns = [i for _, _, i in _MAXIMA]
    best = np.argmax(floats[:, value_columns], axis=0)
    merged_floats[0, value_columns] = floats[best, value_columns]
    merged_ints[0, index_columns] = ints[best, index_columns]
    best_ulp = int(np.argmax(ints[:, I_ULP]))
    merged_ints[0, [I_ULP, I_IDX_ULP]] = ints[best_ulp, [I_ULP, I_IDX_ULP]]
    merged_ints[0, _INT_SUM_COLUMNS] = ints[:, _INT_SUM_COLUMNS].sum(axis=0)
    first_chunks = np.argmax(ints[:, _COUNTED_COLUMNS] != 0, axis=0)  # 0 where none: its first is -1 then
    merged_ints[0, _FIRST_COLUMNS] = ints[first_chunks, _FIRST_COLUMNS]
    # each column laid out as a row, so that numpy sums it along contiguous memory: pairwise, as column.sum()
    merged_floats[0, _SUM_COLUMNS] = np.ascontiguousarray(floats[:, _SUM_COLUMNS].T).sum(axis=1)
    merged_floats[0, [F_MAX_ABS_REF, F_MAX_ABS_OUT]] = floats[:, [F_MAX_ABS_REF, F_MAX_ABS_OUT]].max(axis=0)
    return merged_floats, merged_ints


def _totals(row: list[float], counts: list[int]) -> Totals:
    """Totals from one row of each table (a single chunk's, or the merged rows)."""
    maxima = {name: (row[f], counts[i] if row[f] >= 0 else -1) for name, f, i in _MAXIMA}
    maxima["max_ulp_diff"] = (float(counts[I_ULP]), counts[I_IDX_ULP] if counts[I_ULP] >= 0 else -1)
    return Totals(
        maxima=maxima,
        counts={name: (counts[count], counts[first] if counts[count] else -1)
                for name, (count, first) in COUNTS.items()},
        sum_sq_diff=row[F_SUM_SQ_DIFF], sum_sq_ref=row[F_SUM_SQ_REF], sum_sq_bound=row[F_SUM_SQ_BOUND],
        sum_s=row[F_SUM_S], sum_sq_s=row[F_SUM_SQ_S], sum_t=row[F_SUM_T], sum_sq_t=row[F_SUM_SQ_T],
        max_abs_ref=row[F_MAX_ABS_REF], max_abs_out=row[F_MAX_ABS_OUT],
        ftz_allowed=counts[I_FTZ], compared=counts[I_COMPARED],
        histogram=tuple(counts[I_HIST:I_HIST + N_HIST]),
    )
