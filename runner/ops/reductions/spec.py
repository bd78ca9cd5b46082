"""Reductions, forward: `sum`, `mean`, `max` (the largest element) and `var` over one or more dims; and the
scan `cumsum` along one dim.

Logical shapes: x is the catalogue's `shape` (1 to 5 dims); the output drops the reduced dims (`axis`: one
dim or a list, negative counting from the end; a full reduction gives a 0-d tensor) and keeps the case's
format (f16 in, f16 out), as torch does. `var` divides the sum of squared deviations by N - correction
(`correction`, default 1: the unbiased estimate, torch.var's default); N is the number of elements each
output reduces.

Kernel contract: f(x, *, dim) -> out for sum, mean, max; f(x, *, dim, correction) -> out for var. dim is a
tuple of ints (>= 0, sorted), correction an int. torch.sum, torch.mean, torch.amax and torch.var with those
keywords are the default kernels.

Backward (bwd_data; sum, mean and max): f(grad_y, x, *, dim) -> grad_x, grad_y of the output's shape, x the
forward's input (its shape; max's maxima), grad_x of x's shape and format: sum broadcasts grad_y over the
reduced dims, mean divides it by N, max gives it to the maxima of x, split evenly among tied ones (torch.amax's
gradient). The default kernels are torch's autograd of the forward kernels. var's: f(grad_y, x, *, dim,
correction) -> grad_x = grad_y · 2(x - μ)/(N - correction); its default is torch's autograd on f32 copies, rounded
once (torch's own f16/bf16 var backward rounds each of its steps, the mean, x - mean and the scale, to the input
format, which the dtype's assumed arithmetic, f32 steps, does not allow).

Layouts (runner/ops/tensor_layouts.py): contiguous, strided (x is a view of every other element of a
buffer whose gaps hold NaN), channels_last (rank >= 3). The output may come in any memory layout.

The reference is the same torch op on the float64 inputs (max is exact: it returns an input). The bounds
are runner/ops/reductions/bound.py's, derived in docs/concepts/reduction-bound.md; the arithmetic probes are
runner/ops/reductions/probes.py, on the small problem probe_shape gives.

cumsum: out has x's shape and format; out[..., i, ...] = Σ_{j <= i} x[..., j, ...] along `axis` (one dim,
default -1). Kernel contract: f(x, *, dim) -> out, dim an int (>= 0); torch.cumsum is the default kernel.
Its bound is the sum's with Σ|x| taken over each prefix (bound.cumsum_bound); its probes are the sum's, on
the last prefix of each row (probes.probe_cumsum). Backward: f(grad_y, *, dim) -> grad_x, every suffix sum
of grad_y (grad_x[..., i, ...] = Σ_{j >= i} grad_y[..., j, ...]): the forward's bound and probes on the
reversed rows.

This is the ops' torch-free spec; their numerics (layouts, the kernel call, reference, bound and probes) are
numerics.py, their kernels (torch's, alternates and planted bugs) kernels.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from e2egen.runner.errors import ProblemError
from e2egen.runner.ops.base import Direction, Op, Shape, frozen_mapping, is_int
from e2egen.runner.ops.tensor_layouts import TENSOR_LAYOUTS, layout_problem_for_shape, parse_axes, parse_shape

Reduction = Literal["sum", "mean", "max", "var"]
REDUCTIONS: tuple[Reduction, ...] = ("sum", "mean", "max", "var")
# Arithmetic operations per reduced element (var: subtract the mean, square, add; a mean pass besides).
_OPS_PER_ELEMENT: dict[Reduction, int] = {"sum": 1, "mean": 1, "max": 1, "var": 4}
PROBE_REDUCED = 32  # reduced elements of a sum or mean probe: far enough apart for blocked kernels
PROBE_KEPT = 4  # size cap of each dim that is not reduced


@dataclass(frozen=True)
class ReductionParams:
    shape: tuple[int, ...]
    axes: tuple[int, ...]  # sorted, >= 0
    correction: int | None = None  # var only: the divisor is N - correction

    def __post_init__(self) -> None:
        rank = len(self.shape)
        if not self.axes or any(not 0 <= axis < rank for axis in self.axes) or list(self.axes) != sorted(set(self.axes)):
            raise ProblemError("axis", list(self.axes), f"expected distinct sorted dims in [0, {rank - 1}], got {list(self.axes)}")
        if self.correction is not None:
            if not is_int(self.correction) or self.correction < 0:
                raise ProblemError("correction", self.correction,
                                   f"expected an integer >= 0 (1: unbiased, 0: biased), got {self.correction!r}")
            if self.correction >= self.reduced_size:
                raise ProblemError("correction", self.correction,
                                   f"must be smaller than the number of elements each output reduces "
                                   f"({self.reduced_size} for shape {list(self.shape)}, axis {list(self.axes)}): "
                                   f"var divides by N - correction")

    @property
    def reduced_size(self) -> int:
        return math.prod(self.shape[axis] for axis in self.axes)

    @property
    def out_shape(self) -> Shape:
        return tuple(size for dim, size in enumerate(self.shape) if dim not in self.axes)

    @property
    def divisor(self) -> int:
        """var's N - correction."""
        return self.reduced_size - (self.correction or 0)

    def to_catalogue(self) -> dict[str, Any]:
        axis: int | list[int] = self.axes[0] if len(self.axes) == 1 else list(self.axes)
        return {"shape": list(self.shape), "axis": axis, **({} if self.correction is None else {"correction": self.correction})}

    def describe(self) -> str:
        text = f"shape={'x'.join(map(str, self.shape))} axis={','.join(map(str, self.axes))}"
        return text + ("" if self.correction is None else f" correction={self.correction}")


