"""The float64 reference and its variants (the seed's "better validation function").

plain           the op in float64 on the exact (already rounded) inputs: torch's
                own conv / grad / matmul ops run on float64 tensors, on the CPU
                or on the device.
ftz             inputs: values subnormal in the input format become 0 (before
                the op); output: values subnormal in the output format become 0
                (last). Models hardware that flushes subnormals (MI200's mfma).
accumulate = k  the reduction is summed in float64 in chunks of k products and
                the running sum is rounded to f32 after each chunk (models an
                f32 accumulator that adds k products at a time); see lowering.py.
round_output    the result rounded (nearest even) to the output format, as a
                correctly rounded kernel would return it. Applied before ftz.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

from e2egen import metrics

from .errors import ProblemError
from .lowering import accumulate_chunked, lower
from .ops.base import is_int
from .problem import Problem

REFERENCE_DEVICES = ("cpu", "device")


@dataclass(frozen=True)
class ReferenceOptions:
    device: str = "cpu"  # "cpu" or "device" (the device the kernel runs on)
    ftz: bool = False
    accumulate: int = 0  # 0: off; k > 0: chunks of k products
    round_output: bool = False

    def __post_init__(self) -> None:
        if self.device not in REFERENCE_DEVICES:
            raise ProblemError.unknown("reference.device", self.device, REFERENCE_DEVICES, what="reference device")
        for key in ("ftz", "round_output"):
            if not isinstance(getattr(self, key), bool):
                raise ProblemError(f"reference.{key}", getattr(self, key), f"expected true or false, got {getattr(self, key)!r}")
        if not is_int(self.accumulate) or self.accumulate < 0:
            raise ProblemError("reference.accumulate", self.accumulate,
                               f"expected 0 (off) or a positive chunk size, got {self.accumulate!r}")


@dataclass(frozen=True, eq=False)
class Reference:
    value: torch.Tensor  # float64, logical shape
    inputs: Mapping[str, torch.Tensor]  # the float64 inputs it consumed (flushed when ftz)


def compute_reference(problem: Problem, inputs64: Mapping[str, torch.Tensor], options: ReferenceOptions) -> Reference:
    """The reference of `problem` from its float64 inputs, on their device."""
    if options.ftz:
        inputs64 = {name: metrics.flush_subnormals(t, problem.input_format) for name, t in inputs64.items()}
    if options.accumulate:
        value = accumulate_chunked(lower(problem, inputs64), options.accumulate)
    else:
        value = apply_op(problem, inputs64)
    if options.round_output:
        value = metrics.round_to(value, problem.out_dtype)
    if options.ftz:
        value = metrics.flush_subnormals(value, problem.out_dtype)
    return Reference(value, inputs64)


def apply_op(problem: Problem, tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The problem's op on the given tensors with torch's own kernel (float64 in, float64 out)."""
    spec = problem.spec
    out = spec.call(spec.default_kernel(problem.direction), problem.direction, problem.params, tensors)
    return out.contiguous()
