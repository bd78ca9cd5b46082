"""The torch path's per-chunk work under torch.compile: fused C++ on the CPU, Triton on a GPU (issue 20).

Measured, not chosen: compare() does not use this module (backend.py picks
numba or fused_torch); benchmarks/bench_metrics.py --torch-compile times it
against both; docs/performance-history.md ("torch.compile") has the figures
and the decision, README's Performance section the summary. It computes
exactly what fused_torch.partials computes (the sums in another order), and
tests/test_metrics_compiled.py checks that.

Layout: the flat data as a [rows, cols] matrix, a row per chunk (cols =
the chunk size; the last rows copied into a zero-padded pair of rows where n
is not a multiple of it). One compiled function (_fast_rows) reduces every
row to its per-chunk values with the arithmetic of fused_torch._fast_chunk:
the ulp and the rounding quantum from the float64 exponent field, round_T(ref)
and out as magnitude patterns computed from their values, the histogram as
counts of rel >= each edge. Everything is float64 (counts are exact below
2**53): inductor's CPU code does not vectorize int16 or int8 loads, and its
boolean-to-int64 sums were measured several times slower than float ones.
The rest is fused_torch's (fused_torch.finish): chunks with a NaN, an inf or
a value beyond ±max (their max |ref| or max |out| is not <= max_T) take its
general kernel, and the first element of each global maximum is found by its
fast kernel run once more on the chunk that holds it. Formats other than
"ieee" and "fn" take fused_torch's path as they are (its general kernel).

One graph per format, with and without a bound: the format's limits are
constants in the generated code (compiled-in shift amounts vectorize;
run-time ones did not), ftz, rel_floor and the rounding mode are a small
tensor, and both dimensions are marked dynamic, so every size and chunk
reuses it. Compiling takes tens of seconds on the first call; inductor's
cache (TORCHINDUCTOR_CACHE_DIR, by default under the system's temp
directory) serves later processes. Where it cannot compile (no C++ compiler
on the CPU, no Triton on a GPU, a compile error), partials() says why once
and runs fused_torch's eager path instead.
"""
from __future__ import annotations

import contextlib
import functools
import math
import sys
import types
from dataclasses import dataclass

import numpy as np
import torch

from e2egen.metrics import fused_numba, fused_torch
from e2egen.metrics.rounding import ulp_emax
from e2egen.metrics import partials as P
from e2egen.metrics.formats import Format
from e2egen.metrics.names import HISTOGRAM_EDGES
from e2egen.notices import notify_once

MISSING = fused_torch.MISSING
_EDGES = (math.ulp(0.0),) + HISTOGRAM_EDGES  # histogram bucket k + 1: k + 1 of these are <= rel
_F64_EXPONENT = 0x7FF << 52
_F64_MANTISSA = (1 << 52) - 1
_F64_BIAS = 1023

# _fast_rows' columns, in order ("ge<k>": the count of rel >= _EDGES[k]); with a bound, three more.
_GE = tuple(f"ge{k}" for k in range(len(_EDGES)))
_COLUMNS = ("max_diff", "max_rel", "max_rel_old", "max_eps", "max_abs_ref", "max_abs_out", "max_ulp", "sum_u1",
            "sq_u1", "sum_u2", "sq_u2", "sq_diff", "sq_ref", "flushed", "ref_zero") + _GE
_BOUND_COLUMNS = ("max_ratio", "sq_ratio", "min_bound")

# Inline every elementwise value into the reductions that read it (recomputed there) rather than writing it
# to a full-size buffer, and let all the reductions share a loop: with inductor's defaults the pass wrote
# eight full-size intermediates and ran about ten loops over the data.
INDUCTOR_OPTIONS = {"realize_reads_threshold": 1 << 20, "realize_opcount_threshold": 1 << 20,
                    "realize_cpu_opcount_threshold": 1 << 20, "realize_acc_reads_threshold": 1 << 20,
                    "realize_cpu_acc_reads_threshold": 1 << 20, "max_fusion_size": 1 << 10}


@dataclass(frozen=True)
class Constants:
    """What the compiled function knows of a format, compiled in."""

    m: int  # mantissa bits
    emin: int
    ulp_emax: int  # the largest exponent of an ulp (rounding.ulp_exponent)
    max: float
    min_normal: float

    @classmethod
    def of(cls, fmt: Format) -> "Constants":
        return cls(fmt.mantissa_bits, fmt.emin, ulp_emax(fmt), fmt.max, fmt.min_normal)


