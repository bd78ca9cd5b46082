"""Probe of an element-wise kernel's compute format: does it compute f16/bf16 math in f32 and then cast
(the low-precision guide's rule, shared/seeds/004), or in its input format?

The kernel runs on PROBE_SIZE inputs spread evenly (every value exact in the input format) over a
range where the function is well inside its domain and the output format's range. A kernel computing
in f32 lands every output inside the f32-computed acceptance interval rounded to the output format
(in effect one of the two neighbours of the exact result); one computing in its input format
usually does not. The finding is the narrowest format whose interval holds every output: "f32", else the
input format; outputs outside even that interval are a bug no format explains (`unexplained`), and so are
outputs outside the f32 interval at one flat index of most calls and nowhere else (a computation in a narrow
format misses at many positions; a bug at one element misses at the same one in every call).
A function an input-format computation still gets within the f32 interval (square: one rounding)
measures "f32", which is as accurate as the rule asks.
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from e2egen.runner.arithmetic.model import Arithmetic
from e2egen.runner.inputs import round_to_input_format
from e2egen.runner.intervals import Interval, IntervalContext, to_output
from e2egen.runner.kernels import call_on_values
from e2egen.runner.ops.math_functions import MathFunction
from e2egen.runner.ops.numerics import Kernel
from e2egen.runner.problem import Problem

# (x range, y range): inside the domain, results inside f16's range, and steep enough to show rounding
PROBE_RANGES: dict[str, tuple[tuple[float, float], tuple[float, float] | None]] = {
    "exp": ((-8.0, 8.0), None), "log": ((2.0 ** -6, 64.0), None), "log1p": ((-0.5, 8.0), None), "tanh": ((-4.0, 4.0), None),
    "sigmoid": ((-8.0, 8.0), None), "silu": ((-8.0, 8.0), None), "gelu": ((-5.0, 5.0), None),
    "gelu_tanh": ((-5.0, 5.0), None), "rsqrt": ((2.0 ** -6, 64.0), None), "sqrt": ((2.0 ** -6, 64.0), None),
    "square": ((-16.0, 16.0), None), "relu": ((-8.0, 8.0), None), "div": ((-8.0, 8.0), (0.5, 8.0)), "pow": ((0.5, 4.0), (-3.0, 3.0)),
}


TAIL_SHAPE = (1, 1, 15)  # shorter than a vector: all of it in a kernel's scalar tail (torch CPU computes those apart)
TAIL_CALLS = 64


def probe_compute_format(problem: Problem, function: MathFunction, kernel: Kernel, device: torch.device,
                         label: str) -> Arithmetic:
    """The narrowest compute format whose acceptance interval holds every output of `kernel` computing
    `function` on the probe problem (module docstring)."""
    input_format = problem.input_format
    if input_format == "f32":
        return Arithmetic(compute="f32", probed_with=problem.describe(),
                          notes=("f32 inputs: the math is computed in f32 or wider",))
    # one call on the probe shape (the vectorised body), then many tiny ones (the scalar tails, which
    # torch's CPU kernels compute differently)
    calls = [replace(problem, params=replace(problem.params, shape=shape))
             for shape in (problem.params.shape, *(TAIL_SHAPE,) * TAIL_CALLS)]
    arguments = _probe_inputs(function.name, [call.params.shape for call in calls], problem)
    results = [call_on_values(call, kernel, inputs, device, label=label)[call.primary_output]
               for call, inputs in zip(calls, arguments)]
    result = torch.cat([r.flatten() for r in results])
    points = [Interval.point(torch.cat([inputs[name].flatten() for inputs in arguments])) for name in function.inputs]
    offsets = torch.cat([torch.arange(r.numel()) for r in results])  # each output's flat index in its call
    calls = torch.cat([torch.full((r.numel(),), index) for index, r in enumerate(results)])
    outside_counts: dict[str, int] = {}
    for compute in ("f32", input_format):
        interval = to_output(function.interval(*points, IntervalContext(compute=compute)), problem.out_dtype)
        outside = ~((result >= interval.lo) & (result <= interval.hi))
        outside_counts[compute] = int(outside.sum())
        if compute == "f32" and (bug := _one_position(function.name, offsets[outside], calls[outside], len(results))):
            return Arithmetic(compute="f32", probed_with=problem.describe(), unexplained=(bug,))
        if not outside.any():
            notes = () if compute == "f32" else (
                f"{outside_counts['f32']} of {result.numel()} outputs lie outside the f32-computed interval",)
            return Arithmetic(compute=compute, probed_with=problem.describe(), notes=notes)
    worst = f"{outside_counts[input_format]} of {result.numel()} outputs lie outside even an {input_format}-computed interval"
    return Arithmetic(compute=input_format, probed_with=problem.describe(), unexplained=(f"{function.name}: {worst}",))


def _one_position(name: str, offsets: torch.Tensor, calls: torch.Tensor, call_count: int) -> str:
    """The outputs outside the f32-computed interval, when they all sit at one flat index of most calls: no compute
    format errs at one position only (an f16 computation's misses spread over positions: torch's f16 rsqrt
    tails miss 5 to 13 outputs at as many indices), so that is a bug at that element, not an arithmetic (""
    otherwise)."""
    if offsets.numel() < 2 or offsets.unique().numel() != 1 or calls.unique().numel() * 2 <= call_count:
        return ""
    return (f"{name}: the outputs at flat index {int(offsets[0])} of {calls.unique().numel()} of {call_count} calls, and "
            f"no others, lie outside the f32-computed interval: no compute format errs at one position only; a bug "
            f"at that element?")


def _probe_inputs(name: str, shapes: list[tuple[int, ...]], problem: Problem) -> list[dict[str, torch.Tensor]]:
    """Values of each input spread evenly over its probe range, exact in the input format (float64
    tensors): the first call's over the whole range, and the tail calls' together over it again."""
    x_range, y_range = PROBE_RANGES[name]

    def spread(sizes: list[int]) -> list[dict[str, torch.Tensor]]:
        total = sum(sizes)
        values = {"x": torch.linspace(*x_range, total, dtype=torch.float64)}
        if y_range is not None:  # reversed, so that x and y pair differently across the range
            values["y"] = torch.linspace(*y_range, total, dtype=torch.float64).flip(0)
        exact = {key: round_to_input_format(tensor, problem).to(torch.float64) for key, tensor in values.items()}
        return [dict(zip(exact, parts)) for parts in zip(*(tensor.split(sizes) for tensor in exact.values()))]

    sizes = [math.prod(shape) for shape in shapes]
    calls = spread(sizes[:1]) + spread(sizes[1:])
    return [{key: tensor.reshape(shape) for key, tensor in call.items()} for call, shape in zip(calls, shapes)]
