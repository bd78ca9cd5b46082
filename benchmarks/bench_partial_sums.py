"""The per-tap partial sums of a conv bwd_data bound (bound.PartialSums), against the way they were formed
before issue 20's ninth round, in the same run.

    .venv/bin/python benchmarks/bench_partial_sums.py [--repeat 7] [--threads N]

For each distinct bwd_data convolution of the PR subset (f16: torch's CPU f16 kernels keep one partial
per tap, so the bound computes them), on its case's inputs:

  baseline  each tap's 1×1 convolution by torch's float64 conv_transpose, scattered into the input's
            shape as conv_taps does, and the running sums by torch's ops (abs, add, add, abs, add:
            PartialSums.of with E2E_METRICS_BACKEND=torch);
  now       conv_taps.tap_partial (a batched matmul per group) and PartialSums.of (one numba pass per
            partial);

both in the kernel's order (last tap first), the two interleaved, median of --repeat. The sums are checked
to agree before timing.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_tool_work import catalogue_cases, positive  # noqa: E402
from e2egen.metrics.backend import chosen  # noqa: E402
from e2egen.runner.bound import PartialSums  # noqa: E402
from e2egen.runner.host_memory import retain_freed_memory  # noqa: E402
from e2egen.runner.inputs import generate_inputs  # noqa: E402
from e2egen.runner.ops.conv_taps import _scattered_into_input, tap_offsets, tap_partial  # noqa: E402
from e2egen.runner.run import reference_inputs  # noqa: E402


def baseline_tap(params, inputs64, tap: int) -> torch.Tensor:
    """A bwd_data tap as before: torch's float64 transposed convolution with the tap's 1×1 weight."""
    offsets = tap_offsets(tap, params.kernel)
    w = inputs64["w"][(slice(None), slice(None), *offsets)]
    unit = w.reshape(*w.shape, *([1] * params.spatial_dims))
    if params.c == params.k == params.groups:
        gathered = inputs64["dy"] * w.reshape(1, -1, *([1] * params.spatial_dims))
    else:
        transpose = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[params.spatial_dims - 1]
        gathered = transpose(inputs64["dy"], unit, groups=params.groups)
    return _scattered_into_input(gathered, params, params.tap_positions(offsets))


def bwd_data_problems(catalogue: str):
    """One problem per distinct f16 bwd_data convolution of the PR subset (its first layout and range)."""
    seen, problems = set(), []
    for case in sorted(catalogue_cases(catalogue), key=lambda c: c.id):
        if not case.pr or case.direction != "bwd_data" or case.dtype != "f16" or not case.op.startswith("conv"):
            continue
        problem = case.problem()
        if problem.params in seen:
            continue
        seen.add(problem.params)
        problems.append((case.id, problem))
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalogue", default=str(ROOT / "configs.toml"))
    parser.add_argument("--repeat", type=positive, default=7)
    parser.add_argument("--threads", type=positive, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    retain_freed_memory()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.repeat}")
    print("| case | taps | output elements | baseline | now | now ÷ baseline |")
    print("| --- | --- | --- | --- | --- | --- |")
    total_base = total_now = 0.0
    for case_id, problem in bwd_data_problems(args.catalogue):
        params = problem.params
        inputs64 = reference_inputs(generate_inputs(problem), torch.device("cpu"), None)
        taps = range(math.prod(params.kernel) - 1, -1, -1)

        def baseline():
            with chosen("torch"):  # PartialSums.of's torch ops, as before the numba pass
                sums = PartialSums.of("taps", False, (baseline_tap(params, inputs64, t) for t in taps))
            return sums.absolute, sums.running

        def now():
            sums = PartialSums.of("taps", False, (tap_partial("bwd_data", params, inputs64, t) for t in taps))
            return sums.absolute, sums.running

        for mine, theirs in zip(now(), baseline()):
            torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=0.0)
        times = {"baseline": [], "now": []}
        for _ in range(args.repeat):
            for name, fn in (("baseline", baseline), ("now", now)):
                started = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - started)
        base, mine = statistics.median(times["baseline"]), statistics.median(times["now"])
        total_base, total_now = total_base + base, total_now + mine
        print(f"| {case_id} | {len(taps)} | {math.prod((params.n, params.c, *params.size)):,} | "
              f"{base * 1e3:.1f} ms | {mine * 1e3:.1f} ms | {mine / base:.2f} |")
    ratio = total_now / max(total_base, 1e-12)
    print(f"| all | | | {total_base * 1e3:.1f} ms | {total_now * 1e3:.1f} ms | {ratio:.2f} |")


if __name__ == "__main__":
    main()
