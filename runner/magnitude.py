"""Σ|a_i·b_i| per output element: exactly (float64), or a proven upper bound at f32 cost.

The bound B of a product-sum op multiplies Σ|a·b|; it needs that sum to a few
correct digits and never below its true value, not to 16 digits. A sum of
non-negative terms has no cancellation, so computing it in f32 and widening
the result by the worst case of f32's rounding keeps it an upper bound
(docs/evidence/error-bound.md, "Σ|a·b| in f32"):

    every operation on non-negative f32 values rounded to nearest (product,
    sum, fused multiply-add) returns its exact result times (1 + δ),
    δ >= -u (u = 2^-24), while nothing overflows or underflows. The computed
    sum Ŝ is Σ_i t_i · Π_j (1 + δ_ij), with at most K roundings on each term's
    path (its product and the additions above it in any summation tree, in any
    blocking; adding a zero is exact, so padding taps add none). So
    Ŝ >= (1 - u)^K · S and S <= Ŝ / (1 - u)^K <= Ŝ / (1 - K·u).

`magnitude_bound` returns Ŝ · W with W = 1 / (1 - (K + 4)·u), rounded up: the
four extra roundings cover the float64 operations that follow the sum
(computing W, Ŝ·W, the multiplication by the bound's factor, the addition of
its ulp term). It takes the f32 path only where each premise holds, and the
float64 one otherwise (the same argument with u = 2^-53: every product of two
inputs of a narrow format is exact in float64 and no float64 sum of them
underflows or overflows, so W is 1 + (K + 4)·2^-53 there):

* every input is an f32 value (no rounding on the way in);
* no input is an f32 subnormal (a kernel reading subnormals as zero, DAZ, would
  drop it even where its product with a large partner is normal) and no product
  can underflow (the smallest non-zero |a| times the smallest non-zero |b| is an
  f32 normal), so flushing subnormals (FTZ/DAZ) changes nothing either, and no
  partial sum can overflow (K · max|a| · max|b| stays below half of f32's max);
* the kernel sums in f32: torch's CPU kernels with the float32 matmul
  precision at "highest" and oneDNN's fp32 precision at IEEE (no bf16 or tf32
  shortcuts), NNPACK turned off for the call (its Winograd/FFT convolutions
  subtract), the inputs on the CPU (cuDNN may pick FFT or Winograd
  algorithms, and TF32 is on by default for its convolutions: on a device
  the float64 path runs);
* the op multiplies two inputs (conv, gemm);
* K · u <= 2^-4, so W stays close to 1 (a K that long goes to float64).
"""
from __future__ import annotations

import functools
import math
import weakref
from dataclasses import dataclass
from typing import Mapping

import torch

from e2egen.metrics import numba_kernels, threads
from e2egen.metrics.backend import numba_path
from e2egen.metrics.rounding import flush_subnormals as metrics_flush_subnormals

from e2egen.runner import narrowing
from e2egen.runner.problem import Problem
from e2egen.runner.reference import apply_op

__all__ = ["F32_UNIT_ROUNDOFF", "WidenedSum", "magnitude", "magnitude_bound", "widened_sum", "widening", "F64_UNIT_ROUNDOFF",
           "F32Operands", "F32_MIN_NORMAL", "F64_MIN_NORMAL", "f32_operands", "f32_premises", "signed_sum_error",
           "recorded_magnitudes", "scanned_inputs", "widened_with_scan"]

F32_UNIT_ROUNDOFF = 2.0 ** -24
F64_UNIT_ROUNDOFF = 2.0 ** -53
F32_MIN_NORMAL = 2.0 ** -126
F32_MIN_NORMAL_BITS = 0x00800000  # its bit pattern: below it a non-zero f32 magnitude is subnormal
F64_MIN_NORMAL = 2.0 ** -1022
F32_MAX = float(torch.finfo(torch.float32).max)
MAX_REDUCTION_ROUNDOFF = 2.0 ** -4  # K·u above this: the f32 path would widen too much; float64 instead
_EXTRA_ROUNDINGS = 4  # the float64 operations that follow: W, Ŝ·W, ·(u_in + A), + c_out·ulp


