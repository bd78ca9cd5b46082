"""|L| @ |R| (or a convolution of |L| by |R|) for float64 magnitudes, never below its true value, at f32
cost where that is proven.

Composed bounds (attention's, the fused chains') multiply magnitudes that are not inputs: softmax weights
p, p times a score's error, a rounded intermediate. They need a few correct digits and never less than the
exact sum, not float64's sixteen; float64 matmuls of them cost two to three times f32's on the CPU. The
argument (docs/evidence/error-bound.md, "Magnitude products in f32") extends runner/magnitude.py's to operands
that are not f32 values and to sums that may underflow:

* each operand is rounded up to f32 (the least f32 >= |x|), and a non-zero value below f32's smallest
  normal becomes that normal: the f32 product then sums terms at least as large as the exact ones, and no
  operand is subnormal, so treating subnormal operands as zero (DAZ) cannot touch them;
* every f32 operation on non-negative values returns at least (1 - u) times its exact result less 2^-125
  (a subnormal partial result flushed, FTZ, or a subnormal partial sum read as zero, DAZ: each 2^-126 at
  most); a term passes at most K roundings, an output at most 2K operations, whose absolute shortfalls
  are carried on by factors of at most (1 + u)^K < 2, so S <= (Ŝ + K·2^-123) / (1 - u)^K;
* the result is (Ŝ + K·2^-123)·W in float64, W = widening(K + 4) rounded up: four spare roundings more
  than magnitude.py's, for this module's own float64 operations and to spare.

"The exact sum" is that of the operands as given: the float64 roundings that formed them (p², p·E) are
the caller's, first-order terms far below the spare roundings. The premises are checked before the f32
product runs, else the float64 one does, with the same argument at u = 2^-53 and float64's smallest
normal, float64's subnormals as IEEE has them (flushing them, torch.set_flush_denormal, would flush the
float64 reference too; magnitude.py's float64 path takes them so as well): operands on the CPU; torch summing f32 in f32
(matmul precision "highest", oneDNN at IEEE, NNPACK off for the call; the product's result f32); K·u <=
2^-4; every rounded operand finite and K·max|L|·max|R| at most half of f32's largest value. On the CPU
the rounding is one numba pass (the torch definition beside it gives the same bits, with FTZ/DAZ on too:
tests/runner/test_upper_matmul.py).

The raised operands make a term with a tiny weight and a huge partner larger than it is (p ~ 2^-140
against |v| ~ 2^100 counts as 2^-126·2^100): sound, and loose only where such pairs meet.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import torch

from e2egen.metrics import numba_kernels, threads
from e2egen.metrics.backend import numba_path

from e2egen.runner.magnitude import (F32_MAX, F32_MIN_NORMAL, F32_MIN_NORMAL_BITS, F32_UNIT_ROUNDOFF, F64_UNIT_ROUNDOFF,
                        f32_sums_unproven, recorded_magnitudes, widening)

__all__ = ["Magnitudes", "UnwidenedProduct", "magnitudes", "unwidened_matmul", "upper_matmul", "upper_product"]

F64_MIN_NORMAL = 2.0 ** -1022
_SHORTFALL_PER_PRODUCT = 2.0 ** 3  # 2K operations, 2 smallest normals short each, carried on by factors < 2
_SPARE_ROUNDINGS = 4  # beyond widening()'s: this module's own float64 operations, and to spare
F32_FROM_ROWS = 8

Product = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

if numba_kernels.AVAILABLE:
    import numba
    import numpy as np

    from e2egen.metrics.numba_kernels import (
        align_stack as _align_stack, as_int64 as _bits, as_int32 as _bits32,
        as_float64 as _float, as_float32 as _float32)

    @numba.njit(inline="always", error_model="numpy")
    def round_up_pattern(x):
        """The bits of the least f32 >= |x|, a non-zero one below f32's smallest normal raised to it (ordered
        as the values; NaN and inf above every finite one). runner/softmax_passes.py's kernel inlines it, and
        numba's cache notices changes to a kernel's own file only: after changing this, touch that file too."""
        a = _float(_bits(x) & ((1 << 63) - 1))
        nearest = np.float32(a)
        pattern = _bits32(nearest)
        pattern += np.int32(np.float64(nearest) < a)  # one step up (nearest >= 0): the next f32
        return F32_MIN_NORMAL_BITS if 0 < pattern < F32_MIN_NORMAL_BITS else pattern

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _widen_chunk(summed, out, lo, hi, allowance, factor):
        """out[lo:hi] = (summed + allowance) · factor in float64, two roundings (torch's to, add_, mul_)."""
        _align_stack()
        summed_c, out_c = summed[lo:hi], out[lo:hi]
        for i in range(hi - lo):
            out_c[i] = (np.float64(summed_c[i]) + allowance) * factor

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _widen_stacked_rows(summed, out, lo, hi, terms, per_block, allowance, factor):
        """_widen_chunk over rows lo..hi of a product of stacked operands: summed's blocks of terms·per_block
        rows (the terms' rows of one batch entry, one after another) go to out with each term's rows
        together: row (block, term, i) to (term, block, i)."""
        _align_stack()
        blocks = summed.shape[0] // (terms * per_block)
        for r in range(lo, hi):
            block, rest = divmod(r, terms * per_block)
            term, i = divmod(rest, per_block)
            source, target = summed[r], out[(term * blocks + block) * per_block + i]
            for j in range(source.shape[0]):
                target[j] = (np.float64(source[j]) + allowance) * factor

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _round_up_chunk(x, out, lo, hi):
        """round_up_pattern's values of x[lo:hi] into out[lo:hi]; the largest one's bits."""
        _align_stack()
        largest = 0
        x_c, out_c = x[lo:hi], out[lo:hi]
        for i in range(hi - lo):
            pattern = round_up_pattern(x_c[i])
            out_c[i] = _float32(pattern)
            largest = max(largest, pattern)
        return largest


def _raised(up: torch.Tensor) -> torch.Tensor:
    """Non-negative f32 values with the non-zero subnormals raised to the smallest normal, told apart by
    their bits: with DAZ on, a float comparison would read them as zero."""
    bits = up.view(torch.int32)
    return torch.where((bits > 0) & (bits < F32_MIN_NORMAL_BITS), F32_MIN_NORMAL, up)


def _rounded_up_torch(x: torch.Tensor) -> torch.Tensor:
    """_round_up_chunk's values in torch's passes. Not intervals.round_up: its float64 result, cast back to
    f32, would lose an f32 subnormal to FTZ; here the step up is taken in f32."""
    absolute = x.abs()
    nearest = absolute.to(torch.float32)
    above = torch.nextafter(nearest, torch.tensor(math.inf, dtype=torch.float32))
    return _raised(torch.where(nearest.to(absolute.dtype) < absolute, above, nearest))


def rounded_up(x: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(|x| rounded up to f32, subnormals raised to the smallest normal; its largest value, NaN or inf
    where x has one) for a float64 or f32 tensor on the CPU. For an input of the op (or a view of one)
    whose scan was taken while it was widened (runner/magnitude.recorded_magnitudes), that scan's f32
    copy, with the whole input's largest value: no pass of its own."""
    recorded = recorded_magnitudes(x)
    if recorded is not None:
        return recorded
    if x.dtype == torch.float64 and numba_path(x.device) and x.numel():
        source = x.contiguous().view(-1).numpy()
        up = torch.empty(x.shape, dtype=torch.float32)
        target = up.view(-1).numpy()
        parts = threads.over_chunks(source.shape[0], lambda lo, hi: _round_up_chunk(source, target, lo, hi),
                                    threads.LIGHT_TASK)
        return up, float(np.int32(max(parts)).view(np.float32))
    up = _rounded_up_torch(x)
    return up, float(up.max()) if up.numel() else 0.0


class Magnitudes:
    """An operand of upper_matmul: x as given (float64 or f32), its magnitudes in float64 or rounded up to
    f32 made on first use by a product (once where one operand meets several others: attention's |V|)."""

    def __init__(self, values: torch.Tensor):
        self.values = values

    @functools.cached_property
    def float64(self) -> torch.Tensor:
        """|x| in float64, for the float64 product."""
        return self.values.abs().to(torch.float64)

    @functools.cached_property
    def rounded_up(self) -> tuple[torch.Tensor, float] | None:
        """(|x| rounded up to f32, its largest value), or None off the CPU (where no f32 product runs)."""
        return rounded_up(self.values) if self.values.device.type == "cpu" else None


def magnitudes(x: torch.Tensor | Magnitudes) -> Magnitudes:
    return x if isinstance(x, Magnitudes) else Magnitudes(x)


def _f32_pays(left: Magnitudes) -> bool:
    """Whether the f32 product saves more than rounding its operands costs: with fewer rows on the left than
    this, each element of the right operand takes part in so few products that rounding it to f32 costs
    more than the float64 product (decode attention, one query row: its bound 9.3 -> 10.7 ms)."""
    return left.values.dim() >= 2 and left.values.shape[-2] >= F32_FROM_ROWS


@dataclass(frozen=True, eq=False)
class UnwidenedProduct:
    """A product of magnitudes as it was summed (f32 or float64), and the widening that makes it an upper
    bound: (summed + allowance) · factor, in float64."""

    summed: torch.Tensor
    allowance: float
    factor: float

    @classmethod
    def of(cls, summed: torch.Tensor, reduction_size: int) -> "UnwidenedProduct":
        """The module docstring's widening for a sum of at most `reduction_size` products in summed's dtype
        (f32: the premises checked by the caller)."""
        f32 = summed.dtype == torch.float32
        unit, smallest = (F32_UNIT_ROUNDOFF, F32_MIN_NORMAL) if f32 else (F64_UNIT_ROUNDOFF, F64_MIN_NORMAL)
        return cls(summed, reduction_size * _SHORTFALL_PER_PRODUCT * smallest,
                   widening(reduction_size + _SPARE_ROUNDINGS, unit))

    def widened(self) -> torch.Tensor:
        """(summed + allowance) · factor in float64, a new tensor: one numba pass on the CPU, torch's ops
        elsewhere (the same two roundings)."""
        summed = self.summed
        if not (numba_path(summed.device) and summed.numel() and summed.dtype in (torch.float32, torch.float64)):
            return summed.to(torch.float64, copy=True).add_(self.allowance).mul_(self.factor)
        source = summed.contiguous().view(-1).numpy()
        out = torch.empty(summed.shape, dtype=torch.float64)
        target = out.view(-1).numpy()
        threads.over_chunks(source.shape[0], lambda lo, hi: _widen_chunk(source, target, lo, hi, self.allowance,
                                                                        self.factor), threads.LIGHT_TASK)
        return out

    def widened_by_term(self, terms: int, per_block: int) -> torch.Tensor:
        """widened() of a product of stacked operands (rows: per batch entry, `terms` blocks of `per_block`
        rows), its rows regrouped by term: (terms, blocks·per_block, columns), each term's rows contiguous."""
        summed = self.summed
        columns = summed.shape[-1]
        rows = summed.numel() // columns
        out = torch.empty((terms, rows // terms, columns), dtype=torch.float64, device=summed.device)
        if numba_path(summed.device) and summed.numel() and summed.dtype in (torch.float32, torch.float64):
            source, target = summed.contiguous().view(rows, columns).numpy(), out.view(rows, columns).numpy()
            threads.over_chunks(rows, lambda lo, hi: _widen_stacked_rows(
                source, target, lo, hi, terms, per_block, self.allowance, self.factor),
                max(1, threads.LIGHT_TASK // columns))
            return out
        by_term = summed.reshape(-1, terms, per_block, columns).transpose(0, 1)
        out.view(terms, -1, per_block, columns).copy_(by_term)
        return out.add_(self.allowance).mul_(self.factor)


def _within_range(reduction_size: int, left_largest: float, right_largest: float) -> bool:
    """No f32 sum of rounded-up magnitudes with these largest values comes near overflow; False for NaN, inf."""
    return reduction_size * left_largest * right_largest <= F32_MAX / 2


def f32_product_proven(reduction_size: int, left_largest: float, right_largest: float) -> bool:
    """Whether an f32 product of rounded-up magnitudes with these largest values is proven (the module
    docstring): magnitude.f32_sums_unproven's premises, and no overflow."""
    return not f32_sums_unproven(reduction_size) and _within_range(reduction_size, left_largest, right_largest)


def unwidened_product(left: torch.Tensor | Magnitudes, right: torch.Tensor | Magnitudes, product: Product,
                      reduction_size: int, f32_pays: bool = True) -> UnwidenedProduct:
    """product(|left|, |right|) summed in f32 where the module docstring's premises hold (and f32_pays), else
    in float64, with the widening that makes it an upper bound (upper_product)."""
    left, right = magnitudes(left), magnitudes(right)
    k = reduction_size
    summed = None
    # NNPACK's Winograd/FFT convolutions subtract: never in a product of magnitudes (as runner/magnitude.py)
    with torch.backends.nnpack.flags(enabled=False):
        if (f32_pays and not f32_sums_unproven(k) and left.rounded_up is not None and right.rounded_up is not None
                and _within_range(k, left.rounded_up[1], right.rounded_up[1])):
            summed = product(left.rounded_up[0], right.rounded_up[0])
        if summed is None or summed.dtype != torch.float32:  # not the f32 sum analysed: float64
            summed = product(left.float64, right.float64)
    return UnwidenedProduct.of(summed, k)


def upper_product(left: torch.Tensor | Magnitudes, right: torch.Tensor | Magnitudes, product: Product,
                  reduction_size: int, f32_pays: bool = True) -> torch.Tensor:
    """An upper bound on product(|left|, |right|) (float64), for a `product` (a matmul, a convolution) whose
    every output sums at most `reduction_size` products of a left and a right element: the f32 product
    widened where the module docstring's premises hold (and f32_pays), else the float64 one widened alike."""
    return unwidened_product(left, right, product, reduction_size, f32_pays).widened()


def upper_matmul(left: torch.Tensor | Magnitudes, right: torch.Tensor | Magnitudes,
                 product: Product = torch.matmul) -> torch.Tensor:
    """upper_product for a matmul (`product`: torch.matmul, or one with grouped heads), the reduction the
    left operand's last axis; f32 where it pays (_f32_pays)."""
    return unwidened_matmul(left, right, product).widened()


def unwidened_matmul(left: torch.Tensor | Magnitudes, right: torch.Tensor | Magnitudes,
                     product: Product = torch.matmul) -> UnwidenedProduct:
    """upper_matmul before its widening."""
    left = magnitudes(left)
    return unwidened_product(left, right, product, left.values.shape[-1], _f32_pays(left))
