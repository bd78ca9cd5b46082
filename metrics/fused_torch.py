"""The fused comparison in plain torch ops, chunk by chunk, on any device.

Two kernels per chunk (the rules are in compare.py's docstring;
fused_numba.py applies the same ones and tests check that the two agree):

* the fast one (_fast_chunk) assumes every element is compared (ref within
  ±max, out finite) and computes every metric with about 48 elementwise ops
  into a preallocated workspace (out=, in place): ulp and the rounding
  quantum come from the int64 view of |ref| (clamp and mask the exponent
  field), round_T(ref) is rounded in quanta and cast to T exactly, the ulp
  distance is a difference of ordered bit patterns in int32, the histogram
  bucket is one table look-up on rel's exponent field (see _bucket_table);
  then one amax over the stacked maxima, one sum, a few dots. It records
  only values: no argmax per chunk;
* the general one (_chunk_general) handles every element class with masks
  and where(), and finds its own indices. It runs only for chunks whose fast
  pass saw a NaN, an inf or a value beyond ±max (its max |ref| or max |out|
  is not <= max_T), which ordinary data has none of.

Per-chunk results stay on the device and come to the host once (which also
checks bound >= 0: the fast kernel takes each chunk's min of the bound);
then the few chunks that need it run again: the general kernel for chunks
with special elements, and the fast kernel once more for each chunk holding
a global maximum, to find that maximum's first element (as fused_numba
does). So a CUDA run synchronises at most three times, whatever the number
of chunks. Memory is O(chunk) per thread: a workspace of 11 float64 rows
and a few integer ones, kept between calls on the CPU (threads.py runs the
chunks on a few Python threads).
"""
from __future__ import annotations

import functools
import math
import threading
from typing import Callable

import numpy as np
import torch

from e2egen.metrics import partials as P
from e2egen.metrics import threads
from e2egen.metrics.formats import Format
from e2egen.metrics.names import HISTOGRAM_EDGES
from e2egen.metrics.options import BAD_BOUND_MESSAGE, CompareOptions
from e2egen.metrics.rounding import inverse_ulp, ordered, rounded_pattern, split_float64

MISSING = -1.0  # below every real value of a maximum (all are >= 0)
# False: every chunk takes the general kernel (benchmarks/bench_metrics.py --general times that path).
FAST_PATH = True

_F64_EXPONENT = 0x7FF << 52
_F64_MANTISSA = (1 << 52) - 1
_F64_BIAS = 1023
_HIST_EDGES = (0.0, math.ulp(0.0)) + HISTOGRAM_EDGES  # bucket k of _fast_chunk: k of these are <= rel


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


def _chunk_general(ref, out, out_bits, bound, options: CompareOptions, offset: int, edges):
    """One row of each per-chunk table (partials.py) for a chunk starting at flat index `offset`: every
    metric with masks and where(), for chunks with an element that is not compared (NaN, inf, overflow)."""
    fmt, ftz, rel_floor, mode = options.fmt, options.ftz, options.rel_floor, options.mode
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
        ratio = torch.where(diff == 0, zero, diff / bound.abs())  # a -0 bound is 0: +inf where diff > 0
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




@functools.cache
def _bucket_table() -> tuple[int, ...]:
    """T[e] for every 12-bit top field e of a float64 (sign and exponent), such that for x in that binade
    (bits(x) - T[e]) >> 53 is the number of _HIST_EDGES <= x; negative x (the ref == 0 marker): 0.

    Powers of ten are more than a factor 2 apart, so a binade holds at most one edge strictly inside it
    (two in binade 0: 0.0 at its start and the smallest subnormal). With `inner` that edge's bits (else
    the binade's start) and `at` the number of edges <= inner, T[e] = inner - at * 2**53: then
    bits(x) - T[e] = at * 2**53 + (bits(x) - inner), |bits(x) - inner| < 2**52, and the shift by 53 gives
    at - 1 below the edge and at from it on. Every bit pattern lands in 0..len(_HIST_EDGES).
    """
    edge_bits = [int(np.float64(e).view(np.int64)) for e in _HIST_EDGES]
    table = []
    for top in range(1 << 12):
        start = top << 52
        if top >= 1 << 11:  # negative floats: signed int64 bits, bucket 0
            table.append(start - (1 << 64))
            continue
        inside = [b for b in edge_bits if start < b < start + (1 << 52)]
        inner = inside[0] if inside else start
        at = sum(b <= inner for b in edge_bits)
        table.append(inner - (at << 53))
    return tuple(table)


