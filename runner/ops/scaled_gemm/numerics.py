"""The torch side of the scaled gemm (runner/ops/scaled_gemm/spec.py): its inputs quantized per block
(runner/ops/scaled_gemm/scaling.py), stored as the layout says, torch's own kernel
(runner/ops/scaled_gemm/kernels.py), the float64 reference of the dequantized operands, the composed bound
(runner/ops/scaled_gemm/bound.py) and the probes (gemm's, with every scale 1: runner/ops/scaled_gemm/probes.py)."""
from __future__ import annotations

from typing import Mapping

import torch

from e2egen.runner.arithmetic.model import Arithmetic
from e2egen.runner.bound import ErrorBound
from e2egen.runner.dtypes import storage_dtype
from e2egen.runner.gemm_operands import stored_operand
from e2egen.runner.inputs import store_exact
from e2egen.runner.ops.numerics import Kernel, ProductSumNumerics
from e2egen.runner.ops.scaled_gemm.bound import scaled_gemm_bound
from e2egen.runner.ops.scaled_gemm.kernels import torch_scaled_gemm
from e2egen.runner.ops.scaled_gemm.probes import probe_scaled_arithmetic
from e2egen.runner.ops.scaled_gemm.scaling import dequantized, quantized_operands
from e2egen.runner.ops.scaled_gemm.spec import ScaledGemmOp, ScaledGemmParams
from e2egen.runner.problem import Problem

INPUT_ORDER = ("a", "b", "scale_a", "scale_b")  # a layout's letters, in this order (two: A and B)


class ScaledGemmNumerics(ProductSumNumerics[ScaledGemmOp]):
    # -- inputs ---------------------------------------------------------------------------------------
    def quantize_inputs(self, params: ScaledGemmParams, drawn: dict[str, torch.Tensor],
                        formats: Mapping[str, str]) -> dict[str, torch.Tensor]:
        values = quantized_operands(params.pattern, params.blocks, drawn, formats)
        return {name: store_exact(tensor, formats[name]) for name, tensor in values.items()}

    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        """Two letters store A and B as gemm's do, the scales K-contiguous; four letters set the scales' too."""
        letters = layout if len(layout) == 4 else layout + "nt"
        return stored_operand(name, tensor, letters[INPUT_ORDER.index(name)] == "t")

    # -- kernels ----------------------------------------------------------------------------------------
    def default_kernel(self, direction: str) -> Kernel:
        return torch_scaled_gemm

    def call(self, kernel: Kernel, direction: str, params: ScaledGemmParams,
             tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return kernel(tensors["a"], tensors["b"], tensors["scale_a"], tensors["scale_b"],
                      out_dtype=storage_dtype(params.output_format), scaling=params.scaling, block=params.block_size)

    # -- reference and bound ----------------------------------------------------------------------------
    def dequantized(self, params: ScaledGemmParams,
                    inputs64: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(A ⊙ scale_a, B ⊙ scale_b) in float64 (exact)."""
        blocks = params.blocks
        return (dequantized(inputs64["a"], inputs64["scale_a"], blocks["a"]),
                dequantized(inputs64["b"], inputs64["scale_b"], blocks["b"]))

    def reference(self, problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        a, b = self.dequantized(problem.params, inputs64)
        return {"c": torch.matmul(a, b)}

    def error_bound(self, problem: Problem, inputs64: Mapping[str, torch.Tensor],
                    arithmetic: Arithmetic | None = None) -> Mapping[str, ErrorBound]:
        return {"c": scaled_gemm_bound(problem, *self.dequantized(problem.params, inputs64))}

    # -- arithmetic probes ----------------------------------------------------------------------------------
    def probe_arithmetic(self, problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
        """The gemm probes on the kernel with every scale 1: what its products and accumulator do."""
        return probe_scaled_arithmetic(problem, kernel, device, label)
