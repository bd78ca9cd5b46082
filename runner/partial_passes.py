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

Without numba, off the CPU, or for anything but contiguous float64 tensors of one shape, `accumulate`
returns False and bound.PartialSums runs the torch ops.
"""
from __future__ import annotations

import torch

from e2egen.metrics import fused_numba, threads
from e2egen.metrics.backend import numba_path

__all__ = ["accumulate"]

# A pass costs about 0.5 ns per element on one core. Below a million elements a second thread did not pay
# for its hand-off and for the sums' chunks moving between the cores' caches from one partial to the next:
# 27 partials of 400K elements took 6.0 ms on one thread, 10.3 ms on two (torch's ops: 6.2 ms on two).
SMALLEST_CHUNK = 1 << 20

if fused_numba.AVAILABLE:
    import numba

    from e2egen.metrics.fused_numba import _align_stack

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _accumulate(part, absolute, running, total, start, stop):
        _align_stack()
        part_c, absolute_c = part[start:stop], absolute[start:stop]  # slices from 0: see fused_numba._reduce_chunk
        running_c, total_c = running[start:stop], total[start:stop]
        for i in range(stop - start):
            p = part_c[i]
            absolute_c[i] += abs(p)
            r = running_c[i] + p
            running_c[i] = r
            total_c[i] += abs(r)


def accumulate(part: torch.Tensor, absolute: torch.Tensor, running: torch.Tensor, total: torch.Tensor) -> bool:
    """Add one partial into the three sums in place; False where this pass does not apply (the caller then
    runs the torch ops)."""
    tensors = (part, absolute, running, total)
    if not fused_numba.AVAILABLE or not numba_path(part.device):
        return False
    if not all(t.dtype == torch.float64 and t.is_contiguous() and t.shape == part.shape and t.device == part.device
               for t in tensors):
        return False
    flat = [t.view(-1).numpy() for t in tensors]
    threads.over_chunks(flat[0].shape[0], lambda start, stop: _accumulate(*flat, start, stop), SMALLEST_CHUNK)
    return True
