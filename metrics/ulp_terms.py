"""total += count · ulp_T(ref), or (terms · widening) · scale + count · ulp_T(ref), element by element, in one pass.

The output-rounding term of an error bound (runner.bound.OutputRounding) is
c_out ulps of the reference in the output format. Built from metrics.ulp it
costs a dozen passes over the outputs (bit fields, clamps, a power of two, a
NaN select, then a multiply and an add); with small reductions that is most of
the bound's cost. Here numba computes the same ulp from ref's bits (as the
fused comparison does) and adds it in place, on every core. Without numba, on
a device, or with E2E_METRICS_BACKEND=torch, it falls back to metrics.ulp (the
definition); tests check the two agree bit for bit.
"""
from __future__ import annotations

import numpy as np
import torch

from e2egen.metrics import fused_numba, threads
from e2egen.metrics.backend import numba_path
from e2egen.metrics.formats import float_format
from e2egen.metrics.rounding import ulp, ulp_emax

__all__ = ["add_ulps", "scaled_plus_ulps"]

CHUNK = 1 << 16  # the fewest elements per task (threads.chunk_size gives a few tasks per thread)

if fused_numba.AVAILABLE:
    import numba

    from e2egen.metrics.fused_numba import _bits, _float

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _scaled_plus_ulps(total, terms, widening, scale, ref, lo, hi, count, m, emin, emax):
        """total = (terms · widening) · scale + count · ulp_T(ref) over [lo, hi) (terms may be total itself;
        f32 terms are widened to float64 first, exactly)."""
        # branch-free, so that LLVM vectorises it; slices from 0 (see fused_numba._reduce_chunk)
        total_c, terms_c, ref_c = total[lo:hi], terms[lo:hi], ref[lo:hi]
        for i in range(hi - lo):
            x = ref_c[i]
            magnitude = _bits(x) & ((1 << 63) - 1)
            biased = magnitude >> 52
            power_of_two = ((magnitude & ((1 << 52) - 1)) == 0) & (biased > 0)
            exponent = min(max(max(biased, 1) - 1023 - np.int64(power_of_two), emin), emax)  # rounding.ulp_exponent
            gap = _float((exponent - m + 1023) << 52)
            # two roundings, as the unfused torch ops (no contraction to an FMA without fastmath)
            total_c[i] = (np.float64(terms_c[i]) * widening) * scale + count * (x if magnitude > (2047 << 52) else gap)  # NaN stays NaN

def _fused(*tensors: torch.Tensor) -> bool:
    return all(t.is_contiguous() for t in tensors) and numba_path(tensors[0].device)


def _check(total: torch.Tensor, ref: torch.Tensor, terms_dtypes=(torch.float64,)) -> None:
    if total.dtype not in terms_dtypes or ref.dtype != torch.float64 or total.shape != ref.shape:
        raise ValueError(f"add_ulps needs float64 tensors of one shape, got {total.dtype} {tuple(total.shape)} "
                         f"and {ref.dtype} {tuple(ref.shape)}")


def _run(total, terms, widening: float, scale: float, ref, dtype: str, count: float) -> torch.Tensor:
    fmt = float_format(dtype)
    flat_total, flat_terms, flat_ref = total.view(-1).numpy(), terms.view(-1).numpy(), ref.view(-1).numpy()
    args = (float(count), fmt.mantissa_bits, fmt.emin, ulp_emax(fmt))
    threads.over_chunks(flat_ref.shape[0], lambda lo, hi: _scaled_plus_ulps(flat_total, flat_terms, float(widening),
                                                                            float(scale), flat_ref, lo, hi, *args), CHUNK)
    return total


def add_ulps(total: torch.Tensor, ref: torch.Tensor, dtype: str, count: float) -> torch.Tensor:
    """total += count · ulp_T(ref) (in place; float64, same shape) and return total."""
    float_format(dtype)
    _check(total, ref)
    if not _fused(total, ref):
        return total.add_(ulp(ref, dtype).mul_(count))
    return _run(total, total, 1.0, 1.0, ref, dtype, count)


def scaled_plus_ulps(terms: torch.Tensor, scale: float, ref: torch.Tensor, dtype: str, count: float,
                     widening: float = 1.0) -> torch.Tensor:
    """A new tensor (terms · widening) · scale + count · ulp_T(ref) (float64, ref's shape): a product-sum
    bound in one pass. terms may be f32 (a Σ|a·b| summed in f32, runner/magnitude.py), widened to float64
    inside the pass; the result equals widening first in float64, then this, bit for bit."""
    float_format(dtype)
    _check(terms, ref, (torch.float64, torch.float32))
    if not _fused(terms, ref):
        return terms.to(torch.float64).mul(widening).mul_(scale).add_(ulp(ref, dtype).mul_(count))
    return _run(torch.empty_like(ref, dtype=torch.float64, memory_format=torch.contiguous_format), terms, widening,
                scale, ref, dtype, count)
