"""Two passes over a bound's outputs, each against the way it ran before issue 20's eleventh round, in one run.

    .venv/bin/python benchmarks/bench_bound_passes.py [-n 2359296] [--repeat 21]

On N outputs (default: ResNet-50 3×3-512's weight gradient), float64 unless said, median of --repeat, freed
memory kept for reuse as runner.run keeps it:

  ulp term in place    ulp_terms.add_ulps (total += c·ulp_T(ref), fused_numba.add_ulps_into) against the
                       same pass through fused_numba.scaled_plus_ulps_into handed total as its terms too
                       (the baseline: add_ulps before; the overlap check sends LLVM to the scalar loop);
  partial-sums bound   a bound on a kernel's partial sums in one pass (ulp_terms.partial_sums_plus_ulps)
                       against its parts summed by torch's ops as SumOfBounds._summed does (the baseline).

Each pair is checked to agree before it is timed (the first bit for bit, the second to float64's rounding:
it adds in another order). Every pass runs WARM_UP times before any is timed: a process's first few
milliseconds of large element-wise work ran 4x slower here whatever the op (an f32-into-float64 add_
measured first had looked 17x slower than the same add on widened values; in turn, they take the same time).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_tool_work import positive  # noqa: E402
from e2egen.metrics import fused_numba, threads  # noqa: E402
from e2egen.metrics.ulp_terms import add_ulps, partial_sums_plus_ulps, ulp_args as _ulp_args  # noqa: E402
from e2egen.runner.host_memory import retain_freed_memory  # noqa: E402

UNIT, CONSTANT, ALPHA, FORMAT = 2.0 ** -10, 1e-30, 2.1e-6, "f16"  # ALPHA: W·within of that weight gradient
WARM_UP = 10


def aliased_add_ulps(total: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """add_ulps before: scaled_plus_ulps_into with total as its output and its terms."""
    flat_total, flat_ref = total.view(-1).numpy(), ref.view(-1).numpy()
    args = (1.0, *_ulp_args(FORMAT))
    threads.over_chunks(flat_ref.shape[0], lambda lo, hi: fused_numba.scaled_plus_ulps_into(
        flat_total, flat_total, 1.0, 1.0, flat_ref, lo, hi, *args), threads.LIGHT_TASK)  # as ulp_terms' passes
    return total


def torch_partial_sums_bound(running, absolute, terms, ref) -> torch.Tensor:
    """SumOfBounds._summed's way: the accumulation term, Ŝ·(W·within), then the ulp term."""
    total = torch.mul(running, UNIT).add_(absolute, alpha=UNIT).add_(CONSTANT)
    return add_ulps(total.add_(terms, alpha=ALPHA), ref, FORMAT, 1.0)


def median_ms(work, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=positive, default=512 * 512 * 9, help="outputs (default 2359296)")
    parser.add_argument("--repeat", type=positive, default=21)
    args = parser.parse_args()
    if not fused_numba.AVAILABLE:
        print("error: numba is not installed; these passes are numba's", file=sys.stderr)
        sys.exit(2)
    retain_freed_memory()
    generator = torch.Generator().manual_seed(0)
    ref = torch.randn(args.n, dtype=torch.float64, generator=generator) * 100
    running, absolute = (torch.rand(args.n, dtype=torch.float64, generator=generator) for _ in range(2))
    terms = torch.rand(args.n, dtype=torch.float32, generator=generator)
    total = torch.rand(args.n, dtype=torch.float64, generator=generator)

    assert torch.equal(add_ulps(total.clone(), ref, FORMAT, 1.0), aliased_add_ulps(total.clone(), ref))
    torch.testing.assert_close(partial_sums_plus_ulps(running, absolute, UNIT, CONSTANT, terms, ALPHA, ref, FORMAT, 1.0),
                               torch_partial_sums_bound(running, absolute, terms, ref), rtol=1e-14, atol=0.0)
    rows = [
        ("ulp term in place", lambda: aliased_add_ulps(total, ref), lambda: add_ulps(total, ref, FORMAT, 1.0)),
        ("partial-sums bound", lambda: torch_partial_sums_bound(running, absolute, terms, ref),
         lambda: partial_sums_plus_ulps(running, absolute, UNIT, CONSTANT, terms, ALPHA, ref, FORMAT, 1.0)),
    ]
    for _ in range(WARM_UP):
        for _, before, now in rows:
            before()
            now()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.n:,} outputs, median of {args.repeat}")
    print("| pass | before (baseline) | now | now ÷ before | ns per element now |")
    print("| --- | --- | --- | --- | --- |")
    for name, before, now in rows:
        base, mine = median_ms(before, args.repeat), median_ms(now, args.repeat)
        print(f"| {name} | {base:.2f} ms | {mine:.2f} ms | {mine / base:.2f} | {mine * 1e6 / args.n:.2f} |")


if __name__ == "__main__":
    main()