def _fast_rows(ref: torch.Tensor, out: torch.Tensor, bound: torch.Tensor | None, runtime: torch.Tensor,
               c: Constants) -> torch.Tensor:
    """[rows, len(_COLUMNS) (+ 3 with a bound)] float64 values of each row of ref (float64 [rows, cols]) and
    out ([rows, cols] in T), assuming every element is compared; runtime: (rel_floor, ftz, mode)."""
    rel_floor, ftz, mode = runtime[0], runtime[1] != 0, runtime[2]
    const = (c.m + 2 * _F64_BIAS) << 52  # 2**(m - E) has the bits const - ((E + bias) << 52)
    emin_bits = (c.emin + _F64_BIAS) << 52
    zero = torch.zeros((), dtype=torch.float64, device=ref.device)
    one = torch.ones((), dtype=torch.float64, device=ref.device)
    missing = torch.full((), MISSING, dtype=torch.float64, device=ref.device)

    o = out.to(torch.float64)
    abs_ref = ref.abs()
    abs_bits = abs_ref.view(torch.int64)
    negative = ref < 0
    ref_zero = ref == 0
    # 1/ulp_T(ref): the exponent field of the double below |ref|, clamped to [emin, ulp_emax]
    ulp_field = (abs_bits - 1).clamp(min=emin_bits, max=((c.ulp_emax + _F64_BIAS) << 52) | _F64_MANTISSA)
    inverse = (const - (ulp_field & _F64_EXPONENT)).view(torch.float64)
    flushed = ftz & (o == 0) & (abs_ref < c.min_normal) & ~ref_zero  # accepted: measured with a difference of 0
    diff = torch.where(flushed, zero, (ref - o).abs())
    rel = torch.where(ref_zero, missing, diff / abs_ref)
    rel_old = torch.where(abs_ref > rel_floor, rel, missing)
    eps = diff * inverse

    # |ref| in quanta of T at ref (exact), rounded to nearest even and as the kernel rounds (mode)
    quantum_field = abs_bits.clamp(min=emin_bits) & _F64_EXPONENT
    to_quanta = (const - quantum_field).view(torch.float64)
    quanta = abs_ref * to_quanta
    nearest = torch.round(quanta)
    up = (mode == 2) != negative  # rounding up raises a positive magnitude, lowers a negative one
    kept = torch.where(mode == 0, nearest, torch.where((mode == 1) | ~up, torch.floor(quanta), torch.ceil(quanta)))
    expected = kept / to_quanta
    u1 = torch.where(flushed, zero, (o - torch.where(negative, -expected, expected)) * inverse)
    u2 = torch.where(negative, -u1, torch.where(ref_zero, zero, u1))

    # ulps from round_T(ref) to out: magnitude patterns ((E - emin) << m plus the quanta), signed
    rounded = (((quantum_field >> 52) - (c.emin + _F64_BIAS)) << c.m).to(torch.float64) + nearest
    abs_out = o.abs()
    out_field = abs_out.view(torch.int64).clamp(min=emin_bits) & _F64_EXPONENT
    out_pattern = (((out_field >> 52) - (c.emin + _F64_BIAS)) << c.m).to(torch.float64) \
        + abs_out * (const - out_field).view(torch.float64)
    ulps = (torch.where(negative, -rounded, rounded) - torch.where(o < 0, -out_pattern, out_pattern)).abs()
    ulps = torch.where(flushed, zero, ulps)

    def count(mask):
        return torch.where(mask, one, zero).sum(1)

    values = [diff.amax(1), rel.amax(1), rel_old.amax(1), eps.amax(1), abs_ref.amax(1), abs_out.amax(1),
              ulps.amax(1), u1.sum(1), (u1 * u1).sum(1), u2.sum(1), (u2 * u2).sum(1), (diff * diff).sum(1),
              (ref * ref).sum(1), count(flushed), count(ref_zero)] + [count(rel >= edge) for edge in _EDGES]
    if bound is not None:
        ratio = torch.where(diff == 0, zero, diff / bound.abs())  # 0/0 = 0, d/0 = inf (a -0 bound is 0)
        values += [ratio.amax(1), (ratio * ratio).sum(1), bound.amin(1)]  # amin: NaN shows
    return torch.stack(values, 1)


