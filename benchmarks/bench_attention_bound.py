"""Attention's bound (runner/ops/attention/bound.py, built and evaluated as a run does) with its one pass over the
scores and stacked f32 products (runner/softmax_passes.py), against the same bound in torch's ops, and both
against the float64 reference, in the same run.

    .venv/bin/python benchmarks/bench_attention_bound.py [--repeat 9] [--threads N]

For each distinct attention shape of the PR subset (its first case: dtype, layout and range), on its inputs:

  reference  the float64 rows the reference computes (runner/ops/attention/attention_math.attention_rows: Q·Kᵀ, softmax, P·V);
  baseline   the bound with SoftmaxTimesV._fused switched off: p·E1, p·E2, p² and the least score in torch's
             passes over the scores, each rounded up to f32 on its own, one product with |V| each, as before
             the twelfth round (decode's few query rows in float64);
  now        the bound as it runs: one numba pass over the scores, the three products with |V| stacked;

both built (attention_bound) and evaluated under the default model, the reference's rows computed once
beforehand as in a run; interleaved, median of --repeat. Before timing, the script checks that the two
evaluated bounds agree to the f32 sums' widening.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_tool_work import catalogue_cases, per_case_arguments  # noqa: E402
from e2egen.runner.bound import BoundModel  # noqa: E402
from e2egen.runner.inputs import generate_inputs, reference_inputs  # noqa: E402
from e2egen.runner.ops.attention.attention_math import attention_float64, attention_rows  # noqa: E402
from e2egen.runner.ops.attention.bound import SoftmaxTimesV, attention_bound  # noqa: E402

F32_UNIT_ROUNDOFF = 2.0 ** -24


def attention_problems(catalogue: str):
    """(case id, problem) for the first PR case of each distinct attention shape."""
    seen, problems = set(), []
    for case in sorted(catalogue_cases(catalogue), key=lambda c: c.id):
        if not case.pr or case.op != "attention":
            continue
        problem = case.problem()
        if problem.params in seen:
            continue
        seen.add(problem.params)
        problems.append((case.id, problem))
    return problems


def evaluated_bound(problem, inputs64, rows, fused: bool) -> dict[str, torch.Tensor]:
    original = SoftmaxTimesV.__dict__["_fused"]
    if not fused:
        SoftmaxTimesV._fused = classmethod(lambda cls, *args: None)
    try:
        bounds = attention_bound(problem, inputs64)
    finally:
        SoftmaxTimesV._fused = original
    model = BoundModel()
    return {name: b.evaluate(model, rows.o if name == "o" else rows.lse) for name, b in bounds.items()}


def check_agreement(case_id: str, now: dict, baseline: dict, keys: int) -> None:
    for name, value in now.items():
        apart = (value - baseline[name]).abs()
        if not (apart <= baseline[name] * 4 * (keys + 8) * F32_UNIT_ROUNDOFF).all():
            raise SystemExit(f"{case_id}: the fused bound of {name} differs from torch's ops beyond the f32 widening")


def main() -> None:
    args = per_case_arguments(__doc__.splitlines()[0], repeat=9)
    print("| case | scores | reference | baseline (torch's ops) | now | now ÷ baseline | baseline ÷ reference "
          "| now ÷ reference |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    totals = {"reference": 0.0, "baseline": 0.0, "now": 0.0}
    for case_id, problem in attention_problems(args.catalogue):
        inputs64 = reference_inputs(generate_inputs(problem), torch.device("cpu"), None)
        rows = attention_float64(problem.params, inputs64)  # as the reference leaves them for the bound
        check_agreement(case_id, evaluated_bound(problem, inputs64, rows, True),
                        evaluated_bound(problem, inputs64, rows, False), rows.p.shape[-1])
        runs = {"reference": lambda: attention_rows(problem.params, inputs64),
                "baseline": lambda: evaluated_bound(problem, inputs64, rows, False),
                "now": lambda: evaluated_bound(problem, inputs64, rows, True)}
        times = {name: [] for name in runs}
        for _ in range(args.repeat):
            for name, fn in runs.items():
                started = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - started)
        median = {name: statistics.median(values) for name, values in times.items()}
        for name in totals:
            totals[name] += median[name]
        print(f"| {case_id} | {rows.p.numel():,} | {median['reference'] * 1e3:.2f} ms | "
              f"{median['baseline'] * 1e3:.2f} ms | {median['now'] * 1e3:.2f} ms | "
              f"{median['now'] / median['baseline']:.2f} | {median['baseline'] / median['reference']:.2f} | "
              f"{median['now'] / median['reference']:.2f} |")
    print(f"| all | | {totals['reference'] * 1e3:.1f} ms | {totals['baseline'] * 1e3:.1f} ms | "
          f"{totals['now'] * 1e3:.1f} ms | {totals['now'] / totals['baseline']:.2f} | "
          f"{totals['baseline'] / totals['reference']:.2f} | {totals['now'] / totals['reference']:.2f} |")


if __name__ == "__main__":
    main()
