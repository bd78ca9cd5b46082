"""total += count · ulp_T(ref), or (terms · widening) · scale + count · ulp_T(ref), element by element, in one pass.

The output-rounding term of an error bound (runner.bound.OutputRounding) is
c_out ulps of the reference in the output format. Built from metrics.ulp it
costs a dozen passes over the outputs (bit fields, clamps, a power of two, a
NaN select, then a multiply and an add); with small reductions that is most of
the bound's cost. Here numba computes the same ulp from ref's bits (as the
fused comparison does) and adds it in place, on every core. Without numba, on
a device, or with E2E_METRICS_BACKEND=torch, it falls back to metrics.ulp (the
definition); tests check the two agree bit for bit.

A product-sum bound need not be written out at all: `ScaledPlusUlps` keeps
its recipe (terms, widening, scale, count, the format), and
`metrics.compare` forms each element inside its own pass (fused_numba's
_scaled_plus_ulp, which this module's pass also uses), so the bound costs no
float64 tensor of the outputs' size; `values` forms that tensor for readers
that want one.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from e2egen.metrics import fused_numba, threads
from e2egen.metrics.backend import numba_path
from e2egen.metrics.formats import float_format
from e2egen.metrics.rounding import ulp, ulp_emax

__all__ = ["ScaledPlusUlps", "add_ulps", "partial_sums_plus_ulps", "scaled_plus_ulps", "ulp_args"]


def _fused(*tensors: torch.Tensor) -> bool:
    return all(t.is_contiguous() for t in tensors) and numba_path(tensors[0].device)


def _check(total: torch.Tensor, ref: torch.Tensor, terms_dtypes=(torch.float64,)) -> None:
    if total.dtype not in terms_dtypes or ref.dtype != torch.float64 or total.shape != ref.shape:
        raise ValueError(f"the ulp terms need float64 tensors of one shape, got {total.dtype} {tuple(total.shape)} "
                         f"and {ref.dtype} {tuple(ref.shape)}")


def ulp_args(dtype: str) -> tuple[int, int, int]:
    """(mantissa bits, emin, the ulp's top exponent) of the format named `dtype`: the format arguments of
    fused_numba's ulp passes (scaled_plus_ulps_into, add_ulps_into, partial_sums_plus_ulps_into)."""
    fmt = float_format(dtype)
    return fmt.mantissa_bits, fmt.emin, ulp_emax(fmt)


def _run(total, terms, widening: float, scale: float, ref, dtype: str, count: float) -> torch.Tensor:
    flat_total, flat_terms, flat_ref = total.view(-1).numpy(), terms.view(-1).numpy(), ref.view(-1).numpy()
    args = (float(count), *ulp_args(dtype))
    threads.over_chunks(flat_ref.shape[0], lambda lo, hi: fused_numba.scaled_plus_ulps_into(
        flat_total, flat_terms, float(widening), float(scale), flat_ref, lo, hi, *args),
        threads.LIGHT_TASK)  # memory-bound, as add_ulps_into (benchmarks/bench_threads.py)
    return total


def _add_in_place(total, ref, dtype: str, count: float) -> torch.Tensor:
    flat_total, flat_ref = total.view(-1).numpy(), ref.view(-1).numpy()
    args = (float(count), *ulp_args(dtype))
    threads.over_chunks(flat_ref.shape[0],
                        lambda lo, hi: fused_numba.add_ulps_into(flat_total, flat_ref, lo, hi, *args),
                        threads.LIGHT_TASK)  # memory-bound (benchmarks/bench_threads.py)
    return total


def add_ulps(total: torch.Tensor, ref: torch.Tensor, dtype: str, count: float) -> torch.Tensor:
    """total += count · ulp_T(ref) (in place; float64, same shape) and return total."""
    float_format(dtype)
    _check(total, ref)
    if not _fused(total, ref):
        return total.add_(ulp(ref, dtype).mul_(count))
    return _add_in_place(total, ref, dtype, count)


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


def partial_sums_plus_ulps(running: torch.Tensor, absolute: torch.Tensor | None, unit: float, constant: float,
                           terms: torch.Tensor, alpha: float, ref: torch.Tensor, dtype: str,
                           count: float) -> torch.Tensor | None:
    """A new tensor unit·(running + absolute) + constant + terms·alpha + count·ulp_T(ref) (absolute None: left
    out), float64, in one numba pass; None where that pass does not apply (the caller forms it with torch's
    ops). running, absolute, ref: float64; terms: f32 or float64; all of ref's shape, contiguous."""
    float_format(dtype)
    tensors = [t for t in (running, absolute, terms, ref) if t is not None]
    if (not _fused(*tensors) or any(t.shape != ref.shape for t in tensors)
            or any(t.dtype != torch.float64 for t in (running, absolute, ref) if t is not None)
            or terms.dtype not in (torch.float64, torch.float32)):
        return None
    out = torch.empty_like(ref, memory_format=torch.contiguous_format)
    flat = [t.view(-1).numpy() for t in (out, running, running if absolute is None else absolute, terms, ref)]
    args = (float(count), *ulp_args(dtype))
    threads.over_chunks(flat[0].shape[0], lambda lo, hi: fused_numba.partial_sums_plus_ulps_into(
        flat[0], flat[1], flat[2], absolute is not None, float(unit), float(constant), flat[3], float(alpha),
        flat[4], lo, hi, *args))
    return out


@dataclass(frozen=True, eq=False)
class ScaledPlusUlps:
    """The bound (terms · widening) · scale + count · ulp_T(ref), per element of ref, not yet formed.

    metrics.compare(ref, out, dtype, bound=this) forms each element inside its own pass where it can (the
    numba pass, and `ref` the very tensor given here), else forms `values` first; either way the
    comparison is the same, bit for bit."""

    terms: torch.Tensor  # f32 or float64, ref's shape
    scale: float
    ref: torch.Tensor  # float64
    dtype: str  # the format whose ulp is counted
    count: float
    widening: float = 1.0

    def __post_init__(self) -> None:
        float_format(self.dtype)
        _check(self.terms, self.ref, (torch.float64, torch.float32))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.ref.shape)

    @functools.cached_property
    def values(self) -> torch.Tensor:
        """The bound as a float64 tensor of ref's shape (formed once, then kept with this object)."""
        return self.formed()

    def formed(self) -> torch.Tensor:
        """The bound as a float64 tensor, not kept here (the one `values` keeps, where it has been formed)."""
        if "values" in self.__dict__:
            return self.__dict__["values"]
        return scaled_plus_ulps(self.terms, self.scale, self.ref, self.dtype, self.count, self.widening)

    def recipe(self) -> tuple[float, float, float, int, int, int]:
        """What the comparison's numba pass needs besides the terms: (widening, scale, count, m, emin, ulp
        emax)."""
        return (float(self.widening), float(self.scale), float(self.count), *ulp_args(self.dtype))

    def at(self, flat_indices: torch.Tensor) -> torch.Tensor:
        """The bound's values at these indices of the flattened tensor (formed for them alone)."""
        terms = self.terms.reshape(-1)[flat_indices.to(self.terms.device)]
        ref = self.ref.reshape(-1)[flat_indices.to(self.ref.device)]
        return scaled_plus_ulps(terms, self.scale, ref, self.dtype, self.count, self.widening)
