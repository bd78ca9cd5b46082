"""What handing a numba pass to metrics.threads' pool costs, and from which size splitting a pass pays.

    .venv/bin/python benchmarks/bench_threads.py [--repeat 201]

First the pool's own cost: threads.run over 1, 2, 4 and 8 empty tasks (one runs inline on the caller, the
baseline). Then five passes at several sizes, each as one task on the caller (the baseline) and split the
way threads.over_chunks splits it with the smallest task at 2^16 elements (the default before the twelfth
round), 2^18 (threads.SMALLEST_TASK since) and 2^20 (threads.LIGHT_TASK): the widening of an f32 sum into
float64 (upper_matmul._widen_chunk), round_to f16 (rounding_numba._round_to), Σ|a·b|'s f32 scan
(magnitude._narrow_chunk), the rounding up of magnitudes to f32 (upper_matmul._round_up_chunk) and a
bound's ulp term added in place (fused_numba.add_ulps_into).
Median of --repeat.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_bound_passes import median_ms  # noqa: E402
from bench_tool_work import positive  # noqa: E402
from e2egen.metrics import fused_numba, rounding_numba, threads  # noqa: E402
from e2egen.metrics.ulp_terms import ulp_args as _ulp_args  # noqa: E402
from e2egen.metrics.formats import float_format  # noqa: E402
from e2egen.runner import magnitude, upper_matmul  # noqa: E402
from e2egen.runner.host_memory import retain_freed_memory  # noqa: E402


def median_us(fn, repeat: int) -> float:
    fn()  # warm
    return median_ms(fn, repeat) * 1e3


def passes(size: int):
    """(name, work(lo, hi)) for the five passes over `size` elements."""
    summed = torch.rand(size, dtype=torch.float32).numpy()
    widened = torch.empty(size, dtype=torch.float64).numpy()
    values = (torch.rand(size, dtype=torch.float64) * 100).numpy()
    rounded = torch.empty(size, dtype=torch.float64).numpy()
    fmt = float_format("f16")
    args = (fmt.mantissa_bits, fmt.emin, fmt.bias, fmt.max_pattern, float("inf"), bool(fmt.has_negative_zero))
    yield "widen f32 → float64", lambda lo, hi: upper_matmul._widen_chunk(summed, widened, lo, hi, 1e-30, 1.0001)
    yield "round_to f16", lambda lo, hi: rounding_numba._round_to(values, rounded, lo, hi, *args)
    narrowed = torch.empty(size, dtype=torch.float32).numpy()
    yield "Σ|a·b|'s f32 scan", lambda lo, hi: magnitude._narrow_chunk(values, narrowed, lo, hi)
    yield "rounding up to f32", lambda lo, hi: upper_matmul._round_up_chunk(values, narrowed, lo, hi)
    total = torch.rand(size, dtype=torch.float64).numpy()
    ulp_args = (1.0, *_ulp_args("f16"))
    yield "the ulp term, in place", lambda lo, hi: fused_numba.add_ulps_into(total, values, lo, hi, *ulp_args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=positive, default=201)
    args = parser.parse_args()
    retain_freed_memory()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.repeat}")
    print("| empty tasks | pool |")
    print("| --- | --- |")
    for tasks in (1, 2, 4, 8):
        print(f"| {tasks} | {median_us(lambda: threads.run(lambda t: None, range(tasks)), args.repeat):.1f} µs |")
    print()
    print("| pass | elements | one task (baseline) | smallest task 2^16 | 2^18 | 2^20 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for size in (1 << 16, 1 << 17, 1 << 18, 1 << 19, 1 << 20, 1 << 22):
        for name, work in passes(size):
            inline = median_us(lambda: work(0, size), args.repeat)
            split = {smallest: median_us(lambda: threads.over_chunks(size, work, smallest), args.repeat)
                     for smallest in (1 << 16, 1 << 18, 1 << 20)}
            print(f"| {name} | {size:,} | {inline:.1f} µs | "
                  + " | ".join(f"{split[smallest]:.1f} µs" for smallest in sorted(split)) + " |")


if __name__ == "__main__":
    main()
