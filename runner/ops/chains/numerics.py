"""The fused chains' numerics (torch): layouts' storage, the kernel call, the reference (the exact first
product, rounded to the case's type as the op says, times C) and the composed bound (bound.py). The specs
are gemm_gemm.py and conv_gemm.py."""
from __future__ import annotations

from typing import Any, Mapping

import torch

from e2egen import metrics
from e2egen.runner.arithmetic.model import Arithmetic
from e2egen.runner.bound import ErrorBound
from e2egen.runner.ops import numerics_of
from e2egen.runner.ops.chains.bound import conv_gemm_bound, gemm_gemm_bound
from e2egen.runner.ops.chains.conv_gemm import ConvGemmOp, ConvGemmParams
from e2egen.runner.ops.chains.gemm_gemm import OPERANDS, GemmGemmOp, GemmGemmParams
from e2egen.runner.ops.chains.intermediates import exact_intermediate, exact_product, exact_step
from e2egen.runner.ops.chains.kernels import torch_conv_gemm, torch_gemm_gemm
from e2egen.runner.ops.chains.probes import probe_conv_gemm, probe_gemm_gemm
from e2egen.runner.ops.numerics import Kernel, OpNumerics
from e2egen.runner.ops.tensor_layouts import stored_transposed
from e2egen.runner.problem import Problem


class GemmGemmNumerics(OpNumerics[GemmGemmOp]):
    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        if layout[OPERANDS.index(name)] == "t":
            return stored_transposed(tensor)
        return tensor.contiguous()

    def default_kernel(self, direction: str) -> Kernel:
        return torch_gemm_gemm

    def call(self, kernel: Kernel, direction: str, params: GemmGemmParams,
             tensors: Mapping[str, torch.Tensor]) -> Any:
        if params.has_step:
            return kernel(tensors["a"], tensors["b"], tensors["c"], scale=params.scale, between=params.between)
        return kernel(tensors["a"], tensors["b"], tensors["c"])

    def reference(self, problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        product = exact_step(problem.params, exact_product(problem.params, inputs64))
        intermediate = metrics.round_to(product, problem.out_dtype)
        return {"out": torch.matmul(intermediate, inputs64["c"])}

    def error_bound(self, problem: Problem, inputs64: Mapping[str, torch.Tensor],
                    arithmetic: Arithmetic | None = None) -> Mapping[str, ErrorBound]:
        return {"out": gemm_gemm_bound(problem, inputs64)}

    def probe_arithmetic(self, problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
        return probe_gemm_gemm(problem, kernel, device, label)


class ConvGemmNumerics(OpNumerics[ConvGemmOp]):
    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        conv_layout, c_letter = layout.split("-")
        if name == "c":
            return stored_transposed(tensor) if c_letter == "t" else tensor.contiguous()
        return numerics_of("conv2d").arrange(name, tensor, conv_layout)  # conv2d's own storage of x and w

    def default_kernel(self, direction: str) -> Kernel:
        return torch_conv_gemm

    def call(self, kernel: Kernel, direction: str, params: ConvGemmParams,
             tensors: Mapping[str, torch.Tensor]) -> Any:
        geometry = params.conv.geometry
        return kernel(tensors["x"], tensors["w"], tensors["c"], stride=geometry["stride"], padding=geometry["padding"],
                      dilation=geometry["dilation"])

    def reference(self, problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        intermediate = metrics.round_to(exact_intermediate(problem.params, inputs64), problem.out_dtype)
        return {"out": torch.matmul(intermediate, inputs64["c"])}

    def error_bound(self, problem: Problem, inputs64: Mapping[str, torch.Tensor],
                    arithmetic: Arithmetic | None = None) -> Mapping[str, ErrorBound]:
        return {"out": conv_gemm_bound(problem, inputs64)}

    def probe_arithmetic(self, problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
        return probe_conv_gemm(problem, kernel, device, label)


__all__ = ["ConvGemmNumerics", "GemmGemmNumerics"]
