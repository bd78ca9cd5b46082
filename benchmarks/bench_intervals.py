"""The element-wise bounds with the numba passes against the torch definitions they replace.

    .venv/bin/python benchmarks/bench_intervals.py [--catalogue configs.toml] [--all] [--repeats 5]

Every element-wise case (pointwise ops) of the PR subset (--all: of the catalogue) runs as a test runs it
(runner.run with the case's bound, on the CPU), alternately with the numba passes (what a run uses:
runner/interval_passes.py's outward rounding, interval products, sums, quotients and monotone
functions, allowance widths, the bound for the output,
metrics.round_to and metrics.ulp in one pass each) and with the torch definitions beside them (the
baseline; E2E_METRICS_BACKEND=torch for those runs), --repeats times each; per op the median bound
time of each, summed over the op's cases, the speed-up, and the bound next to the case's float64
reference and kernel (issue 20's goals: bound <= 0.5x the reference, tool work <= the kernel).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_tool_work import catalogue_cases, family_of, positive  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalogue", default=str(REPO / "configs.toml"))
    parser.add_argument("--all", action="store_true", help="every element-wise case, not only the PR subset")
    parser.add_argument("--repeats", type=positive, default=5, help="timed runs of each case per path (default 5)")
    args = parser.parse_args()

    cases = [c for c in catalogue_cases(args.catalogue) if (args.all or c.pr) and family_of(c.op) == "element-wise"]

    import torch

    from e2egen import runner
    from e2egen.metrics.backend import chosen

    def bound_seconds(case, passes: bool) -> dict[str, float]:
        with chosen("numba" if passes else "torch"):
            return runner.run(case.problem(), impl=case.impl, device="cpu", reference=case.reference,
                              bound=case.bound).timings

    print(f"# {args.catalogue}: {len(cases)} element-wise cases ({'all' if args.all else 'PR subset'}), median of "
          f"{args.repeats} per path; torch {torch.__version__}, {torch.get_num_threads()} threads, load average "
          f"{os.getloadavg()[0]:.1f}")
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for case in cases:
        for passes in (True, False):  # compile and warm both paths before timing
            bound_seconds(case, passes)
        samples: dict[str, list[float]] = defaultdict(list)
        for _ in range(args.repeats):
            for passes in (True, False):
                timings = bound_seconds(case, passes)
                samples["passes" if passes else "torch"].append(timings["bound"])
                if passes:
                    samples["reference"].append(timings["reference"])
                    samples["kernel"].append(timings["kernel"])
        total = sums[case.op]
        total["cases"] += 1
        for key, values in samples.items():
            total[key] += statistics.median(values)
    header = ["op", "cases", "kernel ms", "reference ms", "bound, torch definitions ms (baseline)",
              "bound, numba passes ms", "speed-up", "bound ÷ reference", "bound ÷ kernel"]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    grand: dict[str, float] = defaultdict(float)
    for op, total in sorted(sums.items()):
        for key, value in total.items():
            grand[key] += value
    for op, total in [*sorted(sums.items()), ("all", grand)]:
        print(f"| {op} | {total['cases']:.0f} | {total['kernel'] * 1e3:.1f} | {total['reference'] * 1e3:.1f} | "
              f"{total['torch'] * 1e3:.1f} | {total['passes'] * 1e3:.1f} | {total['torch'] / total['passes']:.2f} | "
              f"{total['passes'] / total['reference']:.1f} | {total['passes'] / total['kernel']:.1f} |")


if __name__ == "__main__":
    main()