@functools.cache
def compiled(constants: Constants, has_bound: bool):
    """torch.compile of _fast_rows for one format, with or without a bound: compiles on its first call.

    Each gets a code object of its own: dynamo stops compiling a code object after 8 graphs."""
    def rows(ref, out, bound, runtime):
        return _fast_rows(ref, out, bound if has_bound else None, runtime, constants)

    own = types.FunctionType(rows.__code__.replace(), rows.__globals__, rows.__name__, None, rows.__closure__)
    return torch.compile(own, options=INDUCTOR_OPTIONS)


@contextlib.contextmanager
def as_torch_backend():
    """Inside it, compare()'s torch backend computes its chunks with this module (for benchmarks and tests:
    compare() itself never does)."""
    from e2egen.metrics import compare as _  # noqa: F401 -- loads the module (the package's name is the function)

    module = sys.modules["e2egen.metrics.compare"]
    eager = module.fused_torch
    module.fused_torch = types.SimpleNamespace(partials=partials)
    try:
        yield
    finally:
        module.fused_torch = eager


def unavailable(device: torch.device) -> str | None:
    """Why torch.compile cannot generate code for `device` here, or None."""
    if device.type == "cpu":
        try:
            from torch._inductor import cpp_builder

            cpp_builder.get_cpp_compiler()
        except Exception as error:  # noqa: BLE001 -- any failure means no C++ compiler to use
            return f"inductor found no C++ compiler ({error})"
        return None
    from torch.utils._triton import has_triton

    return None if has_triton() else f"Triton is not installed (inductor needs it for {device.type})"


_failed: dict[tuple, str] = {}  # (device type, format constants, bound?) -> why it failed in this process


def _eager(reason: str, *args):
    notify_once(f"torch.compile failed: {reason}", f"the compiled metrics path cannot run ({reason}); comparing "
                                                   f"with the eager torch path instead (the same results)")
    return fused_torch.partials(*args)


