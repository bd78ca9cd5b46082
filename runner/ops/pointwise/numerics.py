"""The torch side of the element-wise math ops (runner/ops/pointwise/spec.py): torch's own function as the
default kernel, the exact result as the reference, the acceptance interval (runner/interval_bound.py) as
the bound, and the probe of the compute format (runner/ops/pointwise/probes.py)."""
from __future__ import annotations

from typing import Mapping

import torch

from e2egen.runner.arithmetic.model import Arithmetic
from e2egen.runner.interval_bound import AcceptanceInterval
from e2egen.runner.ops.math_functions import BACKWARD_FUNCTIONS, FUNCTIONS, MathFunction
from e2egen.runner.ops.numerics import Kernel, OpNumerics
from e2egen.runner.ops.pointwise.probes import probe_compute_format
from e2egen.runner.ops.pointwise.spec import PointwiseOp, PointwiseParams
from e2egen.runner.ops.tensor_layouts import arrange_tensor
from e2egen.runner.problem import Problem


class PointwiseNumerics(OpNumerics[PointwiseOp]):
    def __init__(self, spec: PointwiseOp) -> None:
        super().__init__(spec)
        self.function = FUNCTIONS[spec.name]

    def computed(self, direction: str) -> MathFunction:
        """The function a direction computes: the op's, or its backward's (grad_x = grad_y·f')."""
        return self.function if direction == "fwd" else BACKWARD_FUNCTIONS[self.spec.name]

    @property
    def keeps_uniform_draw(self) -> bool:
        """The backward's y is computed from its drawn values (adjust_inputs), which serve as well rounded."""
        return True

    def adjust_inputs(self, params: PointwiseParams, drawn: dict[str, torch.Tensor]) -> None:
        """The backward's saved y: the forward's exact output at the drawn value, before it is rounded to the format
        (an output a forward pass can give)."""
        if "grad_y" in drawn and "y" in drawn:
            drawn["y"] = self.function.exact(drawn["y"].to(torch.float64))

    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        return arrange_tensor(tensor, layout)

    # -- kernels ------------------------------------------------------------------------------
    def default_kernel(self, direction: str) -> Kernel:
        return self.computed(direction).kernel

    def call(self, kernel: Kernel, direction: str, params: PointwiseParams,
             tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return kernel(*(tensors[name] for name in self.computed(direction).inputs))

    # -- reference and verdict ------------------------------------------------------------------
    def reference(self, problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        function = self.computed(problem.direction)
        return {problem.primary_output: function.exact(*(inputs64[name] for name in function.inputs))}

    def error_bound(self, problem: Problem, inputs64: Mapping[str, torch.Tensor],
                    arithmetic: Arithmetic | None = None) -> Mapping[str, AcceptanceInterval]:
        function = self.computed(problem.direction)
        return {problem.primary_output: AcceptanceInterval(function, problem.out_dtype, problem.input_format,
                                                           {name: inputs64[name] for name in function.inputs})}

    # -- arithmetic probes: which format the kernel computes in --------------------------------
    def probe_arithmetic(self, problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
        return probe_compute_format(problem, self.function, kernel, device, label)
