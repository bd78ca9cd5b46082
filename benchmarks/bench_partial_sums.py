"""The partial sums of a conv bound whose kernel keeps per-tap (bwd_data) or per-sample (bwd_weight) partials
(bound.PartialSums, the computation of runner.bound._partial_sums), against the way the tenth round formed
them, in the same run.

    .venv/bin/python benchmarks/bench_partial_sums.py [--repeat 7] [--threads N]

For each distinct f16 bwd_data and bwd_weight convolution of the PR subset (torch's CPU f16 kernels keep one
partial per tap or per sample, so the bound computes them), on its case's inputs:

  baseline  the tenth round's: every partial in float64 from the float64 inputs (a tap's 1×1 convolution as
            one batched matmul per group, conv_taps.tap_partial; a sample's weight gradient by torch's
            float64 convolution), each added into the sums by one numba pass of its own;
  now       runner.bound._partial_sums as the bound runs it: in f32 where Σ|a·b|'s f32 premises hold,
            every tap's partial from one product (conv_taps.bwd_data_tap_partials), a 3-d sample's weight
            gradient by depth taps, the partials added two per pass (partial_passes);

in the kernel's order, the two interleaved, median of --repeat. Before timing, the script checks that the
accumulation term on f32 partials plus its allowance for their error bounds the float64 partials' term, and
prints that term over the allowance, summed over the outputs (how little the allowance loosens the bound).
"""
from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_tool_work import catalogue_cases, per_case_arguments  # noqa: E402
from e2egen.runner.arithmetic import Arithmetic  # noqa: E402
from e2egen.runner.bound import PartialSums, _partial_sums  # noqa: E402
from e2egen.runner.inputs import generate_inputs  # noqa: E402
from e2egen.runner.magnitude import f32_operands, magnitude  # noqa: E402
from e2egen.runner.ops.product_sum.conv_taps import tap_partial  # noqa: E402
from e2egen.runner.partial_passes import accumulate, start  # noqa: E402
from e2egen.runner.run import reference_inputs  # noqa: E402


def baseline_partials(problem, inputs64):
    """The tenth round's partials: float64, one product (or float64 convolution) each."""
    params, direction = problem.params, problem.direction
    if direction == "bwd_data":
        return (tap_partial("bwd_data", params, inputs64, t) for t in range(math.prod(params.kernel) - 1, -1, -1))
    numerics = problem.numerics
    kernel = numerics.default_kernel("bwd_weight")
    return (numerics.call(kernel, "bwd_weight", params, {"x": inputs64["x"][i:i + 1], "dy": inputs64["dy"][i:i + 1]})
            for i in range(params.n))


def baseline_sums(partials) -> tuple[torch.Tensor, torch.Tensor]:
    """(Σ|P_t|, Σ|S_t|) with one numba pass per partial, as the tenth round added them."""
    sums = None
    for part in partials:
        if sums is None:
            sums = start((part,))
        else:
            accumulate((part,), *sums)
    return sums[0], sums[2]


def partial_problems(catalogue: str):
    """One problem per distinct f16 bwd_data or bwd_weight convolution of the PR subset (its first layout and
    range), with the arithmetic torch's kernel has there (per-tap or per-sample f32 partials added in f16)."""
    seen, problems = set(), []
    for case in sorted(catalogue_cases(catalogue), key=lambda c: c.id):
        if not case.pr or case.direction not in ("bwd_data", "bwd_weight") or case.dtype != "f16" \
                or not case.op.startswith("conv"):
            continue
        problem = case.problem()
        if (problem.params, case.direction) in seen:
            continue
        seen.add((problem.params, case.direction))
        kind = "taps" if case.direction == "bwd_data" else "samples"
        problems.append((case.id, problem, Arithmetic(acc_bits=11, groups=kind, inner_bits=24, partials="stored")))
    return problems


def check_allowance(problem, inputs64, arithmetic, now: PartialSums, base: tuple[torch.Tensor, torch.Tensor]) -> float:
    """Now's accumulation term plus its allowance for the f32 partials' error is at least the float64
    partials' term (the float64 partials carry a 2^-53 allowance of their own, far below 1e-12). Returns the
    term over the allowance, summed over the outputs: how little the allowance loosens the bound."""
    unit = 2 * 2.0 ** -11  # PartialSums' headroom times the f16 accumulator's unit roundoff
    _, _, constant = now.term(arithmetic)
    allowance = magnitude(problem, inputs64) * now.magnitude_share(arithmetic) + constant
    term_now = now.accumulation(arithmetic) + allowance
    term_base = (base[0] + base[1]) * unit
    shortfall = (term_base - term_now).max().item()
    if shortfall > 1e-12 * term_base.abs().max().item():
        raise SystemExit(f"{problem}: the f32 partials' term falls short of the float64 one by {shortfall}")
    return term_base.sum().item() / allowance.sum().item()


def main() -> None:
    args = per_case_arguments(__doc__.splitlines()[0], repeat=7)
    print("| case | partials | output elements | baseline (tenth round) | now | now ÷ baseline | term ÷ allowance |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    total_base = total_now = 0.0
    for case_id, problem, arithmetic in partial_problems(args.catalogue):
        inputs64 = reference_inputs(generate_inputs(problem), torch.device("cpu"), None)

        def baseline():
            return baseline_sums(baseline_partials(problem, inputs64))

        def now():
            return _partial_sums(problem, inputs64, arithmetic, f32_operands(problem, inputs64))

        sums_now = now()
        term_over_allowance = check_allowance(problem, inputs64, arithmetic, sums_now, baseline())
        times = {"baseline": [], "now": []}
        for _ in range(args.repeat):
            for name, fn in (("baseline", baseline), ("now", now)):
                started = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - started)
        base, mine = statistics.median(times["baseline"]), statistics.median(times["now"])
        total_base, total_now = total_base + base, total_now + mine
        print(f"| {case_id} | {sums_now.count} | {sums_now.absolute.numel():,} | "
              f"{base * 1e3:.1f} ms | {mine * 1e3:.1f} ms | {mine / base:.2f} | {term_over_allowance:,.0f} |")
    ratio = total_now / max(total_base, 1e-12)
    print(f"| all | | | {total_base * 1e3:.1f} ms | {total_now * 1e3:.1f} ms | {ratio:.2f} | |")


if __name__ == "__main__":
    main()
