"""partials.combine merges per-chunk rows as its definition says: each maximum and its index from the first
chunk that reaches it, each count's first index from the first chunk that has one, sums as numpy sums each
column, counts added; a single chunk's row is its totals as they stand."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from e2egen.metrics import partials as P


def random_tables(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows as the fused passes fill them: maxima >= 0 with an index, or -1 with -1 (ties between chunks
    likely); counts >= 0 with a first index only where nonzero; sums of any sign and scale."""
    rng = np.random.default_rng(seed)
    floats = rng.standard_normal((rows, P.N_FLOAT)) * 10.0 ** rng.integers(-3, 3, size=(rows, P.N_FLOAT))
    ints = rng.integers(0, 1000, size=(rows, P.N_INT))
    for _, (value, index) in P.FLOAT_MAXIMA.items():
        floats[:, value] = rng.choice([-1.0, 0.0, 0.5, 2.0, 3.0], size=rows)
        ints[:, index] = np.where(floats[:, value] >= 0, rng.integers(0, 10 ** 6, size=rows), -1)
    ints[:, P.I_ULP] = rng.choice([-1, 0, 3, 7], size=rows)
    ints[:, P.I_IDX_ULP] = np.where(ints[:, P.I_ULP] >= 0, rng.integers(0, 10 ** 6, size=rows), -1)
    for count, first in P.COUNTS.values():
        ints[:, count] = rng.choice([0, 0, 0, 2], size=rows)
        ints[:, first] = np.where(ints[:, count] > 0, rng.integers(0, 10 ** 6, size=rows), -1)
    floats[:, [P.F_MAX_ABS_REF, P.F_MAX_ABS_OUT]] = np.abs(floats[:, [P.F_MAX_ABS_REF, P.F_MAX_ABS_OUT]])
    return floats, ints


def by_definition(floats: np.ndarray, ints: np.ndarray) -> dict:
    def first_max(values, indices):
        chunk = int(np.argmax(values))
        return float(values[chunk]), (int(indices[chunk]) if values[chunk] >= 0 else -1)

    maxima = {name: first_max(floats[:, f], ints[:, i]) for name, (f, i) in P.FLOAT_MAXIMA.items()}
    maxima["max_ulp_diff"] = first_max(ints[:, P.I_ULP], ints[:, P.I_IDX_ULP])
    counts = {}
    for name, (count, first) in P.COUNTS.items():
        nonzero = np.flatnonzero(ints[:, count])
        counts[name] = (int(ints[:, count].sum()), int(ints[nonzero[0], first]) if nonzero.size else -1)
    column_sum = lambda column: float(floats[:, column].sum())  # noqa: E731
    return dict(maxima=maxima, counts=counts, sum_sq_diff=column_sum(P.F_SUM_SQ_DIFF),
                sum_sq_ref=column_sum(P.F_SUM_SQ_REF), sum_sq_bound=column_sum(P.F_SUM_SQ_BOUND),
                sum_s=column_sum(P.F_SUM_S), sum_sq_s=column_sum(P.F_SUM_SQ_S), sum_t=column_sum(P.F_SUM_T),
                sum_sq_t=column_sum(P.F_SUM_SQ_T), max_abs_ref=float(floats[:, P.F_MAX_ABS_REF].max()),
                max_abs_out=float(floats[:, P.F_MAX_ABS_OUT].max()), ftz_allowed=int(ints[:, P.I_FTZ].sum()),
                compared=int(ints[:, P.I_COMPARED].sum()),
                histogram=tuple(int(c) for c in ints[:, P.I_HIST:P.I_HIST + P.N_HIST].sum(axis=0)))


@given(rows=st.integers(1, 300) | st.sampled_from([511, 1024, 4097]), seed=st.integers(0, 2 ** 32 - 1))
@settings(max_examples=200, deadline=None)
def test_combine_follows_its_definition(rows, seed):
    floats, ints = random_tables(rows, seed)
    totals = P.combine(floats, ints)
    want = by_definition(floats, ints)
    for name, value in want.items():
        assert getattr(totals, name) == value, name  # sums bit for bit: numpy's pairwise order
    assert all(type(v) is float and type(i) is int for v, i in totals.maxima.values())