def partials(ref, out, out_bits, bound, fmt: Format, ftz: bool, rel_floor: float, chunk: int,
             mode: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """fused_torch.partials' per-chunk rows, the ordinary chunks from the compiled function."""
    args = (ref, out, out_bits, bound, fmt, ftz, rel_floor, chunk, mode)
    if fmt.encoding not in ("ieee", "fn"):  # as in fused_torch: the others take its general kernel
        return fused_torch.partials(*args)
    key = (ref.device.type, Constants.of(fmt), bound is not None)
    reason = _failed.get(key) or unavailable(ref.device)
    if reason:
        return _eager(reason, *args)
    try:
        values, starts, cols = _compiled_values(ref, out, bound, fmt, ftz, rel_floor, chunk, mode)
    except Exception as error:  # noqa: BLE001 -- inductor's failures have many types; the eager path is exact
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        _failed[key] = f"{type(error).__name__}: {first_line}"
        return _eager(_failed[key], *args)
    return _to_tables(values, starts, cols, *args)


def _compiled_values(ref, out, bound, fmt: Format, ftz: bool, rel_floor: float, chunk: int, mode: int):
    """(_fast_rows' values for every chunk [n_chunks, columns] on the host, chunk starts, chunk size)."""
    n = ref.numel()
    cols = max(chunk, 2)  # a dimension of size 1 would be specialised (another compile)
    whole = n // cols
    runtime = torch.tensor((rel_floor, float(ftz), float(mode)), dtype=torch.float64, device=ref.device)
    function = compiled(Constants.of(fmt), bound is not None)
    blocks = [(0, whole)] if whole >= 2 else []
    done = whole * cols if whole >= 2 else 0
    if done < n:  # the rest, zero-padded to two rows; zeros are compared elements with ref == 0 (corrected)
        blocks.append((done, 2))
    parts, starts = [], []
    for start, rows in blocks:
        size = rows * cols
        views = []
        for t in (ref, out, bound):
            piece = None if t is None else t[start:start + size]
            if piece is not None:
                if piece.numel() < size:
                    piece = torch.cat([piece, piece.new_zeros(size - piece.numel())])
                piece = piece.view(rows, cols)
                torch._dynamo.mark_dynamic(piece, 0)  # one graph for every shape
                torch._dynamo.mark_dynamic(piece, 1)
            views.append(piece)
        # the format's constants stay constants (dynamo would make an int that changed between two compiles
        # of this code a symbol, and the code of every later format slow); the marked dimensions stay dynamic
        with torch._dynamo.config.patch(automatic_dynamic_shapes=False):
            values = function(*views, runtime)
        kept = -(-min(size, n - start) // cols)
        parts.append(values[:kept])
        starts += range(start, start + kept * cols, cols)
    return torch.cat(parts).cpu().numpy(), np.asarray(starts, dtype=np.int64), cols


def _to_tables(values: np.ndarray, starts: np.ndarray, cols: int, ref, out, out_bits, bound, fmt: Format,
               ftz: bool, rel_floor: float, chunk: int, mode: int) -> tuple[np.ndarray, np.ndarray]:
    n = ref.numel()
    col = {name: k for k, name in enumerate(_COLUMNS + (_BOUND_COLUMNS if bound is not None else ()))}

    def v(name):
        return values[:, col[name]]

    if bound is not None and not (v("min_bound") >= 0).all():  # NaN fails too
        raise ValueError(fused_numba.BAD_BOUND_MESSAGE)
    n_chunks = len(starts)
    lengths = np.minimum(cols, n - starts)
    floats = np.full((n_chunks, P.N_FLOAT), MISSING)
    ints = np.full((n_chunks, P.N_INT), -1, np.int64)
    for target, name in ((P.F_ABS, "max_diff"), (P.F_REL, "max_rel"), (P.F_REL_OLD, "max_rel_old"),
                         (P.F_EPS, "max_eps"), (P.F_MAX_ABS_REF, "max_abs_ref"), (P.F_MAX_ABS_OUT, "max_abs_out"),
                         (P.F_SUM_SQ_DIFF, "sq_diff"), (P.F_SUM_SQ_REF, "sq_ref"), (P.F_SUM_S, "sum_u1"),
                         (P.F_SUM_SQ_S, "sq_u1"), (P.F_SUM_T, "sum_u2"), (P.F_SUM_SQ_T, "sq_u2")):
        floats[:, target] = v(name)
    if bound is not None:
        floats[:, P.F_BOUND] = v("max_ratio")
        floats[:, P.F_SUM_SQ_BOUND] = v("sq_ratio")
    else:
        floats[:, P.F_SUM_SQ_BOUND] = 0.0
    with np.errstate(invalid="ignore"):  # NaN in special chunks, replaced below
        ints[:, P.I_ULP] = np.nan_to_num(v("max_ulp"), nan=-1, posinf=-1, neginf=-1).astype(np.int64)
        counts = np.nan_to_num(values[:, [col[c] for c in ("flushed", "ref_zero") + _GE]])
    counts = counts.astype(np.int64)
    flushed, ref_zero, ge = counts[:, 0], counts[:, 1] - (cols - lengths), counts[:, 2:]  # padding: ref == 0
    for count_col, _ in P.COUNTS.values():
        ints[:, count_col] = 0
    ints[:, P.I_FTZ] = flushed
    ints[:, P.I_COMPARED] = lengths
    nonzero = lengths - ref_zero
    ints[:, P.I_HIST:P.I_HIST + P.N_HIST] = np.concatenate(
        [(nonzero - ge[:, 0])[:, None], ge[:, :-1] - ge[:, 1:], ge[:, -1:], ref_zero[:, None]], axis=1)

    # Chunks with a special element: fused_torch's general kernel; the first element of each global maximum
    # in an ordinary chunk: fused_torch's fast kernel on that chunk (values equal to the compiled ones).
    edges = torch.tensor(_EDGES, dtype=torch.float64, device=ref.device)

    def general(ks: list[int]) -> list:
        rows = []
        for k in ks:
            piece = slice(int(starts[k]), int(starts[k]) + cols)
            rows.append(fused_torch._chunk_general(
                ref[piece], out[piece].to(torch.float64), out_bits[piece], None if bound is None else bound[piece],
                fmt, ftz, rel_floor, int(starts[k]), edges, mode))
        return rows

    def fast(k: int):
        return fused_torch.fast_views(ref, out, out_bits, bound, fmt, ftz, rel_floor, mode, int(starts[k]), cols)

    return fused_torch.finish(floats, ints, [int(s) for s in starts], fmt, bound, general, fast)