class ReductionOp(Op[ReductionParams]):
    """One reduction (`sum`, `mean`, `max` or `var`); the four share everything but the kernel and the bound."""

    layouts = TENSOR_LAYOUTS
    param_names = ("shape",)
    numerics = "e2egen.runner.ops.reductions.numerics:ReductionNumerics"

    def __init__(self, reduction: Reduction):
        if reduction not in REDUCTIONS:
            raise ValueError(f"unknown reduction {reduction!r}; valid: {', '.join(REDUCTIONS)}")
        self.name: str = reduction
        self.reduction: Reduction = reduction
        self.directions: tuple[Direction, ...] = ("fwd", "bwd_data")
        self.optional_params = frozen_mapping({"axis": -1, **({"correction": 1} if reduction == "var" else {})})

    def __repr__(self) -> str:
        return f"ReductionOp({self.reduction})"

    @property
    def params_type(self) -> type:
        return ReductionParams

    def _build_params(self, raw: Mapping[str, Any]) -> ReductionParams:
        shape = parse_shape("shape", raw["shape"])
        axes = parse_axes("axis", raw["axis"], len(shape))
        return ReductionParams(shape, axes, raw["correction"] if self.reduction == "var" else None)

    # -- tensors ------------------------------------------------------------------
    def input_shapes(self, params: ReductionParams, direction: str) -> dict[str, Shape]:
        return {"x": params.shape} if direction == "fwd" else {"grad_y": params.out_shape, "x": params.shape}

    def output_names(self, params: ReductionParams, direction: str) -> tuple[str, ...]:
        return ("out",) if direction == "fwd" else ("grad_x",)

    def output_shape(self, params: ReductionParams, direction: str) -> Shape:
        return params.out_shape if direction == "fwd" else params.shape

    def layout_params_problem(self, params: ReductionParams, layout: str) -> str | None:
        return layout_problem_for_shape(layout, params.shape)

    # -- cost ------------------------------------------------------------------------
    def reduction_size(self, params: ReductionParams, direction: str) -> int:
        return params.reduced_size if direction == "fwd" else 1  # the backward sums nothing

    def flops(self, params: ReductionParams, direction: str) -> int:
        return (_OPS_PER_ELEMENT[self.reduction] if direction == "fwd" else 1) * math.prod(params.shape)

    # -- arithmetic probes (runner/ops/reductions/probes.py) ---------------------------
    def shape_class(self, params: ReductionParams, direction: str) -> str:
        """Kernels pick their path by rank and reduced dims (inner, outer, full): one cell per such geometry."""
        return f"{len(params.shape)}d-axes{''.join(map(str, params.axes))}"

    def probe_params(self, params: ReductionParams, direction: str) -> ReductionParams | None:
        """The probes' problem (runner/ops/reductions/probes.py): probe_shape, and var's correction kept below
        its reduced size; none for the backward."""
        if direction != "fwd":
            return None
        shape = probe_shape(self.reduction, params.shape, params.axes)
        correction = None if params.correction is None else min(params.correction, math.prod(shape[a] for a in params.axes) - 1)
        return ReductionParams(shape, params.axes, correction)

    def shared_rounding(self, params: ReductionParams, direction: Direction = "fwd") -> str:
        if self.reduction == "mean" and direction != "fwd":
            return "every element of a reduced group is grad_y times one 1/N, which a kernel may round once"
        if self.reduction == "var" and direction != "fwd":
            return "every element of a reduced group subtracts one mean, whose rounding moves them all alike"
        return ""

    def unprobed_reason(self, params: ReductionParams, direction: str) -> str:
        return f"{self.name}'s backward copies or divides grad_y: it has no accumulator to probe"


