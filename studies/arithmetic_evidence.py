"""Evidence for arithmetic profiles (docs/concepts/arithmetic-profiles.md): how tight the bound is once it
follows the measured arithmetic, and what the catalogue's policy makes of wrong kernels.

    python -m e2egen.studies.arithmetic_evidence [--filter EXPR] [--out docs/evidence/arithmetic.md]

1. torch on this device, every case of the catalogue (or those matching --filter): per cell
   (op, direction, dtype), the bound over the observed error, as medians over each run's elements
   whose error is not 0 (median B / median |ref − out|: exact elements would make it infinite), and
   the worst bound_ratio; "before" evaluates the same runs under
   the model the catalogue declared before profiles (bound.acc = "f16" for f16 bwd_data / bwd_weight,
   f32 elsewhere, inputs as the dtype says), "after" under the measured arithmetic.
2. planted kernels (runner/ops/product_sum/kernels.py: WRONG and PLANTED) on the cells the issue names, through
   the same path as `e2egen run` (generator.execute, the catalogue's require / accept): verdict and reason.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time
from collections import defaultdict

import torch

from e2egen.files import write_text_atomically
from e2egen import metrics, runner
from e2egen.generator.case_filter import case_filter
from e2egen.generator.cases import expand
from e2egen.generator.execute import execute
from e2egen.generator.loader import load_catalogue
from e2egen.runner.ops.product_sum import kernels as alternates

BEFORE_F16_CELLS = {("f16", "bwd_data"), ("f16", "bwd_weight")}
PLANTED_CELLS = ("resnet50/conv2d/l4-3x3-512/bwd_data/f16/nchw/r0", "resnet50/conv2d/l4-3x3-512/bwd_weight/f16/nchw/r0",
                 "resnet50/conv2d/l4-3x3-512/fwd/f32/nchw/r0", "resnet50/conv2d/l4-3x3-512/bwd_weight/f32/nchw/r4")
KERNELS = "e2egen.runner.ops.product_sum.kernels"


@dataclasses.dataclass
class Run:
    cell: tuple[str, str, str]
    case: str
    tight_before: float
    tight_after: float
    ratio_before: float
    ratio_after: float
    arithmetic: str


def before_model(case) -> runner.BoundModel:
    acc = "f16" if (case.dtype, case.direction) in BEFORE_F16_CELLS and case.op.startswith("conv") else "f32"
    return runner.BoundModel(acc=acc)


def _median(t: torch.Tensor) -> float:
    return float(t.median()) if t.numel() else math.nan


def measure(case) -> Run | None:
    problem = case.problem()
    result = runner.run(problem, device="cpu", reference=case.reference, bound=case.bound or runner.BoundModel())
    ref, out = result.ref, result.out.detach().to("cpu", torch.float64).reshape(result.ref.shape)
    fmt = metrics.get_format(result.out_dtype)
    ok = torch.isfinite(ref) & torch.isfinite(out) & (ref.abs() <= fmt.max)
    err = (ref - out).abs()[ok]
    after = result.bound[ok]
    before = result.primary.error_bound.evaluate(before_model(case), ref)[ok]
    inexact = err > 0
    if not bool(inexact.any()):
        return None
    median_err = _median(err[inexact])
    tight = (lambda b: _median(b[inexact]) / median_err)
    ratio = (lambda b: float((err / b).max()))
    return Run((case.op, case.direction, case.dtype), case.id, tight(before), tight(after), ratio(before), ratio(after),
               result.arithmetic.arithmetic.describe_accumulation() if result.arithmetic else "")


def cell_table(runs: list[Run]) -> list[str]:
    by_cell: dict[tuple, list[Run]] = defaultdict(list)
    for r in runs:
        by_cell[r.cell].append(r)
    lines = ["| cell | runs | arithmetic (measured) | median B / median err (inexact elements), before | after | worst run, after "
             "| worst bound_ratio, before | after |", "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for cell in sorted(by_cell):
        group = by_cell[cell]
        kinds = sorted({r.arithmetic for r in group})
        lines.append(f"| {'/'.join(cell)} | {len(group)} | {'; '.join(kinds)} | "
                     f"{statistics.median(r.tight_before for r in group):.3g} | "
                     f"{statistics.median(r.tight_after for r in group):.3g} | {max(r.tight_after for r in group):.3g} | "
                     f"{max(r.ratio_before for r in group):.3g} | {max(r.ratio_after for r in group):.3g} |")
    return lines


def planted(catalogue_path: str, cases_by_id) -> list[str]:
    lines = ["| case | kernel | verdict | reason (first 160 characters) |", "| --- | --- | --- | --- |"]
    for case_id in PLANTED_CELLS:
        case = cases_by_id.get(case_id)
        if case is None:
            continue
        for kernel in (*alternates.WRONG, *alternates.PLANTED):
            outcome = execute(dataclasses.replace(case, impl=f"{KERNELS}:{kernel}"), device="cpu", catalogue=catalogue_path)
            reason = outcome.reason.replace("|", "/")[:160]
            lines.append(f"| {case_id} | {kernel} | {outcome.status} | {reason} |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2egen.studies.arithmetic_evidence", description=__doc__.splitlines()[0])
    parser.add_argument("--catalogue", default="configs.toml")
    parser.add_argument("--filter", default="", help="`e2egen list --filter` terms for part 1")
    parser.add_argument("--out", default=None, help="write the markdown here too")
    parser.add_argument("--no-planted", action="store_true")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    cases = expand(load_catalogue(args.catalogue))
    chosen = [c for c in cases if case_filter(args.filter)(c)] if args.filter else cases
    runs = []
    for index, case in enumerate(chosen, 1):
        try:
            run = measure(case)
        except (runner.Skip, runner.KernelFailure) as skip:
            print(f"[{index}/{len(chosen)}] {case.id}: skipped ({getattr(skip, 'reason', skip)})", file=sys.stderr)
            continue
        if run is not None:
            runs.append(run)
        print(f"[{index}/{len(chosen)}] {case.id}", file=sys.stderr)
    text = ["# Arithmetic profiles: evidence", "",
            f"Command: `python -m e2egen.studies.arithmetic_evidence{' --filter ' + repr(args.filter) if args.filter else ''}`"
            f" (torch {torch.__version__}, CPU), {len(runs)} runs.", "",
            "## The bound against torch's observed error, per cell", "", *cell_table(runs), ""]
    if not args.no_planted:
        text += ["## Wrong and planted kernels under the catalogue's policy", "",
                 *planted(args.catalogue, {c.id: c for c in cases}), ""]
    text.append(f"Took {time.perf_counter() - started:.0f} s.")
    output = "\n".join(text)
    print(output)
    if args.out:
        write_text_atomically(args.out, output + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
