"""Probes of a reduction kernel's arithmetic (sum, mean, max, var): crafted inputs whose exact result
every hypothesis predicts, in the style of the product-sum probes. They run on a small problem of the case's
rank, axes and layout (spec.probe_shape), every output reducing the same values, through
runner.kernels.call_on_values (the inputs stored as a case stores them, the outputs checked).

Accumulator (sum, mean): +1.5·2^15 first, 2^(15-g) in the middle (or second) and -1.5·2^15 last (or
third) among the reduced elements, zeros elsewhere. An accumulator of p bits holds 1.5·2^15 + 2^(15-g)
exactly iff g < p, so the output is 2^(15-g) (divided by N for mean) while g < p and 0 from g = p on,
whatever the order of the additions (unless ±1.5·2^15 meet first, which the adjacent placement rules
out for blocked kernels): the first gap that loses the small term is acc_bits.

Accumulator (var): the two elements 1.5·2^4 + 2^(4-g) and 1.5·2^4 (the reduced size is 2). Their mean
needs g + 2 bits, and a mean that lost 2^(4-g) changes the variance by a factor 2 or more (two-pass:
N·ε² with ε = half the spread; Welford: its running mean drops the whole deviation), so the first gap
that loses it is acc_bits - 1. The inputs must hold 1.5·2^4 + 2^(4-g) exactly (g < the input format's
bits), so with f16 or bf16 inputs the probe sees only whether the accumulator is wider than the input
format; wider is then taken as f32 and a note says so. A one-pass E[x²] - E[x]² kernel loses twice the
bits (the cancellation of squares), so it measures about half its accumulator's width.

Subnormals (sum, mean, max): every reduced element 3·(the input format's smallest subnormal): the
output is N times that (sum) or that (mean, max), or 0 when the kernel flushes them.

cumsum: the last prefix of a row is the row's sum, so the sum probes measure a scan through a kernel that
returns that prefix alone (probe_cumsum); the probe problem is then the sum of the same shape and axis. The
backward's first suffix sum is the row's sum, added from its last element: the same probes, read there.

A wrong result at the smallest gap (2: any arithmetic of 4 bits or more is exact there) is no rounding
but a bug (a dropped or doubled element, a wrong stride, a wrong divisor): it is `unexplained`.
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from e2egen import metrics
from e2egen.runner.arithmetic.model import FORMAT_BITS, Arithmetic
from e2egen.runner.kernels import call_on_values
from e2egen.runner.ops.numerics import Kernel
from e2egen.runner.ops.reductions.spec import Reduction, ReductionParams
from e2egen.runner.problem import Problem

SUM_EXPONENT = 15  # 1.5·2^15 = 49152 fits f16
VAR_EXPONENT = 4  # (2^(4-g))² / 4 stays normal in f16 for every gap the f16 inputs allow
GAPS = tuple(range(2, 29))
VAR_TOLERANCE = 1 / 8  # a kept mean gives the exact variance; a lost one changes it by a factor >= 2


def probe_reduction(reduction: Reduction, problem: Problem, kernel: Kernel, device: torch.device,
                    label: str) -> Arithmetic:
    """The arithmetic of a `reduction` kernel, measured on `problem` (the spec's probe_params problem)."""
    probe = _Probe(problem, kernel, device, label)
    notes: list[str] = []
    subnormals = probe.subnormals(reduction, notes) if reduction != "var" else "kept"
    if reduction == "max":
        notes.append("max adds nothing: no accumulator to probe")
        acc_bits, exact = 24, True
    elif reduction == "var":
        acc_bits, exact = probe.var_accumulator(notes)
    else:
        acc_bits, exact = probe.sum_accumulator(reduction == "mean", notes)
    return Arithmetic(acc_bits=acc_bits, acc_bits_exact=exact, subnormal_inputs=subnormals,
                      probed_with=problem.describe(), notes=tuple(notes), unexplained=tuple(probe.unexplained))


def probe_cumsum(problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
    """The arithmetic of a cumsum kernel: the sum probes, on the last prefix of each row (module docstring)."""
    axis = problem.params.axis
    as_sum = replace(problem, op="sum", direction="fwd", params=ReductionParams(problem.params.shape, (axis,)))
    whole_row = -1 if problem.direction == "fwd" else 0  # the backward's suffix sums: the first sums the row

    def row_sum(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
        return kernel(x, dim=dim[0]).select(dim[0], whole_row)

    return probe_reduction("sum", as_sum, row_sum, device, label)


class _Probe:
    def __init__(self, problem: Problem, kernel: Kernel, device: torch.device, label: str):
        self.problem, self.kernel, self.device, self.label = problem, kernel, device, label
        params = problem.params
        self.axes, self.shape = params.axes, params.shape
        self.kept = [dim for dim in range(len(self.shape)) if dim not in self.axes]
        self.count = params.reduced_size
        self.outputs = math.prod(self.shape[dim] for dim in self.kept)
        self.unexplained: list[str] = []

    def run(self, row: torch.Tensor) -> torch.Tensor:
        """The kernel's outputs (float64, flat) when every output reduces `row` (N float64 values, exact in
        the input format, in the reduced dims' logical order)."""
        flat = row.expand(self.outputs, self.count)
        grouped = flat.reshape(*(self.shape[d] for d in self.kept), *(self.shape[a] for a in self.axes))
        order = self.kept + list(self.axes)
        logical = grouped.permute(*[order.index(dim) for dim in range(len(self.shape))])
        out = call_on_values(self.problem, self.kernel, {"x": logical}, self.device, label=self.label)
        return out[self.problem.primary_output].reshape(-1)

    def _zeros(self) -> torch.Tensor:
        return torch.zeros(self.count, dtype=torch.float64)

    # -- sum and mean -------------------------------------------------------------------------------
    def sum_accumulator(self, mean: bool, notes: list[str]) -> tuple[int, bool]:
        n = self.count
        if n < 3:
            notes.append(f"accumulator not probed: each output reduces {n} elements (3 needed); f32 assumed")
            return 24, False
        last_gap = GAPS[-1]
        if mean and self.problem.out_dtype == "f16":  # the output 2^(15-g)/N stays normal in f16
            last_gap = min(last_gap, SUM_EXPONENT + 14 - math.ceil(math.log2(n)))
        big = 1.5 * 2.0 ** SUM_EXPONENT
        placements = {"spread": (0, n // 2, n - 1), "adjacent": (0, 1, 2)}
        for gap in range(GAPS[0], last_gap + 1):
            tiny = 2.0 ** (SUM_EXPONENT - gap)
            expected = tiny / n if mean else tiny
            for where, (first, middle, last) in placements.items():
                row = self._zeros()
                row[first], row[middle], row[last] = big, tiny, -big
                got = self.run(row)
                lost = got == 0
                wrong = ~(lost | ((got >= expected / 2) & (got <= 2 * expected)))  # NaN (a read of the gaps) too
                odd = got[wrong | lost]
                what = (f"{self.problem.op} of +1.5·2^15, 2^{SUM_EXPONENT - gap}, -1.5·2^15 ({where}) came back "
                        f"{float(odd[0]) if len(odd) else 0.0!r}, expected {expected!r}")
                if gap == GAPS[0] and len(odd):  # any arithmetic of 4 bits or more is exact here
                    self.unexplained.append(what + " (a dropped or doubled element, a wrong stride or divisor?)")
                    return 24, False
                if bool(wrong.any()):
                    notes.append(f"accumulator: {what} or 0; width not measured, f32 assumed")
                    return 24, False
                if bool(lost.any()):
                    return gap, True
        return last_gap + 1, False

    # -- var ------------------------------------------------------------------------------------------
    def var_accumulator(self, notes: list[str]) -> tuple[int, bool]:
        if self.count != 2:
            notes.append(f"accumulator not probed: each output reduces {self.count} element; f32 assumed")
            return 24, False
        correction = self.problem.params.correction
        in_bits = metrics.get_format(self.problem.input_format).mantissa_bits + 1
        base = 1.5 * 2.0 ** VAR_EXPONENT
        last_gap = in_bits - 1  # base + 2^(4-g) must be exact in the input format
        for gap in range(GAPS[0], last_gap + 1):
            spread = 2.0 ** (VAR_EXPONENT - gap)
            expected = spread * spread / 2 / (2 - correction)
            got = self.run(torch.tensor([base + spread, base], dtype=torch.float64))
            wrong = ~((got - expected).abs() <= expected * VAR_TOLERANCE)
            if bool(wrong.any()):
                if gap == GAPS[0]:
                    self.unexplained.append(
                        f"var of [{base + spread!r}, {base!r}] (correction {correction}) came back {float(got[wrong][0])!r}, "
                        f"expected {expected!r} (a wrong divisor, a dropped element, a wrong stride?)")
                    return 24, False
                return gap + 1, True
        if last_gap + 2 >= FORMAT_BITS["f32"]:
            return last_gap + 2, False
        notes.append(f"var accumulator: wider than {self.problem.input_format} (kept every gap up to {last_gap}); "
                     f"{self.problem.input_format} inputs cannot show more, f32 assumed")
        return FORMAT_BITS["f32"], False

    # -- subnormal inputs -------------------------------------------------------------------------------
    def subnormals(self, reduction: str, notes: list[str]) -> str:
        tiny = 3 * metrics.get_format(self.problem.input_format).min_subnormal
        row = torch.full((self.count,), tiny, dtype=torch.float64)
        expected = tiny * self.count if reduction == "sum" else tiny
        got = self.run(row)
        if bool((got == expected).all()):
            return "kept"
        if bool((got == 0).all()):
            return "flushed"
        notes.append(f"subnormals: {reduction} of {self.count} × {tiny!r} came back {float(got[got != expected][0])!r}, "
                     f"expected {expected!r} or 0; taken as kept")
        return "kept"
