"""The running sums of a reduction cut into partials (bound.PartialSums), one numba pass per pair of partials.

For each partial P_t, in the kernel's order, every output element takes

    absolute += |P_t|,   running += P_t,   total += |running|

which torch does in five passes and two temporaries of the output's size (abs, add, add, abs, add). Here
each element of the sums is read and written once per two partials, on every core for large outputs
(metrics.threads): the passes are memory-bound, and the three float64 sums are most of their traffic (48 of
the 52 bytes per element and partial, one at a time; 28 of 32 per partial in pairs). 27 partials of 400K
elements took 6.0 ms on one thread against 10.9 ms for torch's ops one at a time, and 4M-element ones about
half torch's time on two threads (below a million elements, two threads gain nothing: threads.LIGHT_TASK). The
operations are the same IEEE additions and exact absolute values in the same order, so the sums equal
torch's bit for bit (tests/runner/test_partial_passes.py); the first pass writes the sums without reading them.

The partials may be f32 (bound.PartialSums computes them in f32 where that is proven): each is widened to
float64 exactly as it is read, as torch's mixed-dtype add_ widens it. Without numba, off the CPU, or for
anything but contiguous partials of one dtype and shape (f32 or float64) with contiguous float64 sums,
`start` and `accumulate` run torch's ops.
"""
from __future__ import annotations

import torch

from e2egen.metrics import numba_kernels, threads
from e2egen.metrics.backend import numba_path

__all__ = ["accumulate", "start"]

# Tasks of threads.LIGHT_TASK elements: below a million elements a second thread did not pay for its hand-off
# and for the sums' chunks moving between the cores' caches from one partial to the next (27 partials of 400K
# elements took 6.0 ms on one thread, 10.3 ms on two; torch's ops: 6.2 ms on two).

if numba_kernels.AVAILABLE:
    import numba
    import numpy as np

    from e2egen.metrics.numba_kernels import align_stack as _align_stack

    @numba.njit(inline="always", error_model="numpy")
    def _added(p, absolute, running, total):
        """The three sums after one more partial p (widened exactly to float64)."""
        p = np.float64(p)
        running = running + p
        return absolute + abs(p), running, total + abs(running)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _accumulate(part, absolute, running, total, start, stop):
        _align_stack()
        part_c, absolute_c = part[start:stop], absolute[start:stop]  # slices from 0: see fused_numba._reduce_chunk
        running_c, total_c = running[start:stop], total[start:stop]
        for i in range(stop - start):
            absolute_c[i], running_c[i], total_c[i] = _added(part_c[i], absolute_c[i], running_c[i], total_c[i])

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _accumulate_pair(part, second, absolute, running, total, start, stop):
        _align_stack()
        part_c, second_c, absolute_c = part[start:stop], second[start:stop], absolute[start:stop]
        running_c, total_c = running[start:stop], total[start:stop]
        for i in range(stop - start):
            a, r, t = _added(part_c[i], absolute_c[i], running_c[i], total_c[i])
            absolute_c[i], running_c[i], total_c[i] = _added(second_c[i], a, r, t)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _start(part, absolute, running, total, start, stop):
        _align_stack()
        part_c, absolute_c = part[start:stop], absolute[start:stop]
        running_c, total_c = running[start:stop], total[start:stop]
        for i in range(stop - start):
            p = np.float64(part_c[i])
            running_c[i] = p
            absolute_c[i] = abs(p)
            total_c[i] = abs(p)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _start_pair(part, second, absolute, running, total, start, stop):
        _align_stack()
        part_c, second_c, absolute_c = part[start:stop], second[start:stop], absolute[start:stop]
        running_c, total_c = running[start:stop], total[start:stop]
        for i in range(stop - start):
            p = np.float64(part_c[i])
            absolute_c[i], running_c[i], total_c[i] = _added(second_c[i], abs(p), p, abs(p))


def start(parts: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The sums (Σ|P_t|, S, Σ|S_t|), float64, after the first one or two partials: one pass where the numba
    pass applies, else by torch's ops (a widening copy, abs, clone, then accumulate's)."""
    first, *rest = parts
    if _applies(parts):
        sums = tuple(torch.empty(first.shape, dtype=torch.float64) for _ in range(3))
        _over_chunks(_start_pair if rest else _start, parts, sums)
        return sums
    running = first.to(torch.float64, copy=True)
    absolute = running.abs()
    sums = (absolute, running, absolute.clone())
    for part in rest:
        _torch_accumulate(part, *sums)
    return sums


def accumulate(parts: tuple[torch.Tensor, ...], absolute: torch.Tensor, running: torch.Tensor,
               total: torch.Tensor) -> None:
    """Add one or two partials, in order, into the three sums in place: one pass where the numba pass
    applies, else by torch's ops."""
    sums = (absolute, running, total)
    if _applies(parts) and all(t.dtype == torch.float64 and t.is_contiguous() and t.shape == parts[0].shape
                               and t.device == parts[0].device for t in sums):
        _over_chunks(_accumulate_pair if len(parts) == 2 else _accumulate, parts, sums)
        return
    for part in parts:
        _torch_accumulate(part, *sums)


def _torch_accumulate(part: torch.Tensor, absolute: torch.Tensor, running: torch.Tensor, total: torch.Tensor) -> None:
    absolute.add_(part.abs())
    running.add_(part)
    total.add_(running.abs())


def _applies(parts: tuple[torch.Tensor, ...]) -> bool:
    first = parts[0]
    return (1 <= len(parts) <= 2 and numba_path(first.device)
            and all(p.dtype == first.dtype and p.dtype in (torch.float32, torch.float64) and p.is_contiguous()
                    and p.shape == first.shape and p.device == first.device for p in parts))


def _over_chunks(kernel, parts: tuple[torch.Tensor, ...], sums: tuple[torch.Tensor, ...]) -> None:
    flat = [t.view(-1).numpy() for t in (*parts, *sums)]
    threads.over_chunks(flat[0].shape[0], lambda lo, hi: kernel(*flat, lo, hi), threads.LIGHT_TASK)
