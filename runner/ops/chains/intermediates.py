"""The fused chains' first products, exact (float64), each computed once per case for its reference and
its bound (runner/ops/shared_values.computed_once): gemm→gemm's A·B (and f(s·A·B) with an element-wise
step), conv→gemm's convolution Y viewed as a (n·ho·wo, k) matrix."""
from __future__ import annotations

from typing import Mapping

import torch

from e2egen.runner.ops.chains.conv_gemm import ConvGemmParams
from e2egen.runner.ops.chains.gemm_gemm import IDENTITY, GemmGemmParams
from e2egen.runner.ops.chains.kernels import as_matrix, conv2d_fwd
from e2egen.runner.ops.math_functions import FUNCTIONS
from e2egen.runner.ops import shared_values


def exact_product(params: GemmGemmParams, inputs64: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """A·B in float64 from the case's own inputs, computed once for its reference and its bound."""
    factors = {"a": inputs64["a"], "b": inputs64["b"]}
    return shared_values.computed_once("gemm→gemm A·B", params, factors, lambda: torch.matmul(factors["a"], factors["b"]))


def exact_step(params: GemmGemmParams, product: torch.Tensor) -> torch.Tensor:
    """f(scale·product) in float64, as the reference takes it (the product itself without a step)."""
    if not params.has_step:
        return product
    stepped = product * params.scale
    return stepped if params.between == IDENTITY else FUNCTIONS[params.between].exact(stepped)


def conv_output(params: ConvGemmParams, inputs64: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Y as a (n·ho·wo, k) float64 matrix, exact."""
    return as_matrix(conv2d_fwd(inputs64["x"], inputs64["w"], **params.conv.geometry))


def exact_intermediate(params: ConvGemmParams, inputs64: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """conv_output of the case's own inputs, computed once for its reference and its bound."""
    factors = {"x": inputs64["x"], "w": inputs64["w"]}
    return shared_values.computed_once("conv→gemm intermediate", params, factors, lambda: conv_output(params, factors))


__all__ = ["conv_output", "exact_intermediate", "exact_product", "exact_step"]
