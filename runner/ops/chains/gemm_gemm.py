"""Fused gemm→gemm: out = R_T(A·B)·C, the intermediate rounded to the case's element type T before the
second product (what rocMLIR's gemm_gemm kernels and reference do); optionally with an element-wise
step between the products: out = R_T(f(s·A·B))·C, f one of runner/ops/math_functions.UNARY (`between`,
a transformer MLP's gelu or silu, relu) and s a scale (`scale`), f evaluated exactly by the reference.

Logical shapes: a (m, k), b (k, n), c (n, o), out (m, o); with batch >= 1 every tensor gets a leading
batch dim.

Kernel contract: f(a, b, c) -> out, tensors on the device in the case's dtype; the kernel must round
A·B to that dtype before multiplying by C (a kernel that keeps it in f32 computes another function and
fails where the difference shows). With an element-wise step: f(a, b, c, *, scale, between) -> out,
between the function's name; the kernel computes f(s·A·B) in f32 (it may round A·B to the dtype first)
and rounds the result to the dtype before the second product.

Layouts: three letters, A's, B's and C's, each "n" or "t" (stored transposed: the kernel receives the
transposed view of a contiguous tensor, as a column-major operand arrives), as rocMLIR's
--transA/B/C. The output comes back as a logical-shape tensor in any memory order.

This module is the spec (no torch); torch's kernel is in kernels.py, the numerics in numerics.py.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Mapping

from e2egen.runner.errors import ProblemError
from e2egen.runner.ops.base import Op, Shape, frozen_mapping, require_int
from e2egen.runner.ops.function_signatures import UNARY

GEMM_GEMM_LAYOUTS = tuple("".join(letters) for letters in itertools.product("nt", repeat=3))
OPERANDS = ("a", "b", "c")  # in the order a layout's letters name them
IDENTITY = "identity"
BETWEEN_CHOICES = (IDENTITY, *UNARY)


@dataclass(frozen=True)
class GemmGemmParams:
    m: int
    n: int
    k: int
    o: int
    batch: int = 0  # 0: plain 2-d; >= 1: 3-d batched tensors
    between: str = IDENTITY  # the element-wise function between the products
    scale: float = 1.0  # multiplies A·B before it

    def __post_init__(self) -> None:
        for key in ("m", "n", "k", "o"):
            require_int(key, getattr(self, key), 1)
        require_int("batch", self.batch, 0)
        if self.between not in BETWEEN_CHOICES:
            raise ProblemError.unknown("between", self.between, BETWEEN_CHOICES, what="element-wise function")
        if isinstance(self.scale, bool) or not isinstance(self.scale, (int, float)) or not math.isfinite(self.scale) \
                or self.scale == 0:
            raise ProblemError("scale", self.scale, f"expected a finite, non-zero number, got {self.scale!r}")

    @property
    def has_step(self) -> bool:
        """An element-wise step between the products (a function or a scale)."""
        return self.between != IDENTITY or self.scale != 1.0

    @property
    def batch_dims(self) -> Shape:
        return (self.batch,) if self.batch else ()

    def shapes(self) -> dict[str, Shape]:
        lead = self.batch_dims
        return {"a": (*lead, self.m, self.k), "b": (*lead, self.k, self.n), "c": (*lead, self.n, self.o)}

    @property
    def out_shape(self) -> Shape:
        return (*self.batch_dims, self.m, self.o)

    def to_catalogue(self) -> dict[str, Any]:
        return {"m": self.m, "n": self.n, "k": self.k, "o": self.o, **({"batch": self.batch} if self.batch else {}),
                **({"between": self.between} if self.between != IDENTITY else {}),
                **({"scale": self.scale} if self.scale != 1.0 else {})}

    def describe(self) -> str:
        return f"m={self.m} n={self.n} k={self.k} o={self.o}" + (f" batch={self.batch}" if self.batch else "") + (
            f" between={self.between}" if self.between != IDENTITY else "") + (f" scale={self.scale:g}" if self.scale != 1.0 else "")


class GemmGemmOp(Op[GemmGemmParams]):
    name = "gemm_gemm"
    numerics = "e2egen.runner.ops.chains.numerics:GemmGemmNumerics"
    directions = ("fwd",)
    layouts = GEMM_GEMM_LAYOUTS
    param_names = ("m", "n", "k", "o")
    optional_params = frozen_mapping({"batch": 0, "between": IDENTITY, "scale": 1.0})
    catalogue_minimums = frozen_mapping({"batch": (1, "batch counts the matrices; leave it out for a plain 2-d gemm_gemm")})

    def __repr__(self) -> str:
        return "GemmGemmOp(gemm_gemm)"

    @property
    def params_type(self) -> type:
        return GemmGemmParams

    def _build_params(self, raw: Mapping[str, Any]) -> GemmGemmParams:
        sizes = {key: require_int(key, raw[key], 0 if key == "batch" else 1) for key in ("m", "n", "k", "o", "batch")}
        scale = raw["scale"]
        return GemmGemmParams(**sizes, between=raw["between"], scale=float(scale) if isinstance(scale, int) and not isinstance(scale, bool) else scale)

    def input_shapes(self, params: GemmGemmParams, direction: str) -> dict[str, Shape]:
        return params.shapes()

    def output_shape(self, params: GemmGemmParams, direction: str) -> Shape:
        return params.out_shape

    def bound_magnitude_inputs(self, params: GemmGemmParams, direction: str) -> tuple[str, ...]:
        return ("a", "b", "c")  # the first product's Σ|a·b|, and |C| in the second

    def reduction_size(self, params: GemmGemmParams, direction: str) -> int:
        return params.k + params.n

    def scratch_elements(self, params: GemmGemmParams, direction: str) -> int:
        """The first product and its rounded copy, (batch, m, n) each."""
        return 2 * max(params.batch, 1) * params.m * params.n

    def flops(self, params: GemmGemmParams, direction: str) -> int:
        rows = max(params.batch, 1) * params.m
        return 2 * rows * params.n * (params.k + params.o)

    def shape_class(self, params: GemmGemmParams, direction: str) -> str:
        """A step between the products is another kernel (and has no probes): its own cell."""
        return f"step-{params.between}" if params.has_step else ""

    def probe_params(self, params: GemmGemmParams, direction: str) -> GemmGemmParams | None:
        """The case's own geometry (runner/ops/chains/probes.py); none with a step between the products."""
        return None if params.has_step else params

    def unprobed_reason(self, params: GemmGemmParams, direction: str) -> str:
        return "gemm_gemm's probes cannot pass crafted values through an element-wise step between the products"