# The fast kernel's float64 rows; the maxima among them are one block, reduced by one amax.
_ROWS = ("u1", "u2", "diff", "ratio", "abs_ref", "rel", "rel_old", "eps", "out", "scratch", "scratch2")
_MAXIMA = ("diff", "ratio", "abs_ref", "rel", "rel_old", "eps")


class _Workspace:
    """The fast kernel's buffers for chunks of up to `size` elements (one per thread), and views of them
    for each chunk length, made once (building a view costs as much as a small op)."""

    def __init__(self, size: int, fmt: Format, device: torch.device, has_bound: bool):
        self.names = [r for r in _ROWS if has_bound or r != "ratio"]
        self.floats = torch.empty(len(self.names), size, dtype=torch.float64, device=device)
        self.ints = torch.empty(3, size, dtype=torch.int64, device=device)
        # ordered patterns: differences of two 16-bit ones fit in int32, of two f32 ones not
        self.wide = torch.empty(3, size, dtype=torch.int32 if fmt.bits <= 16 else torch.int64, device=device)
        self.rounded = torch.empty(size, dtype=fmt.torch_dtype, device=device)
        # f16/bf16/f8 -> float64 by way of float32: exact, and several times faster on the CPU than directly
        self.f32 = torch.empty(size, dtype=torch.float32, device=device) if fmt.bits < 32 else None
        self.masks = torch.empty(2, size, dtype=torch.bool, device=device)  # ftz's flushes, rounding's direction
        self.table = torch.tensor(_bucket_table(), dtype=torch.int64, device=device)
        self.missing = torch.tensor(MISSING, dtype=torch.float64, device=device)
        self.has_bound = has_bound
        self.maxima = [r for r in _MAXIMA if has_bound or r != "ratio"]
        # the layout of _fast_chunk's result vector
        self.columns = ([("max", r) for r in self.maxima] + [("min", "out"), ("max", "out"), ("min", "ulp"),
                                                              ("max", "ulp"), ("sum", "u1"), ("sum", "u2")]
                        + [("sq", r) for r in ("u1", "u2", "diff", "ref") + (("ratio",) if has_bound else ())]
                        + ([("min", "bound")] if has_bound else []))
        self._views: dict[int, _Views] = {}

    def column(self, kind: str, name: str) -> int:
        return self.columns.index((kind, name))

    def views(self, n: int) -> "_Views":
        if n not in self._views:
            if len(self._views) > 8:  # a kept workspace sees many lengths of last chunks
                self._views.clear()
            self._views[n] = _Views(self, n)
        return self._views[n]


class _Views:
    def __init__(self, ws: _Workspace, n: int):
        f = {name: ws.floats[i, :n] for i, name in enumerate(ws.names)}
        self.f = f
        self.t1, self.t2, self.t3 = ws.ints[:, :n]
        self.w1, self.w2, self.w3 = ws.wide[:, :n]
        self.abs_bits = f["abs_ref"].view(torch.int64)
        self.rel_bits = f["rel"].view(torch.int64)
        self.inverse = self.t1.view(torch.float64)
        self.to_quanta = self.t2.view(torch.float64)
        self.rounded = ws.rounded[:n]
        self.rounded_bits = self.rounded.view({1: torch.int8, 2: torch.int16, 4: torch.int32}[ws.rounded.element_size()])
        self.f32 = None if ws.f32 is None else ws.f32[:n]
        self.flushed, self.up = ws.masks[:, :n]
        first, last = ws.names.index(ws.maxima[0]), ws.names.index(ws.maxima[-1])
        self.maxima = ws.floats[first:last + 1, :n]
        self.sums = ws.floats[:2, :n]


