"""The torch side of the element-wise math ops (runner/ops/pointwise/spec.py): torch's own function as the
default kernel, the exact result as the reference, the acceptance interval (runner/interval_bound.py) as
the bound, and the probe of the compute format (runner/ops/pointwise/probes.py)."""
from __future__ import annotations

from typing import Mapping

import torch

from e2egen.runner.arithmetic.model import Arithmetic
from e2egen.runner.interval_bound import AcceptanceInterval
from e2egen.runner.ops.math_functions import FUNCTIONS
from e2egen.runner.ops.numerics import Kernel, OpNumerics
from e2egen.runner.ops.pointwise.probes import probe_compute_format
from e2egen.runner.ops.pointwise.spec import PointwiseOp, PointwiseParams
from e2egen.runner.ops.tensor_layouts import arrange_tensor
from e2egen.runner.problem import Problem


class PointwiseNumerics(OpNumerics[PointwiseOp]):
    def __init__(self, spec: PointwiseOp) -> None:
        super().__init__(spec)
        self.function = FUNCTIONS[spec.name]

    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        return arrange_tensor(tensor, layout)

    # -- kernels ------------------------------------------------------------------------------
    def default_kernel(self, direction: str) -> Kernel:
        return self.function.kernel

    def call(self, kernel: Kernel, direction: str, params: PointwiseParams,
             tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return kernel(*(tensors[name] for name in self.function.inputs))

    # -- reference and verdict ------------------------------------------------------------------
    def reference(self, problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        function = self.function
        return {"out": function.exact(*(inputs64[name] for name in function.inputs))}

    def error_bound(self, problem: Problem, inputs64: Mapping[str, torch.Tensor],
                    arithmetic: Arithmetic | None = None) -> Mapping[str, AcceptanceInterval]:
        function = self.function
        return {"out": AcceptanceInterval(function, problem.out_dtype, problem.input_format,
                                          {name: inputs64[name] for name in function.inputs})}

    # -- arithmetic probes: which format the kernel computes in --------------------------------
    def probe_arithmetic(self, problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
        return probe_compute_format(problem, self.function, kernel, device, label)
