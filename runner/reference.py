"""The float64 reference and its variants (the seed's "better validation function").

plain           the op in float64 on the exact (already rounded) inputs: torch's
                own conv / grad / matmul ops run on float64 tensors, on the CPU
                or on the device.
ftz             inputs: values subnormal in the input format become 0 (before
                the op); output: values subnormal in the output format become 0
                (last). Models hardware that flushes subnormals (MI200's mfma).
accumulate = k  the reduction is summed in float64 in chunks of k products and
                the running sum is rounded to f32 after each chunk (models an
                f32 accumulator that adds k products at a time) over the op's lowered form
                (OpNumerics.lowered; runner/gemm_form.py).
round_output    the result rounded (nearest even) to the output format, as a
                correctly rounded kernel would return it. Applied before ftz.

An fp8 output (runner/dtypes.SATURATING_OUT_DTYPES) saturates: its reference is held to ± the format's
largest finite value, always.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

from e2egen import metrics

from e2egen.runner.dtypes import SATURATING_OUT_DTYPES
from e2egen.runner.errors import ProblemError
from e2egen.runner.gemm_form import accumulate_chunked
from e2egen.runner.ops.base import ProductSumOp
from e2egen.runner.options import REFERENCE_DEVICES, ReferenceOptions
from e2egen.runner.problem import Problem

__all__ = ["REFERENCE_DEVICES", "Reference", "ReferenceOptions", "apply_op", "compute_reference"]


@dataclass(frozen=True, eq=False)
class Reference:
    values: Mapping[str, torch.Tensor]  # float64, logical shape, per output (primary first)
    inputs: Mapping[str, torch.Tensor]  # the float64 inputs it consumed (flushed when ftz)

    @property
    def value(self) -> torch.Tensor:
        """The primary output's reference."""
        return next(iter(self.values.values()))


def compute_reference(problem: Problem, inputs64: Mapping[str, torch.Tensor], options: ReferenceOptions,
                      inputs_flushed: bool = False) -> Reference:
    """The reference of every output of `problem` from its float64 inputs, on their device.

    inputs_flushed: the inputs come flushed already (inputs.reference_inputs with the input format)."""
    if options.ftz and not inputs_flushed:
        inputs64 = {name: metrics.flush_subnormals(t, problem.input_format) for name, t in inputs64.items()}
    if options.accumulate:
        form = problem.numerics.lowered(problem, inputs64) if isinstance(problem.spec, ProductSumOp) else None
        if form is None:
            raise ProblemError("reference.accumulate", options.accumulate,
                               f"models the accumulation of a product sum; {problem.op} is not one")
        values = {problem.primary_output: accumulate_chunked(form, options.accumulate)}
    else:
        values = {name: t.contiguous() for name, t in problem.numerics.reference(problem, inputs64).items()}
    outputs = problem.outputs
    for name in values:
        if outputs[name].dtype in SATURATING_OUT_DTYPES:  # the contract's satfinite conversion (runner/dtypes.py)
            largest = metrics.get_format(outputs[name].dtype).max
            values[name] = values[name].clamp(-largest, largest)
        if options.round_output:
            values[name] = metrics.round_to(values[name], outputs[name].dtype)
        if options.ftz:
            values[name] = metrics.flush_subnormals(values[name], outputs[name].dtype)
    return Reference(values, inputs64)


def apply_op(problem: Problem, tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The problem's primary output on the given tensors with torch's own kernel (float64 in, float64 out)."""
    return problem.numerics.reference(problem, tensors)[problem.primary_output].contiguous()
