"""The running sums of a reduction cut into partials (bound.PartialSums), one numba pass per partial.

For each partial P_t, in the kernel's order, every output element takes

    absolute += |P_t|,   running += P_t,   total += |running|

which torch does in five passes and two temporaries of the output's size (abs, add, add, abs, add). Here
each element is read and written once per partial, on every core for large outputs (metrics.threads): 27
partials of 400K elements take 6.0 ms on one thread against 10.9 ms for torch's ops, and 4M-element ones
about half torch's time on two threads (below a million elements, two threads gain nothing: SMALLEST_CHUNK). The
operations are the same IEEE additions and exact absolute values in the same order, so the sums equal
torch's bit for bit (tests/test_partial_passes.py). The first partial starts the sums by torch's abs and
clone (bound.PartialSums), as before.

The partial may be f32 (bound.PartialSums computes them in f32 where that is proven): each is widened to
float64 exactly as it is read, as torch's mixed-dtype add_ widens it. Without numba, off the CPU, or for
anything but contiguous tensors of one shape (float64 sums, an f32 or float64 partial), `accumulate` returns
False and bound.PartialSums runs the torch ops.
"""
from __future__ import annotations

import torch

from e2egen.metrics import fused_numba, threads
from e2egen.metrics.backend import numba_path

__all__ = ["accumulate", "start"]

# A pass costs about 0.5 ns per element on one core. Below a million elements a second thread did not pay
# for its hand-off and for the sums' chunks moving between the cores' caches from one partial to the next:
# 27 partials of 400K elements took 6.0 ms on one thread, 10.3 ms on two (torch's ops: 6.2 ms on two).
SMALLEST_CHUNK = 1 << 20

if fused_numba.AVAILABLE:
    import numba
    import numpy as np

    from e2egen.metrics.fused_numba import _align_stack

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _accumulate(part, absolute, running, total, start, stop):
        _align_stack()
        part_c, absolute_c = part[start:stop], absolute[start:stop]  # slices from 0: see fused_numba._reduce_chunk
        running_c, total_c = running[start:stop], total[start:stop]
        for i in range(stop - start):
            p = np.float64(part_c[i])
            absolute_c[i] += abs(p)
            r = running_c[i] + p
            running_c[i] = r
            total_c[i] += abs(r)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _start(part, absolute, running, total, start, stop):
        _align_stack()
        part_c, absolute_c = part[start:stop], absolute[start:stop]  # slices from 0: see fused_numba._reduce_chunk
        running_c, total_c = running[start:stop], total[start:stop]
        for i in range(stop - start):
            p = np.float64(part_c[i])
            running_c[i] = p
            absolute_c[i] = abs(p)
            total_c[i] = abs(p)


def start(part: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The sums after the first partial, float64: (Σ|P|, S, Σ|S|) = (|P|, P, |P|), in one pass where the
    numba pass applies, else by torch's ops (a widening copy, abs, clone)."""
    if _applies(part):
        sums = tuple(torch.empty(part.shape, dtype=torch.float64) for _ in range(3))
        _over_chunks(_start, part, *sums)
        return sums
    running = part.to(torch.float64, copy=True)
    absolute = running.abs()
    return absolute, running, absolute.clone()


def accumulate(part: torch.Tensor, absolute: torch.Tensor, running: torch.Tensor, total: torch.Tensor) -> bool:
    """Add one partial into the three sums in place; False where this pass does not apply (the caller then
    runs the torch ops)."""
    sums = (absolute, running, total)
    if not _applies(part) or not all(t.dtype == torch.float64 and t.is_contiguous() and t.shape == part.shape
                                     and t.device == part.device for t in sums):
        return False
    _over_chunks(_accumulate, part, *sums)
    return True


def _applies(part: torch.Tensor) -> bool:
    return (fused_numba.AVAILABLE and numba_path(part.device) and part.dtype in (torch.float32, torch.float64)
            and part.is_contiguous())


def _over_chunks(kernel, part: torch.Tensor, *sums: torch.Tensor) -> None:
    flat = [t.view(-1).numpy() for t in (part, *sums)]
    threads.over_chunks(flat[0].shape[0], lambda lo, hi: kernel(*flat, lo, hi), SMALLEST_CHUNK)
