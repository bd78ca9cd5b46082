"""Fused conv→gemm: out = R_T(Y)·C, with Y the 2-d convolution of x by w (groups = 1) viewed as a matrix
(n·ho·wo, k) (rows in n, ho, wo order) and rounded to the case's element type T, then multiplied by
C (k, o): out (n·ho·wo, o). What rocMLIR's conv_gemm computes.

Kernel contract: f(x, w, c, *, stride, padding, dilation) -> out, x and w as a conv2d kernel gets them
(the layout's conv part; padding as conv's: ints, or (begin, end) pairs when asymmetric), c (k, o); the kernel rounds Y to the dtype before the gemm.

Layouts: the conv part ("nchw" or "nhwc", as conv2d's) and C's letter ("n", or "t": the transposed
view of a contiguous tensor), e.g. "nhwc-t" (rocMLIR's two layout families and --transC). The output
comes back as a logical-shape tensor in any memory order (rocMLIR's --transO).

torch is imported when a case runs, so generating a suite stays fast.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from e2egen.runner.errors import ProblemError
from e2egen.runner.ops.base import Op, Shape, frozen_mapping, require_int
from e2egen.runner.ops.tensor_layouts import stored_transposed
from e2egen.runner.ops.product_sum.conv import CONV_LAYOUTS, ConvOp, ConvParams

if TYPE_CHECKING:
    import torch

CONV_GEMM_LAYOUTS = tuple(f"{conv}-{c}" for conv in CONV_LAYOUTS for c in "nt")
_CONV2D = ConvOp(2)


@dataclass(frozen=True)
class ConvGemmParams:
    conv: ConvParams
    o: int

    def __post_init__(self) -> None:
        require_int("o", self.o, 1)
        if self.conv.groups != 1:
            raise ProblemError("groups", self.conv.groups, "conv_gemm takes groups = 1 (the conv output is one matrix)", [1])

    @property
    def rows(self) -> int:
        return self.conv.n * self.conv.out_size[0] * self.conv.out_size[1]

    def shapes(self) -> dict[str, Shape]:
        return {"x": self.conv.x_shape, "w": self.conv.w_shape, "c": (self.conv.k, self.o)}

    @property
    def out_shape(self) -> Shape:
        return (self.rows, self.o)

    def to_catalogue(self) -> dict[str, Any]:
        conv = self.conv.to_catalogue()
        conv.pop("groups")
        return {**conv, "o": self.o}

    def describe(self) -> str:
        return f"{self.conv.describe()} o={self.o}"


def as_matrix(y: torch.Tensor) -> torch.Tensor:
    """(n, k, ho, wo) -> (n·ho·wo, k)."""
    return y.permute(0, 2, 3, 1).reshape(-1, y.shape[1])


class ConvGemmOp(Op):
    name = "conv_gemm"
    directions = ("fwd",)
    layouts = CONV_GEMM_LAYOUTS
    param_names = ("n", "c", "k", "hw", "kernel", "o")
    optional_params = frozen_mapping({"stride": 1, "pad": 0, "dilation": 1})

    def __repr__(self) -> str:
        return "ConvGemmOp(conv_gemm)"

    @property
    def params_type(self) -> type:
        return ConvGemmParams

    def _build_params(self, raw: Mapping[str, Any]) -> ConvGemmParams:
        conv = _CONV2D.parse_params({key: value for key, value in raw.items() if key != "o"})
        return ConvGemmParams(conv, require_int("o", raw["o"], 1))

    def input_shapes(self, params: ConvGemmParams, direction: str) -> dict[str, Shape]:
        return params.shapes()

    def output_shape(self, params: ConvGemmParams, direction: str) -> Shape:
        return params.out_shape

    def bound_magnitude_inputs(self, params: ConvGemmParams, direction: str) -> tuple[str, ...]:
        return ("x", "w", "c")  # the convolution's Σ|x·w|, and |C| in the gemm

    def conv_reduction_size(self, params: ConvGemmParams) -> int:
        """Products in each element of the conv output (C·R·S)."""
        return _CONV2D.reduction_size(params.conv, "fwd")

    def reduction_size(self, params: ConvGemmParams, direction: str) -> int:
        return self.conv_reduction_size(params) + params.conv.k

    def scratch_elements(self, params: ConvGemmParams, direction: str) -> int:
        """The conv's unfolded windows, then its output and that output's rounded copy."""
        conv = params.conv
        return _CONV2D.scratch_elements(conv, "fwd") + 2 * conv.n * conv.k * math.prod(conv.out_size)

    def flops(self, params: ConvGemmParams, direction: str) -> int:
        return _CONV2D.flops(params.conv, "fwd") + 2 * params.rows * params.conv.k * params.o

    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        conv_layout, c_letter = layout.split("-")
        if name == "c":
            return stored_transposed(tensor) if c_letter == "t" else tensor.contiguous()
        return _CONV2D.arrange(name, tensor, conv_layout)

    def default_kernel(self, direction: str) -> Callable[..., Any]:
        return torch_conv_gemm

    def call(self, kernel: Callable[..., Any], direction: str, params: ConvGemmParams,
             tensors: Mapping[str, torch.Tensor]) -> Any:
        geometry = params.conv.geometry
        return kernel(tensors["x"], tensors["w"], tensors["c"], stride=geometry["stride"], padding=geometry["padding"],
                      dilation=geometry["dilation"])

    def conv_output(self, params: ConvGemmParams, inputs64: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Y as a (n·ho·wo, k) float64 matrix, exact."""
        from e2egen.runner.ops.product_sum.conv import torch_conv_fwd

        return as_matrix(torch_conv_fwd(inputs64["x"], inputs64["w"], **params.conv.geometry))

    def exact_intermediate(self, params: ConvGemmParams, inputs64: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """conv_output of the case's own inputs, computed once for its reference and its bound."""
        from e2egen.runner.ops.shared_values import computed_once

        factors = {"x": inputs64["x"], "w": inputs64["w"]}
        return computed_once("conv→gemm intermediate", params, factors, lambda: self.conv_output(params, factors))

    def reference(self, problem: Any, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        import torch

        from e2egen import metrics

        intermediate = metrics.round_to(self.exact_intermediate(problem.params, inputs64), problem.out_dtype)
        return {"out": torch.matmul(intermediate, inputs64["c"])}

    def error_bound(self, problem: Any, inputs64: Mapping[str, torch.Tensor], arithmetic: Any = None) -> Mapping[str, Any]:
        from e2egen.runner.ops.chains.bound import conv_gemm_bound

        return {"out": conv_gemm_bound(problem, inputs64)}


def torch_conv_gemm(x: torch.Tensor, w: torch.Tensor, c: torch.Tensor, *, stride, padding, dilation) -> torch.Tensor:
    import torch

    from e2egen.runner.ops.product_sum.conv import torch_conv_fwd

    y = torch_conv_fwd(x, w, stride=stride, padding=padding, dilation=dilation, groups=1)  # in the dtype: rounded
    return torch.matmul(as_matrix(y), c)
