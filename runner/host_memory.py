"""Reuse freed host memory instead of faulting in fresh pages for every large tensor.

glibc serves allocations above a dynamic threshold (at most 32 MiB) with mmap and returns them to the
kernel when they are freed, so every case's inputs, float64 copies, reference and bound arrive as fresh
pages, each zero-filled by a page fault: for the 45M-element decode gemm that was 300-500 ms of a
case's "inputs" inside a long test process, against 115 ms once its pages were reused
(benchmarks/bench_tool_work.py). `retain_freed_memory` raises glibc's mmap and trim thresholds to a
cap, so blocks up to the cap come from the heap and stay there for the next case, and a free top of the
heap beyond the cap still goes back. The cap is a share of physical memory divided among the test
workers (pytest-xdist), so parallel workers together keep at most a quarter of it.

`reusable_bytes` is the free space this process holds in its heap, which the memory check
(device.free_memory) counts as available: MemAvailable does not see it.

Only glibc has these settings; elsewhere both functions do nothing. E2EGEN_RETAIN_HEAP=0 turns it off.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_SHARE_OF_MEMORY = 4  # all workers together keep at most 1/4 of physical memory
_SMALLEST_CAP = 64 << 20
_LARGEST_CAP = (1 << 31) - 1  # mallopt takes an int


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


@functools.lru_cache(maxsize=None)
def _glibc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.mallinfo2.restype = _Mallinfo2
    except (OSError, AttributeError):  # not glibc (musl, macOS), or a glibc before 2.33 (no mallinfo2)
        return None
    return libc


def retention_cap() -> int:
    """Bytes of freed memory one process may keep: physical memory / (4 · test workers), within bounds."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return _SMALLEST_CAP
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    return max(_SMALLEST_CAP, min(_LARGEST_CAP, physical // (_SHARE_OF_MEMORY * workers)))


@functools.lru_cache(maxsize=None)
def retain_freed_memory() -> bool:
    """Once per process: keep freed blocks up to retention_cap() for reuse. True where it took effect."""
    libc = _glibc()
    if libc is None or os.environ.get("E2EGEN_RETAIN_HEAP", "1") == "0":
        return False
    cap = retention_cap()
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, cap)) & bool(libc.mallopt(_M_TRIM_THRESHOLD, cap))


def reusable_bytes() -> int:
    """Free bytes inside this process's heap (glibc's main arena): reusable without the kernel."""
    libc = _glibc()
    return int(libc.mallinfo2().fordblks) if libc is not None else 0


__all__ = ["retain_freed_memory", "retention_cap", "reusable_bytes"]


def release_free_pages() -> None:
    """Give the pages of every free block of the heap back to the kernel (glibc's malloc_trim(0)): the blocks stay
    the process's and are faulted in again when reused. For a computation in chunks, whose chunk-sized temporaries
    would otherwise stay resident in the holes the blocks kept between chunks leave."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
