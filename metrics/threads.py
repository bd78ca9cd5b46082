"""A small thread pool for the CPU paths.

Both CPU paths split the work into chunks and run them on plain Python
threads (numba's kernels release the GIL, torch ops release it while they
compute). Not numba's parallel=True, and not torch's intra-op parallelism on
small pieces: their OpenMP pools wake and synchronise both cores for every
parallel region, which on a busy machine stalls each region for a scheduler
time slice (measured: a fixed ~8 ms per numba call, and the chunked torch path
15x slower on a loaded 2-core box). Threads here synchronise once per call.
The number of threads follows torch.get_num_threads().
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence, TypeVar

import torch

T = TypeVar("T")
_pool: ThreadPoolExecutor | None = None


def thread_count(tasks: int) -> int:
    return max(1, min(torch.get_num_threads(), tasks))


TASKS_PER_THREAD = 4  # enough to even out the threads' shares, few enough that hand-offs stay rare
# The fewest elements per task. Handing tasks to the pool costs 36 µs for two empty ones here, and a split
# pass pays more than that while its work is small: round_to f16 over 131K elements took 135 µs in two
# tasks against 73 µs in one (benchmarks/bench_threads.py). Tasks of SMALLEST_TASK elements pay from about
# 512K elements for passes of half a nanosecond per element or more (round_to: 224 against 311 µs);
# memory-bound passes of a fifth of that (widening a sum, rounding up or scanning magnitudes, adding a
# bound's ulp term, the partial sums' running sums) only from about 4M, so they take LIGHT_TASK.
SMALLEST_TASK = 1 << 18
LIGHT_TASK = 1 << 20


def chunk_size(length: int, smallest: int = SMALLEST_TASK) -> int:
    """Elements per task for a pass over `length` elements: a few tasks per thread, none below
    `smallest` (SMALLEST_TASK above)."""
    threads = max(1, torch.get_num_threads())
    return max(smallest, -(-length // (threads * TASKS_PER_THREAD)))


def over_chunks(length: int, work: Callable[[int, int], T], smallest: int = SMALLEST_TASK) -> list[T]:
    """[work(start, stop) for each piece of [0, length)], the pieces chunk_size(length, smallest) long, spread
    over the threads: the shape of every numba pass over a flat array."""
    chunk = chunk_size(length, smallest)
    return run(lambda start: work(start, min(start + chunk, length)), range(0, length, chunk))


def run(work: Callable[[int], T], tasks: Sequence[int]) -> list[T]:
    """[work(t) for t in tasks], spread over the threads, results in order."""
    global _pool
    threads = thread_count(len(tasks))
    if threads == 1:
        return [work(t) for t in tasks]
    if _pool is None or _pool._max_workers < threads:
        _pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="metrics")
    return list(_pool.map(work, tasks))