def _fast_chunk(ws: _Workspace, ref, out, out_bits, bound, options: CompareOptions, result: torch.Tensor,
                histogram: torch.Tensor, ftz_count: torch.Tensor) -> _Views:
    """Every metric of a chunk whose elements are all compared, into result (ws.columns), histogram (the
    count of each bucket of _bucket_table) and ftz_count; the arrays stay in the returned views (and the
    ulp distances, as differences of ordered patterns, in w3)."""
    fmt, ftz, rel_floor, mode = options.fmt, options.ftz, options.rel_floor, options.mode
    v = ws.views(ref.numel())
    f = v.f
    abs_ref, diff, o, rel = f["abs_ref"], f["diff"], f["out"], f["rel"]
    t1, t2, t3 = v.t1, v.t2, v.t3
    const = (fmt.mantissa_bits + 2 * _F64_BIAS) << 52  # 2**(m - E) has the bits const - ((E + bias) << 52)
    emin_bits = (fmt.emin + _F64_BIAS) << 52

    o.copy_(out if v.f32 is None else v.f32.copy_(out))
    torch.abs(ref, out=abs_ref)
    torch.sub(ref, o, out=diff).abs_()
    # 1/ulp_T(ref): the exponent field of the double below |ref| (one binade down at a power of two),
    # clamped to [emin, emax] (rounding.ulp_exponent)
    torch.sub(v.abs_bits, 1, out=t1)
    torch.bitwise_right_shift(t1, 63, out=t3)  # -1 where ref == 0, else 0
    t1.clamp_(emin_bits, ((fmt.emax + _F64_BIAS) << 52) | _F64_MANTISSA)
    t1.bitwise_and_(_F64_EXPONENT).neg_().add_(const)
    if ftz:  # accepted flushes: out == ±0 where 0 < |ref| < min_normal; measured with a difference of 0
        flushed = torch.eq(o, 0, out=v.flushed).logical_and_(abs_ref < fmt.min_normal).logical_and_(abs_ref != 0)
        diff.masked_fill_(flushed, 0)
        ftz_count.copy_(flushed.sum())

    torch.div(diff, abs_ref, out=rel)
    # ref == 0: rel = -1 (NaN bits, then replaced); a finite ref's rel is never NaN, and may be inf
    v.rel_bits.bitwise_or_(t3)
    rel.nan_to_num_(nan=MISSING, posinf=math.inf)
    torch.where(abs_ref > rel_floor, rel, ws.missing, out=f["rel_old"])
    torch.mul(diff, v.inverse, out=f["eps"])
    if bound is not None:
        torch.abs(bound, out=f["ratio"])  # a -0 bound is 0: +inf where diff > 0
        torch.div(diff, f["ratio"], out=f["ratio"]).nan_to_num_(nan=0.0, posinf=math.inf)  # 0/0 = 0

    # round_T(|ref|) in quanta of T at ref: |ref| * 2**(m - max(E, emin)) (exact), rounded
    torch.clamp(v.abs_bits, min=emin_bits, out=t2)
    t2.bitwise_and_(_F64_EXPONENT).neg_().add_(const)
    quanta, expected, u1, u2 = f["scratch"], f["scratch2"], f["u1"], f["u2"]
    torch.mul(abs_ref, v.to_quanta, out=quanta)
    if mode != 0:  # the result rounded as the kernel rounds: toward zero (1), up (2), down (3)
        torch.floor(quanta, out=expected)
        if mode != 1:
            up = torch.signbit(ref, out=v.up)
            if mode == 2:
                up.logical_not_()
            torch.where(up, torch.ceil(quanta), expected, out=expected)
        torch.copysign(expected.div_(v.to_quanta), ref, out=expected)
        torch.sub(o, expected, out=u1)
    quanta.round_().div_(v.to_quanta)
    rounded = torch.copysign(quanta, ref, out=quanta)  # round_T(ref) (nearest even), exactly in T
    if mode == 0:
        torch.sub(o, rounded, out=u1)
    u1.mul_(v.inverse)
    if ftz:
        u1.masked_fill_(flushed, 0)
    torch.mul(u1, torch.sign(ref, out=expected), out=u2)

    # ulps from round_T(ref) to out: ordered patterns (negative: minus the magnitude), then their difference
    v.rounded.copy_(rounded)
    magnitude = (1 << (fmt.bits - 1)) - 1
    sign_shift = v.w1.element_size() * 8 - 1
    for wide, bits in ((v.w1, v.rounded_bits), (v.w2, out_bits)):
        wide.copy_(bits)
        torch.bitwise_right_shift(wide, sign_shift, out=v.w3)
        wide.bitwise_and_(magnitude).bitwise_xor_(v.w3).sub_(v.w3)
    ulps = torch.sub(v.w1, v.w2, out=v.w3)
    if ftz:
        ulps.masked_fill_(flushed, 0)

    # histogram bucket: one look-up on rel's top 12 bits (_bucket_table)
    torch.bitwise_right_shift(v.rel_bits, 52, out=t3).bitwise_and_(0xFFF)
    torch.index_select(ws.table, 0, t3, out=t2)
    torch.sub(v.rel_bits, t2, out=t2).bitwise_right_shift_(53)
    histogram.copy_(torch.bincount(t2, minlength=len(_HIST_EDGES) + 1))

    out_range, ulp_range = torch.aminmax(o), torch.aminmax(ulps)
    squares = [torch.dot(u1, u1), torch.dot(u2, u2), torch.dot(diff, diff), torch.dot(ref, ref)]
    if bound is not None:  # and the bound's own check (>= 0, not NaN: amin propagates NaN)
        squares += [torch.dot(f["ratio"], f["ratio"]), torch.amin(bound)]
    scalars = torch.stack([out_range.min, out_range.max, ulp_range.min.to(torch.float64),
                           ulp_range.max.to(torch.float64)])
    torch.cat([v.maxima.amax(1), scalars, v.sums.sum(1), torch.stack(squares)], out=result)
    return v


