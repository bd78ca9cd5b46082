"""The row sum of softmax, log_softmax and logsumexp: kept in f32, or run in the f16/bf16 input format (a running
sum rounded after each element, or after each tile of up to TILE_KEYS of them)?

One row of LONG_ROW elements along the case's axis (every other dim 1, the case's layout): both ends are 0
(weight 1), every other element -e·ln 2 rounded to the input format F (weight π ≈ 2^-e, e = F's bits + 9:
runner/arithmetic/probing.py's small_weight_exponent). A tile
of up to TILE_KEYS small weights then sums below half an ulp of l >= 1 in F, so an l rounded to F between tiles
stays 1 or 2, from whichever end the kernel starts; held in f32, in any order and any tiles, l = 2 + (LONG_ROW -
2)·π to within f32's rounding. The first end's output tells the two apart by 8 of its ulps or more: softmax's 1/l,
log_softmax's -log l, logsumexp's log l. attention's row-sum probe (runner/ops/attention/probes.py) is the same
experiment through o.

f32 inputs take F = f16. A pairwise (tree) sum in F keeps the small weights together until they meet the ends and is
not told apart. An l far from both readings (an end left out of the sum, or counted twice) is a finding no rounding
explains."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from e2egen import metrics
from e2egen.runner.arithmetic.model import FORMAT_BITS
from e2egen.runner.arithmetic.probing import LONG_ROW, small_weight_exponent
from e2egen.runner.errors import KernelFailure, Skip
from e2egen.runner.kernels import call_on_values
from e2egen.runner.ops.numerics import Kernel
from e2egen.runner.problem import Problem

HALF_FORMATS = ("f16", "bf16")  # the formats a row sum is rounded to; f32 inputs are probed for f16


def probe_row_sum(problem: Problem, kernel: Kernel, device: torch.device, label: str) -> RowSumReading:
    """The row sum's width where it drops the small weights, what the probe says, and an outcome no rounding of l
    explains (a row sum that leaves an element out)."""
    fmt = problem.input_format if problem.input_format in HALF_FORMATS else "f16"
    row = row_problem(problem)
    exponent = small_weight_exponent(FORMAT_BITS[fmt])
    x = torch.full(row.input_shapes["x"], -exponent * math.log(2.0), dtype=torch.float64).reshape(-1)
    x[0] = x[-1] = 0.0
    x = metrics.round_to(x, problem.input_format).reshape(row.input_shapes["x"])
    try:
        got = float(call_on_values(row, kernel, {"x": x}, device, label=label)[row.primary_output].reshape(-1)[0])
    except (Skip, KernelFailure) as declined:
        return RowSumReading(notes=(f"row sum over {LONG_ROW} elements not probed: {declined}",))
    small = LONG_ROW - 2
    kept = 2.0 + small * math.exp(float(x.reshape(-1)[1]))
    described = f"2 + {small}·2^-{exponent}"
    got_sum = _row_sum_of(problem.op, got)
    if abs(got_sum - kept) <= (kept - 2.0) / 4:
        return RowSumReading()
    if abs(got_sum - 2.0) <= (kept - 2.0) / 4:
        return RowSumReading(FORMAT_BITS[fmt], (f"row sum over {LONG_ROW} elements: {described} came back 2: the row "
                                                f"sum runs in {fmt} (rounded after each element or tile of elements)",))
    where = (f"row sum over {LONG_ROW} elements of weights 1 at both ends and 2^-{exponent} between: the output "
             f"{got!r} gives l = {got_sum:.6g}, expected {kept:.6g} (or 2, rounded in {fmt})")
    if min(abs(got_sum - kept), abs(got_sum - 2.0)) > 4 * (kept - 2.0):
        return RowSumReading(unexplained=(f"{where}: an element left out, or one counted twice?",))
    return RowSumReading(notes=(f"{where}; not measured",))


def row_problem(problem: Problem) -> Problem:
    """The case's rank, axis and layout with one row of LONG_ROW elements."""
    params = problem.params
    shape = tuple(LONG_ROW if dim == params.axis else 1 for dim in range(len(params.shape)))
    return replace(problem, params=replace(params, shape=shape, offset=0.0))


def _row_sum_of(op: str, output: float) -> float:
    """The row sum l the first end's output (its weight 1) gives: softmax's 1/l, log_softmax's -log l, logsumexp's
    log l (the row's max is 0); inf for an output no positive l gives."""
    if not math.isfinite(output):
        return math.inf
    if op == "softmax":
        return 1.0 / output if output > 0 else math.inf
    return math.exp(min(-output if op == "log_softmax" else output, 700.0))


@dataclass(frozen=True)
class RowSumReading:
    bits: int | None = None  # the format's significand bits where the row sum drops the small weights
    notes: tuple[str, ...] = ()
    unexplained: tuple[str, ...] = ()
