"""The reductions' numerics (the torch half of runner/ops/reductions/spec.py): how a layout stores x (and a
backward's grad_y), the kernel call under the contract, the bound (bound.py) and the arithmetic probes
(probes.py). The reference is the default's: torch's own kernel (the backward: its autograd) on the float64
inputs."""
from __future__ import annotations

from typing import Mapping

import torch

from e2egen.runner.arithmetic.model import Arithmetic
from e2egen.runner.bound import ErrorBound
from e2egen.runner.ops.numerics import Kernel, OpNumerics
from e2egen.runner.ops.reductions.bound import backward_bound, cumsum_backward_bound, cumsum_bound, reduction_bound
from e2egen.runner.ops.reductions.kernels import (TORCH_BACKWARD_KERNELS, TORCH_KERNELS, torch_cumsum,
                                                  torch_cumsum_backward)
from e2egen.runner.ops.reductions.probes import probe_cumsum, probe_reduction
from e2egen.runner.ops.reductions.spec import CumsumOp, ReductionOp, ReductionParams, ScanParams
from e2egen.runner.ops.tensor_layouts import arrange_tensor, layout_problem_for_shape
from e2egen.runner.problem import Problem


def _arranged(tensor: torch.Tensor, layout: str) -> torch.Tensor:
    """A tensor stored as the layout says where it can store it (a backward's grad_y may have too few dims for
    channels_last: then contiguous)."""
    return arrange_tensor(tensor, layout if layout_problem_for_shape(layout, tensor.shape) is None else "contiguous")


class ReductionNumerics(OpNumerics[ReductionOp]):
    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        return _arranged(tensor, layout)

    # -- kernels ----------------------------------------------------------------------
    def default_kernel(self, direction: str) -> Kernel:
        return (TORCH_KERNELS if direction == "fwd" else TORCH_BACKWARD_KERNELS)[self.spec.reduction]

    def call(self, kernel: Kernel, direction: str, params: ReductionParams,
             tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
        correction = {"correction": params.correction} if self.spec.reduction == "var" else {}
        if direction != "fwd":
            return kernel(tensors["grad_y"], tensors["x"], dim=params.axes, **correction)
        return kernel(tensors["x"], dim=params.axes, **correction)

    # -- bound -------------------------------------------------------------------------------
    def error_bound(self, problem: Problem, inputs64: Mapping[str, torch.Tensor],
                    arithmetic: Arithmetic | None = None) -> Mapping[str, ErrorBound]:
        if problem.direction != "fwd":
            return {problem.primary_output: backward_bound(self.spec.reduction, problem, inputs64["grad_y"],
                                                           inputs64["x"])}
        return {problem.primary_output: reduction_bound(self.spec.reduction, problem, inputs64["x"])}

    # -- arithmetic probes (probes.py) ------------------------------------------------------
    def probe_arithmetic(self, problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
        return probe_reduction(self.spec.reduction, problem, kernel, device, label)


class CumsumNumerics(OpNumerics[CumsumOp]):
    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        return arrange_tensor(tensor, layout)

    def default_kernel(self, direction: str) -> Kernel:
        return torch_cumsum if direction == "fwd" else torch_cumsum_backward

    def call(self, kernel: Kernel, direction: str, params: ScanParams, tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return kernel(tensors["x" if direction == "fwd" else "grad_y"], dim=params.axis)

    def error_bound(self, problem: Problem, inputs64: Mapping[str, torch.Tensor],
                    arithmetic: Arithmetic | None = None) -> Mapping[str, ErrorBound]:
        if problem.direction != "fwd":
            return {problem.primary_output: cumsum_backward_bound(problem, inputs64["grad_y"])}
        return {problem.primary_output: cumsum_bound(problem, inputs64["x"])}

    def probe_arithmetic(self, problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
        return probe_cumsum(problem, kernel, device, label)