def _fast_to_rows(ws: _Workspace, results: np.ndarray, histograms: np.ndarray, ftz_counts: np.ndarray,
                  lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fast kernel's per-chunk results as rows of partials.py's tables (indices -1: filled later)."""
    n_chunks = results.shape[0]
    floats = np.full((n_chunks, P.N_FLOAT), MISSING)
    ints = np.full((n_chunks, P.N_INT), -1, np.int64)

    def col(kind, name):
        return results[:, ws.column(kind, name)]

    floats[:, P.F_ABS] = col("max", "diff")
    floats[:, P.F_REL] = col("max", "rel")
    floats[:, P.F_REL_OLD] = col("max", "rel_old")
    floats[:, P.F_EPS] = col("max", "eps")
    floats[:, P.F_MAX_ABS_REF] = col("max", "abs_ref")
    with np.errstate(invalid="ignore"):  # NaN: a chunk for the general kernel
        floats[:, P.F_MAX_ABS_OUT] = np.maximum(-col("min", "out"), col("max", "out"))
    floats[:, P.F_SUM_SQ_DIFF] = col("sq", "diff")
    floats[:, P.F_SUM_SQ_REF] = col("sq", "ref")
    floats[:, P.F_SUM_S] = col("sum", "u1")
    floats[:, P.F_SUM_SQ_S] = col("sq", "u1")
    floats[:, P.F_SUM_T] = col("sum", "u2")
    floats[:, P.F_SUM_SQ_T] = col("sq", "u2")
    if ws.has_bound:
        floats[:, P.F_BOUND] = col("max", "ratio")
        floats[:, P.F_SUM_SQ_BOUND] = col("sq", "ratio")
    else:
        floats[:, P.F_SUM_SQ_BOUND] = 0.0
    ints[:, P.I_ULP] = np.maximum(-col("min", "ulp"), col("max", "ulp")).astype(np.int64)
    for count_col, _ in P.COUNTS.values():
        ints[:, count_col] = 0
    ints[:, P.I_FTZ] = ftz_counts
    ints[:, P.I_COMPARED] = lengths
    # buckets: 0 the ref == 0 marker, 1 rel == 0, ..., 9 rel >= 1; the tables keep "ref == 0" last
    ints[:, P.I_HIST:P.I_HIST + P.N_HIST] = np.concatenate([histograms[:, 1:], histograms[:, :1]], axis=1)
    return floats, ints


_kept = threading.local()  # each CPU thread's last workspace

# The maxima whose first element is searched for in the fast kernel's arrays: (float or int column, index
# column, the row holding the values).
_LOCATE = [(P.F_ABS, P.I_IDX_ABS, "diff"), (P.F_REL, P.I_IDX_REL, "rel"), (P.F_REL_OLD, P.I_IDX_REL_OLD, "rel_old"),
           (P.F_EPS, P.I_IDX_EPS, "eps"), (P.F_BOUND, P.I_IDX_BOUND, "ratio")]


def fast_kernel_applies(fmt: Format) -> bool:
    """Whether the fast kernel can read this format's bits (torch's own layout: "ieee" and "fn"); the
    others take the general kernel on every chunk, as every format does with FAST_PATH off."""
    return FAST_PATH and fmt.encoding in ("ieee", "fn")


def partials(ref, out, out_bits, bound, options: CompareOptions) -> tuple[np.ndarray, np.ndarray]:
    """Per-chunk rows (see partials.py) for flat ref (float64), out (T) and out's bits, bound (float64)
    or None."""
    fmt, chunk = options.fmt, options.chunk
    device = ref.device
    n = ref.numel()
    starts = list(range(0, n, chunk))
    on_cpu = device.type == "cpu"

    def general(start: int):
        stop = start + chunk
        edges = torch.tensor((math.ulp(0.0),) + HISTOGRAM_EDGES, dtype=torch.float64, device=device)
        bound_chunk = None if bound is None else bound[start:stop]
        return _chunk_general(ref[start:stop], out[start:stop].to(torch.float64), out_bits[start:stop], bound_chunk,
                              options, start, edges)

    def run(work, tasks):
        # On the CPU, chunks small enough that each torch op runs serially go to
        # our threads (see threads.py); on a device, ops queue asynchronously.
        return threads.run(work, tasks) if on_cpu else [work(t) for t in tasks]

    if not fast_kernel_applies(fmt):
        float_rows, int_rows = zip(*run(general, starts))
        return torch.stack(float_rows).cpu().numpy(), torch.stack(int_rows).cpu().numpy()

    workspaces: dict[int, _Workspace] = {}
    key = (min(chunk, n), fmt, device, bound is not None)

    def workspace() -> _Workspace:
        thread = threading.get_ident()
        if thread not in workspaces:
            if on_cpu:  # kept between calls: allocating and first touching it costs more than a small comparison
                cached = getattr(_kept, "workspace", None)
                if cached is None or cached[0] != key:
                    _kept.workspace = (key, _Workspace(*key))
                workspaces[thread] = _kept.workspace[1]
            else:  # on a device it is large (chunks of millions): released after the call
                workspaces[thread] = _Workspace(*key)
        return workspaces[thread]

    probe = workspace()
    results = torch.empty(len(starts), len(probe.columns), dtype=torch.float64, device=device)
    histograms = torch.zeros(len(starts), len(_HIST_EDGES) + 1, dtype=torch.int64, device=device)
    ftz_counts = torch.zeros(len(starts), dtype=torch.int64, device=device)

    def fast(k: int) -> _Views:
        start, stop = starts[k], starts[k] + chunk
        return _fast_chunk(workspace(), ref[start:stop], out[start:stop], out_bits[start:stop],
                           None if bound is None else bound[start:stop], options, results[k], histograms[k],
                           ftz_counts[k])

    run(fast, range(len(starts)))
    # The first device-to-host copy.
    results_host = results.cpu().numpy()
    if bound is not None and not (results_host[:, probe.column("min", "bound")] >= 0).all():  # NaN fails too
        raise ValueError(BAD_BOUND_MESSAGE)
    lengths = np.minimum(chunk, n - np.asarray(starts, dtype=np.int64))
    floats, ints = _fast_to_rows(probe, results_host, histograms.cpu().numpy(), ftz_counts.cpu().numpy(), lengths)

    return _finish(floats, ints, starts, fmt, bound, lambda ks: run(general, [starts[k] for k in ks]), fast)


def _finish(floats: np.ndarray, ints: np.ndarray, starts: list[int], fmt: Format, bound,
            general: Callable[[list[int]], list], fast: Callable[[int], _Views]) -> tuple[np.ndarray, np.ndarray]:
    """Complete the fast kernel's per-chunk rows (indices -1): chunks with a special element get the
    general kernel's rows (general(chunk numbers) -> their (float row, int row) pairs), and the first
    element of each global maximum lying in a fast chunk is found in that chunk's arrays (fast(k), the
    fast kernel run on chunk k once more)."""
    # Chunks with an element that is not compared (NaN, inf, beyond ±max): the general kernel instead.
    special = np.flatnonzero(~((floats[:, P.F_MAX_ABS_REF] <= fmt.max) & (floats[:, P.F_MAX_ABS_OUT] <= fmt.max)))
    if special.size:
        float_rows, int_rows = zip(*general([int(k) for k in special]))
        floats[special] = torch.stack(float_rows).cpu().numpy()
        ints[special] = torch.stack(int_rows).cpu().numpy()

    # The first element of each global maximum that lies in a fast chunk: that chunk once more.
    is_special = np.zeros(len(starts), dtype=bool)
    is_special[special] = True
    wanted: dict[int, list[tuple[int, str]]] = {}
    targets = [(floats[:, value_col], index_col, name) for value_col, index_col, name in _LOCATE
               if name != "ratio" or bound is not None]
    targets.append((ints[:, P.I_ULP], P.I_IDX_ULP, "ulp"))
    for column, index_col, name in targets:
        k = int(np.argmax(column))  # first chunk holding the maximum (partials.combine)
        if column[k] >= 0 and not is_special[k]:
            wanted.setdefault(k, []).append((index_col, name))
    for k, names in wanted.items():
        views = fast(k)
        rows = [views.w3.abs() if name == "ulp" else views.f[name] for _, name in names]
        found = torch.stack([torch.argmax(row) for row in rows]).cpu().numpy()  # first maximal element of each
        for (index_col, _), i in zip(names, found):
            ints[k, index_col] = starts[k] + int(i)
    return floats, ints