def magnitude(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Σ|a_i·b_i| for every output element: the op on |inputs|, in float64."""
    return apply_op(problem, {name: t.abs() for name, t in inputs64.items()})


def widening(reduction_size: int, unit: float = F32_UNIT_ROUNDOFF) -> float:
    """W >= 1 / (1 - u)^K, with four roundings to spare (see the module docstring); float64, rounded up."""
    roundings = reduction_size + _EXTRA_ROUNDINGS
    shortfall = roundings * unit  # exact: an integer times a power of two
    return math.nextafter(1.0 / (1.0 - shortfall), math.inf)


def reduced_precision_allowed() -> str:
    """Why torch might not sum in f32 here ("" when nothing allows a shortcut)."""
    if torch.get_float32_matmul_precision() != "highest":
        return f"torch.set_float32_matmul_precision({torch.get_float32_matmul_precision()!r})"
    for name, setting in (("torch.backends.fp32_precision", torch.backends.fp32_precision),
                          ("torch.backends.mkldnn.matmul.fp32_precision", torch.backends.mkldnn.matmul.fp32_precision),
                          ("torch.backends.mkldnn.conv.fp32_precision", torch.backends.mkldnn.conv.fp32_precision)):
        if setting not in ("none", "ieee"):
            return f"{name} = {setting!r}"
    return ""


def f32_premises(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> str:
    """Why the f32 path would not be a proven bound for these inputs ("" when it is)."""
    return f32_operands(problem, inputs64).unmet


@dataclass(frozen=True, eq=False)
class F32Operands:
    """What the premises' check found: why the f32 path is not proven here ("" when it is) and, when it is,
    |inputs| as f32 (what Σ|a·b| multiplies)."""

    unmet: str
    magnitudes: Mapping[str, torch.Tensor]


def f32_sums_unproven(reduction_size: int) -> str:
    """Why an f32 sum of `reduction_size` products of magnitudes is outside the analysis, whatever its
    operands ("" where it is not): K·u too large for the widening, or torch allowed to sum f32 in lower
    precision. Shared with runner/upper_matmul.py's products."""
    if reduction_size * F32_UNIT_ROUNDOFF > MAX_REDUCTION_ROUNDOFF:
        return f"reduction of {reduction_size} products is too long for f32"
    reason = reduced_precision_allowed()
    return f"{reason} lets torch sum f32 in lower precision" if reason else ""


def f32_operands(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> F32Operands:
    """The premises of the f32 path, checked with one pass over each input, which also writes |input| as f32:
    in a run, the pass taken while the input was widened (widened_with_scan), else one of its own."""
    if any(t.device.type != "cpu" for t in inputs64.values()):
        return F32Operands("inputs on a device (its kernels may not sum in f32)", {})
    reason = f32_sums_unproven(problem.reduction_size)
    if reason:
        return F32Operands(reason, {})
    if len(inputs64) != 2:
        return F32Operands(f"{len(inputs64)} inputs: the analysis covers products of two", {})
    smallest, largest, narrow = 1.0, 1.0, {}
    for name, t in inputs64.items():
        narrow[name], low, high, exact = _narrowed(t)
        if not exact:
            return F32Operands(f"input {name} has values that are not f32 values", {})
        if low < F32_MIN_NORMAL:  # a product with a large partner may still be normal
            return F32Operands(f"input {name} has f32 subnormal values (read as 0 where subnormals are flushed)", {})
        smallest, largest = smallest * low, largest * high
    if smallest < F32_MIN_NORMAL:
        return F32Operands("a product could underflow in f32", {})
    if largest * problem.reduction_size > F32_MAX / 2:
        return F32Operands("a sum could overflow in f32", {})
    return F32Operands("", narrow)


def signed_sum_error(reduction_size: int, unit: float, min_normal: float) -> tuple[float, float]:
    """(relative, absolute): a computed sum of at most `reduction_size` signed products, in a format of unit
    roundoff `unit`, in any order and blocking, with or without fused multiply-adds, is within
    relative · Σ|a·b| + absolute of its exact value (docs/evidence/error-bound.md, "Partial sums in f32"). relative is
    γ_K = K·u / (1 - K·u) (Higham, Accuracy and Stability of Numerical Algorithms, §3.1), rounded up;
    absolute covers a partial sum that cancels into the subnormal range being flushed (FTZ/DAZ), min_normal
    per operation, 2K operations. Both are float64 values rounded up."""
    roundings = reduction_size * unit  # exact: an integer times a power of two
    relative = math.nextafter(roundings / (1.0 - roundings), math.inf)
    return relative, math.nextafter(2 * reduction_size * min_normal, math.inf)



if numba_kernels.AVAILABLE:
    import numba
    import numpy as np

    from e2egen.metrics.numba_kernels import (
        align_stack as _align_stack, as_int64 as _bits, as_int32 as _bits32,
        as_float64 as _float, as_float32 as _float32)

    from e2egen.runner.narrowing import magnitude_value, pattern_value

    _NO_MAGNITUDE = (1 << 63) - 1  # above every magnitude's bits: the minimum of none
    _F32_INFINITY_BITS = 0x7F800000

    @numba.njit(inline="always", error_model="numpy")
    def _scan_one(value, out, i, smallest, largest, inexact):
        """|value| as f32 into out[i]; the scan's running (smallest non-zero, largest, inexact count).
        Minima and maxima of |value| as integer bit patterns (same order), so that the loops vectorise;
        zeros are kept out of the minimum arithmetically (a conditional expression there kept LLVM from
        vectorising the loop: 5x slower)."""
        magnitude = _bits(value) & ((1 << 63) - 1)
        a = _float(magnitude)
        f = np.float32(a)
        out[i] = f
        missed = 0 if np.float64(f) == a else 1  # NaN and values beyond f32 count here
        return (min(smallest, magnitude + (magnitude == 0) * _NO_MAGNITUDE), max(largest, magnitude),
                inexact + missed)

    @numba.njit(inline="always")
    def _scan_result(smallest, largest, inexact):
        return _float(smallest) if smallest != _NO_MAGNITUDE else np.inf, _float(largest), inexact

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _narrow_chunk(x, out, lo, hi):
        """|x| as f32 into out[lo:hi]; (smallest non-zero |x|, largest |x|, how many did not fit exactly)."""
        _align_stack()
        smallest, largest, inexact = _NO_MAGNITUDE, 0, 0
        x_c, out_c = x[lo:hi], out[lo:hi]
        for i in range(hi - lo):
            smallest, largest, inexact = _scan_one(x_c[i], out_c, i, smallest, largest, inexact)
        return _scan_result(smallest, largest, inexact)

    @numba.njit(inline="always", error_model="numpy")
    def _f32_value(magnitude):
        """The float64 value of an f32 magnitude's bits, by integer arithmetic (narrowing.magnitude_value): a
        subnormal is a float64 normal, so no operation here reads or makes a subnormal, and DAZ or FTZ on the
        thread (set by a kernel library built with fast-math, say) cannot change it, as they change f32 ->
        float64 casts."""
        return magnitude_value(magnitude, 23, 255, 127, False)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _scan_f32_chunk(x, flush, out, lo, hi):
        """_narrow_chunk's scan of x[lo:hi] (f32) into out; with `flush`, of x with its subnormals as zeros
        (metrics.flush_subnormals). On the bits alone (_f32_value): the copy is |x| bit for bit, and its
        smallest and largest values are read from the same bits. No float64 copy: torch's cast writes that
        faster (7 against 19 ms for 45M values written with the scan)."""
        _align_stack()
        smallest, largest, not_a_number = _NO_MAGNITUDE, 0, 0
        x_c, out_c = x[lo:hi], out[lo:hi]
        for i in range(hi - lo):
            magnitude = np.int64(_bits32(x_c[i]) & 0x7FFFFFFF)
            magnitude = 0 if flush and magnitude < F32_MIN_NORMAL_BITS else magnitude
            out_c[i] = _float32(np.int32(magnitude))
            not_a_number += 1 if magnitude > _F32_INFINITY_BITS else 0  # NaN: not an f32 magnitude
            largest = max(largest, magnitude)
            smallest = min(smallest, magnitude + (magnitude == 0) * _NO_MAGNITUDE)
        return (_f32_value(smallest) if smallest != _NO_MAGNITUDE else np.inf, _f32_value(largest),
                not_a_number)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _widen_patterns_chunk(patterns, m, exponent_mask, bias, flush, wide, out, lo, hi):
        """The float64 values of 16-bit patterns[lo:hi] (runner/narrowing.pattern_value's) into wide, with
        _narrow_chunk's scan of those values into out."""
        _align_stack()
        smallest, largest, inexact = _NO_MAGNITUDE, 0, 0
        patterns_c, wide_c, out_c = patterns[lo:hi], wide[lo:hi], out[lo:hi]
        for i in range(hi - lo):
            value = pattern_value(patterns_c[i], m, exponent_mask, bias, flush)
            wide_c[i] = value
            smallest, largest, inexact = _scan_one(value, out_c, i, smallest, largest, inexact)
        return _scan_result(smallest, largest, inexact)


Scan = tuple[torch.Tensor, float, float, bool]  # |t| as f32, smallest non-zero |t| (1.0 if none), largest, exact


def _narrowed(t: torch.Tensor) -> Scan:
    """(|t| as f32, smallest non-zero |t| (1.0 if none), largest |t|, whether every |t| is an f32 value):
    the one recorded when t was widened (widened_with_scan), else a pass over t."""
    recorded = _recorded_scan(t)
    if recorded is not None:
        return recorded
    if t.dtype == torch.float64 and numba_path(t.device):
        source = t.contiguous().view(-1).numpy()
        narrow = torch.empty(t.shape, dtype=torch.float32)
        target = narrow.view(-1).numpy()
        return _scan_of(narrow, threads.over_chunks(source.shape[0],
                                                    lambda lo, hi: _narrow_chunk(source, target, lo, hi),
                                                    threads.LIGHT_TASK))
    # the same in torch's passes
    absolute = t.abs()
    narrow = absolute.to(torch.float32)
    exact = bool((narrow.to(absolute.dtype) == absolute).all())
    largest = float(absolute.max()) if t.numel() else 0.0
    smallest = float(torch.where(absolute == 0, math.inf, absolute).min()) if t.numel() else math.inf
    return narrow, (smallest if math.isfinite(smallest) else 1.0), largest, exact


def _scan_of(narrow: torch.Tensor, parts: list[tuple[float, float, int]]) -> Scan:
    smallest = min((part[0] for part in parts), default=math.inf)
    largest = max((part[1] for part in parts), default=0.0)
    return narrow, (smallest if math.isfinite(smallest) else 1.0), largest, sum(part[2] for part in parts) == 0


# -- the scan taken while the inputs are widened --------------------------------------------------------
# Every input of a product-sum op is read once to widen it to float64 for the reference, before the kernel
# runs; writing |input| as f32 and the premises' figures in that pass spares f32_operands a second pass over
# the float64 copy (8 bytes an element read, 4 written). Each scan is kept for the float64 tensor it
# describes, while that tensor lives and is unchanged (torch's version counter): the record is a function
# of the values, so any reader gets what its own scan would give. The float64 copies are the tool's own;
# the kernel never sees them, so nothing the kernel does can change them or the record.
_SCANS: dict[int, tuple[weakref.ref, int, Scan]] = {}


def _record_scan(wide: torch.Tensor, scan: Scan) -> None:
    if wide.is_inference():  # no version counter to guard the record with: no record
        return
    key = id(wide)
    _SCANS[key] = (weakref.ref(wide, lambda _, key=key: _SCANS.pop(key, None)), wide._version, scan)


def _recorded_scan(t: torch.Tensor) -> Scan | None:
    entry = _SCANS.get(id(t))  # an inference tensor has no version counter (and no record)
    if entry is None or t.is_inference() or entry[0]() is not t or entry[1] != t._version:
        return None
    return entry[2]


def recorded_magnitudes(x: torch.Tensor) -> tuple[torch.Tensor, float] | None:
    """(|x| as f32, an upper bound on its largest value) from the scan recorded for x, or for the float64
    tensor x is a view of, where that scan found every value an f32 normal or zero: there |x| as f32 is
    exact and is its own rounding up (runner/upper_matmul.rounded_up). The largest value is that of the
    whole recorded tensor. None where no such scan is recorded."""
    base = x if x._base is None else x._base
    scan = _recorded_scan(base)
    if (scan is None or not scan[3] or scan[1] < F32_MIN_NORMAL or base.dtype != torch.float64
            or base.storage_offset() != 0):
        return None
    narrow = scan[0]
    if x is not base:  # the same elements of |base| as f32 (both contiguous from offset 0, one shape)
        narrow = narrow.as_strided(x.size(), x.stride(), x.storage_offset())
    return narrow, scan[2]


def widened_with_scan(tensor: torch.Tensor, flush_format: str | None = None) -> torch.Tensor | None:
    """tensor in float64 (exact), and _narrowed's scan of those values recorded for the float64 tensor,
    both from the narrow tensor: f16 and bf16 in one pass, f32 in a scan beside torch's cast. With
    flush_format, the tensor's own format, its subnormals become zeros of their sign (metrics.flush_subnormals)
    in both. None where this does not serve: numba absent or turned off, not a contiguous CPU f16, bf16 or
    f32 tensor, or flush_format another format."""
    own_format = {torch.float32: "f32", **narrowing.NARROW_DTYPES}.get(tensor.dtype)
    if not (numba_path(tensor.device) and tensor.is_contiguous() and tensor.numel() and own_format is not None
            and flush_format in (None, own_format)):
        return None
    flush_subnormals = flush_format is not None
    narrow = torch.empty(tensor.shape, dtype=torch.float32)
    narrow_flat = narrow.view(-1).numpy()
    if tensor.dtype in narrowing.NARROW_DTYPES:  # one pass writes both
        patterns = tensor.view(torch.uint16).reshape(-1).numpy()
        layout = narrowing.pattern_layout(tensor.dtype)
        wide = torch.empty(tensor.shape, dtype=torch.float64)
        wide_flat = wide.view(-1).numpy()
        parts = threads.over_chunks(tensor.numel(), lambda lo, hi: _widen_patterns_chunk(
            patterns, *layout, flush_subnormals, wide_flat, narrow_flat, lo, hi), threads.LIGHT_TASK)
    else:
        source = tensor.view(-1).numpy()
        parts = threads.over_chunks(tensor.numel(), lambda lo, hi: _scan_f32_chunk(
            source, flush_subnormals, narrow_flat, lo, hi), threads.LIGHT_TASK)
        wide = tensor.to(torch.float64)
        if flush_subnormals:
            wide = metrics_flush_subnormals(wide, "f32")
    _record_scan(wide, _scan_of(narrow, parts))
    return wide


def scanned_inputs(problem: Problem) -> frozenset[str]:
    """The inputs whose magnitudes the problem's bound will read as f32 (Op.bound_magnitude_inputs), where
    torch may sum them in f32 at all (f32_sums_unproven over the op's reduction): those are scanned while
    they are widened. Elsewhere a scan would be a write for nothing."""
    names = problem.spec.bound_magnitude_inputs(problem.params, problem.direction)
    return frozenset(names) if names and not f32_sums_unproven(problem.reduction_size) else frozenset()


@dataclass(frozen=True, eq=False)
class WidenedSum:
    """An upper bound on Σ|a·b| kept as it was summed: Ŝ (f32, or float64 already widened) and the factor
    W that makes Ŝ·W a bound. The float64 product is formed once, where a reader needs it; the product-sum
    bound (metrics.ulp_terms.ScaledPlusUlps) widens each element where it forms it, inside the comparison's
    pass, with the same roundings, so neither Ŝ·W nor the bound is written out as a float64 tensor."""

    summed: torch.Tensor
    widening: float

    @functools.cached_property
    def float64(self) -> torch.Tensor:
        """Ŝ·W in float64 (the magnitude_bound value)."""
        exact = self.summed.to(torch.float64)
        return exact if self.widening == 1.0 else exact.mul_(self.widening)


def widened_sum(problem: Problem, inputs64: Mapping[str, torch.Tensor], operands: F32Operands | None = None) -> WidenedSum:
    """An upper bound on Σ|a_i·b_i| per output element: the op on |inputs| in f32, to be widened by
    widening(K), where f32_premises hold; else in float64, widened by float64's widening(K) already.
    `operands`: f32_operands' answer for these inputs, where the caller has it already."""
    k = problem.reduction_size
    if operands is None:
        operands = f32_operands(problem, inputs64)
    if not operands.unmet:
        with torch.backends.nnpack.flags(enabled=False):
            summed = apply_op(problem, operands.magnitudes)
        if summed.dtype == torch.float32:  # else an op whose reference promotes: not the f32 sum analysed
            return WidenedSum(summed, widening(k))
    return WidenedSum(magnitude(problem, inputs64).mul_(widening(k, F64_UNIT_ROUNDOFF)), 1.0)


def magnitude_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """An upper bound on Σ|a_i·b_i| per output element (float64): widened_sum's Ŝ·W."""
    return widened_sum(problem, inputs64).float64
