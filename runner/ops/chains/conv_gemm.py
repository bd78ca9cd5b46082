"""Fused conv→gemm: out = R_T(Y)·C, with Y the 2-d convolution of x by w (groups = 1) viewed as a matrix
(n·ho·wo, k) (rows in n, ho, wo order) and rounded to the case's element type T, then multiplied by
C (k, o): out (n·ho·wo, o). What rocMLIR's conv_gemm computes.

Kernel contract: f(x, w, c, *, stride, padding, dilation) -> out, x and w as a conv2d kernel gets them
(the layout's conv part; padding as conv's: ints, or (begin, end) pairs when asymmetric), c (k, o); the kernel rounds Y to the dtype before the gemm.

Layouts: the conv part ("nchw" or "nhwc", as conv2d's) and C's letter ("n", or "t": the transposed
view of a contiguous tensor), e.g. "nhwc-t" (rocMLIR's two layout families and --transC). The output
comes back as a logical-shape tensor in any memory order (rocMLIR's --transO).

This module is the spec (no torch); torch's kernel is in kernels.py, the numerics in numerics.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from e2egen.runner.errors import ProblemError
from e2egen.runner.ops.base import Op, Shape, frozen_mapping, require_int
from e2egen.runner.ops.product_sum.conv import CONV_LAYOUTS, ConvOp, ConvParams

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


class ConvGemmOp(Op[ConvGemmParams]):
    name = "conv_gemm"
    numerics = "e2egen.runner.ops.chains.numerics:ConvGemmNumerics"
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

    def probe_params(self, params: ConvGemmParams, direction: str) -> ConvGemmParams:
        """The case's own geometry (runner/ops/chains/probes.py: the second sum and the intermediate)."""
        return params
