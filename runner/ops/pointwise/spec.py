"""Element-wise math ops (exp, log, tanh, sigmoid, silu, gelu, gelu_tanh, rsqrt, sqrt, square, div, pow),
judged by acceptance intervals (runner/intervals.py) rather than by an error bound.

Catalogue parameters: `shape` (1 to 5 sizes); the binary ops div and pow also take `y_range = [lo, hi]`,
the range their second operand is drawn from (a divisor near zero, pow's exponent), by default the
case's range.

Kernel contract: f(x) -> y, or f(x, y) -> z for div and pow; the tensors on the device in the case's
dtype, stored as the layout says (runner/ops/tensor_layouts.py), the result of the same logical shape
and dtype (any strides). torch's own function is the default kernel.

Backward (bwd_data) of exp, tanh, relu, sqrt, sigmoid, rsqrt (f(grad_y, y) -> grad_x, y the forward's output,
as torch's autograd saves it) and of log, square, log1p, silu, gelu, gelu_tanh (f(grad_y, x) -> grad_x): grad_x =
grad_y·f'. y is the
forward of a drawn x, computed exactly and rounded to the format, so that it is an output a forward pass can give.
The defaults are torch's own backward formulas (runner/ops/math_functions.BACKWARD_FUNCTIONS; sigmoid's, rsqrt's
and log1p's on f32 copies, as torch's own round in f16/bf16); the backward has no probes (its compute format is
assumed f32).

The verdict per element is membership of the acceptance interval: the exact result's interval in the
kernel's compute format (f32 unless the probes find the kernel computes in its input format), rounded
outward to the output format. `bound_ratio` reports it: the distance from the exact result over the
interval's extent on that side, so <= 1 means inside.

The torch side (kernel call, reference, acceptance interval, probes) is runner/ops/pointwise/numerics.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from e2egen.runner.errors import ProblemError
from e2egen.runner.ops.base import Op, Shape, frozen_mapping
from e2egen.runner.ops.function_signatures import BACKWARD_SIGNATURES, SIGNATURES, FunctionSignature
from e2egen.runner.ops.tensor_layouts import TENSOR_LAYOUTS, layout_problem_for_shape, parse_shape

PROBE_SHAPE = (3, 37, 37)


@dataclass(frozen=True)
class PointwiseParams:
    shape: Shape
    y_range: tuple[float, float] | None = None

    def to_catalogue(self) -> dict[str, Any]:
        return {"shape": list(self.shape), **({"y_range": list(self.y_range)} if self.y_range else {})}

    def describe(self) -> str:
        return f"shape={list(self.shape)}" + (f" y_range={list(self.y_range)}" if self.y_range else "")


def _parse_range(key: str, value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    numbers = isinstance(value, (list, tuple)) and len(value) == 2 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    if not numbers or not float(value[0]) < float(value[1]):
        raise ProblemError(key, value, f"expected [low, high] with low < high, got {value!r}")
    return float(value[0]), float(value[1])


class PointwiseOp(Op[PointwiseParams]):
    layouts = TENSOR_LAYOUTS
    param_names = ("shape",)
    numerics = "e2egen.runner.ops.pointwise.numerics:PointwiseNumerics"

    def __init__(self, function: FunctionSignature):
        self.function = function
        self.name = function.name
        self.backward = BACKWARD_SIGNATURES.get(function.name)
        self.directions = ("fwd", "bwd_data") if self.backward is not None else ("fwd",)
        self.optional_params = frozen_mapping({"y_range": None} if len(function.inputs) == 2 else {})

    def signature(self, direction: str) -> FunctionSignature:
        """The function a direction computes: the op's, or its backward's."""
        return self.function if direction == "fwd" else self.backward

    def __repr__(self) -> str:
        return f"PointwiseOp({self.name})"

    @property
    def params_type(self) -> type:
        return PointwiseParams

    def _build_params(self, raw: Mapping[str, Any]) -> PointwiseParams:
        return PointwiseParams(shape=parse_shape("shape", raw["shape"]), y_range=_parse_range("y_range", raw.get("y_range")))

    def input_shapes(self, params: PointwiseParams, direction: str) -> dict[str, Shape]:
        return {name: params.shape for name in self.signature(direction).inputs}

    def output_names(self, params: PointwiseParams, direction: str) -> tuple[str, ...]:
        return ("out",) if direction == "fwd" else ("grad_x",)

    def input_ranges(self, params: PointwiseParams, case_range: tuple[float, float]) -> Mapping[str, tuple[float, float]]:
        return {"y": params.y_range} if params.y_range else {}

    def output_shape(self, params: PointwiseParams, direction: str) -> Shape:
        return params.shape

    def layout_params_problem(self, params: PointwiseParams, layout: str) -> str | None:
        return layout_problem_for_shape(layout, params.shape)

    def reduction_size(self, params: PointwiseParams, direction: str) -> int:
        return 1

    def flops(self, params: PointwiseParams, direction: str) -> int:
        return math.prod(params.shape)

    def judged_by_intervals(self, params: PointwiseParams) -> str:
        return ("element-wise math is judged by acceptance intervals: membership decides; bound_rms means nothing "
                "there (a result one rounding away sits at its interval's end by construction) and a libm's sub-ulp "
                "lean to one side (bias_z) is inside its allowance")

    # -- arithmetic probes: which format the kernel computes in ---------------------------
    def probe_params(self, params: PointwiseParams, direction: str) -> PointwiseParams | None:
        # rank 3 with odd sizes: every layout stores it with the strides of a real case, and vectorised
        # kernels leave scalar tails (torch's CPU f16 rsqrt is less accurate in its tails)
        return PointwiseParams(shape=PROBE_SHAPE, y_range=params.y_range) if direction == "fwd" else None

    def unprobed_reason(self, params: PointwiseParams, direction: str) -> str:
        return f"{self.name}'s backward has no probes: it is judged in f32's arithmetic"


POINTWISE_OPS = tuple(PointwiseOp(function) for function in SIGNATURES.values())