def probe_shape(reduction: Reduction, shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    """The probe's shape: same rank and axes; kept dims capped, the reduced elements PROBE_REDUCED at most
    (innermost dims first), exactly 2 for var (the first reduced dim of size >= 2 gets 2, the others 1)."""
    sizes = [size if dim in axes else min(size, PROBE_KEPT) for dim, size in enumerate(shape)]
    if reduction == "var":
        wide = [axis for axis in axes if shape[axis] >= 2]
        for axis in axes:
            sizes[axis] = 2 if wide and axis == wide[0] else 1
        return tuple(sizes)
    room = PROBE_REDUCED
    for axis in reversed(axes):
        sizes[axis] = min(shape[axis], room)
        room //= sizes[axis]
    return tuple(sizes)


REDUCTION_OPS = tuple(ReductionOp(reduction) for reduction in REDUCTIONS)


@dataclass(frozen=True)
class ScanParams:
    shape: tuple[int, ...]
    axis: int  # >= 0

    def __post_init__(self) -> None:
        if not 0 <= self.axis < len(self.shape):
            raise ProblemError("axis", self.axis, f"expected a dim in [0, {len(self.shape) - 1}], got {self.axis}")

    @property
    def length(self) -> int:
        """The elements the last prefix of each row sums."""
        return self.shape[self.axis]

    def to_catalogue(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "axis": self.axis}

    def describe(self) -> str:
        return f"shape={'x'.join(map(str, self.shape))} axis={self.axis}"


class CumsumOp(Op[ScanParams]):
    """cumsum: every prefix sum of x along one dim (module docstring)."""

    name = "cumsum"
    directions: tuple[Direction, ...] = ("fwd", "bwd_data")
    layouts = TENSOR_LAYOUTS
    param_names = ("shape",)
    optional_params = frozen_mapping({"axis": -1})
    numerics = "e2egen.runner.ops.reductions.numerics:CumsumNumerics"

    def __repr__(self) -> str:
        return "CumsumOp()"

    @property
    def params_type(self) -> type:
        return ScanParams

    def _build_params(self, raw: Mapping[str, Any]) -> ScanParams:
        shape = parse_shape("shape", raw["shape"])
        if not is_int(raw["axis"]):
            raise ProblemError("axis", raw["axis"], f"cumsum scans one dim: expected an integer, got {raw['axis']!r}")
        (axis,) = parse_axes("axis", raw["axis"], len(shape))
        return ScanParams(shape, axis)

    def input_shapes(self, params: ScanParams, direction: str) -> dict[str, Shape]:
        return {"x": params.shape} if direction == "fwd" else {"grad_y": params.shape}

    def output_names(self, params: ScanParams, direction: str) -> tuple[str, ...]:
        return ("out",) if direction == "fwd" else ("grad_x",)

    def output_shape(self, params: ScanParams, direction: str) -> Shape:
        return params.shape

    def layout_params_problem(self, params: ScanParams, layout: str) -> str | None:
        return layout_problem_for_shape(layout, params.shape)

    def shared_rounding(self, params: ScanParams, direction: Direction = "fwd") -> str:
        return "each prefix (backward: suffix) sum carries the roundings of the ones before it"

    def reduction_size(self, params: ScanParams, direction: str) -> int:
        return params.length

    def flops(self, params: ScanParams, direction: str) -> int:
        return math.prod(params.shape)

    def shape_class(self, params: ScanParams, direction: str) -> str:
        return f"{len(params.shape)}d-axis{params.axis}"

    def probe_params(self, params: ScanParams, direction: str) -> ScanParams:
        """The sum probes' shape (probe_shape), scanned along the same dim."""
        return ScanParams(probe_shape("sum", params.shape, (params.axis,)), params.axis)


CUMSUM_OP = CumsumOp()
