"""A problem: one op, direction, dtype, layout, shape, input range, input data kind and seed.

`make_problem` turns the catalogue's form (a dict of parameters) into a
frozen `Problem`; `Problem` itself checks every invariant, so a problem that
exists is a problem that can run.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Mapping, Sequence, get_args

from e2egen.metrics.formats import get_format

from e2egen.runner.dtypes import DTYPES, element_size, input_format_name, operand_formats
from e2egen.runner.errors import ProblemError
from e2egen.runner.ops import OPS, Op, numerics_of
from e2egen.runner.ops.base import UNKNOWN_LAYOUT, Shape, TensorSpec, is_int

if TYPE_CHECKING:
    from e2egen.runner.ops.numerics import OpNumerics

_SEED_LIMIT = 2 ** 64  # torch.Generator.manual_seed accepts unsigned 64-bit seeds
# How inputs are drawn from input_range: "uniform" real numbers in [lo, hi), or "integers" lo..hi inclusive
# (each equally likely; rocMLIR's seeded default data, which makes many f32 conv/gemm results exact).
# How inputs are drawn from [lo, hi]: reals (uniform), or the integers lo..hi (a range's `data`).
InputData = Literal["uniform", "integers"]
INPUT_DATA: tuple[InputData, ...] = get_args(InputData)


def lookup_op(op: str | Op) -> Op:
    if isinstance(op, Op):
        return op
    if op not in OPS:
        raise ProblemError.unknown("op", op, OPS)
    return OPS[op]


def check_layout(op: Op, layout: str) -> None:
    if not isinstance(layout, str):
        raise ProblemError("layout", layout, f"expected a layout name, got {layout!r}", op.layouts)
    problem = op.layout_problem(layout)
    if problem is None:
        return
    if problem == UNKNOWN_LAYOUT:
        raise ProblemError.unknown("layout", layout, op.layouts, what=f"layout for {op.name}")
    raise ProblemError("layout", layout, problem, op.layouts)


def check_direction(op: Op, direction: str) -> None:
    if direction not in op.directions:
        raise ProblemError.unknown("direction", direction, op.directions, what=f"direction for {op.name}")


@dataclass(frozen=True)
class Problem:
    op: str
    direction: str
    dtype: str
    layout: str
    params: Any  # the op's params dataclass (ConvParams, GemmParams)
    input_range: tuple[float, float]
    seed: int
    input_data: InputData = "uniform"

    def __post_init__(self) -> None:
        if isinstance(self.op, Op):
            object.__setattr__(self, "op", self.op.name)
        op = lookup_op(self.op)
        check_direction(op, self.direction)
        if self.dtype not in DTYPES:
            raise ProblemError.unknown("dtype", self.dtype, DTYPES)
        if self.dtype not in op.dtypes:
            raise ProblemError.unknown("dtype", self.dtype, op.dtypes, what=f"dtype for {op.name}")
        check_layout(op, self.layout)
        if not op.owns_params(self.params):
            raise ProblemError("params", self.params, f"expected {op.name} parameters, got {self.params!r}")
        dtype_problem = op.dtype_params_problem(self.params, self.dtype)
        if dtype_problem:
            raise ProblemError("dtype", self.dtype, dtype_problem)
        layout_params_problem = op.layout_params_problem(self.params, self.layout)
        if layout_params_problem:
            raise ProblemError("layout", self.layout, layout_params_problem)
        _check_range(self.input_range, self.dtype, op.largest_input(self.params, self.dtype))
        check_input_data(self.input_data, self.input_range, self.dtype)
        if not is_int(self.seed) or not 0 <= self.seed < _SEED_LIMIT:
            raise ProblemError("seed", self.seed, f"expected an integer in [0, 2**64), got {self.seed!r}")

    # -- what the op says about this problem ---------------------------------
    @property
    def spec(self) -> Op:
        """The op's torch-free description."""
        return OPS[self.op]

    @property
    def numerics(self) -> OpNumerics:
        """The op's torch side: inputs, kernel call, reference, bound, probes."""
        return numerics_of(self.op)

    @property
    def input_shapes(self) -> dict[str, Shape]:
        """Logical shapes of the kernel's inputs, in drawing order."""
        return self.spec.input_shapes(self.params, self.direction)

    @property
    def outputs(self) -> dict[str, TensorSpec]:
        """Every output's logical shape and format, the primary one first."""
        return self.spec.outputs(self.params, self.direction, self.dtype)

    @property
    def output_names(self) -> tuple[str, ...]:
        return self.spec.output_names(self.params, self.direction)

    @property
    def primary_output(self) -> str:
        return self.output_names[0]

    @property
    def output_shape(self) -> Shape:
        """The primary output's logical shape."""
        return self.spec.output_shape(self.params, self.direction)

    @property
    def reduction_size(self) -> int:
        return self.spec.reduction_size(self.params, self.direction)

    @property
    def flops(self) -> int:
        return self.spec.flops(self.params, self.direction)

    @property
    def out_dtype(self) -> str:
        """The primary output's format."""
        return self.outputs[self.primary_output].dtype

    @property
    def input_format(self) -> str:
        return input_format_name(self.dtype)

    @property
    def input_elements(self) -> int:
        return sum(math.prod(s) for s in self.input_shapes.values())

    @property
    def output_elements(self) -> int:
        return sum(math.prod(spec.shape) for spec in self.outputs.values())

    @property
    def bytes_needed(self) -> int:
        """Device memory the kernel's tensors take: inputs and outputs in their dtypes."""
        return self.input_elements * element_size(self.dtype) + sum(
            math.prod(spec.shape) * element_size(spec.dtype) for spec in self.outputs.values())

    @property
    def reference_bytes(self) -> int:
        """Memory the plain float64 reference's tensors take (inputs and output)."""
        return 8 * (self.input_elements + self.output_elements)

    def describe(self) -> str:
        lo, hi = self.input_range
        data = "" if self.input_data == "uniform" else f" data={self.input_data}"
        return (f"{self.op} {self.direction} {self.dtype} {self.layout} {self.params.describe()} "
                f"range=[{lo:g}, {hi:g}]{data} seed={self.seed}")


def make_problem(op: str | Op, direction: str, dtype: str, layout: str, params: Mapping[str, Any],
                 input_range: Sequence[float], seed: int, input_data: str = "uniform") -> Problem:
    """Normalise and validate a catalogue problem; raises ProblemError naming the bad key."""
    spec = lookup_op(op)
    check_direction(spec, direction)
    if dtype not in DTYPES:
        raise ProblemError.unknown("dtype", dtype, DTYPES)
    check_layout(spec, layout)
    parsed = spec.parse_params(params)
    return Problem(spec.name, direction, dtype, layout, parsed, _range_tuple(input_range), seed, input_data)


def _range_tuple(value: Any) -> tuple[float, float]:
    if (not isinstance(value, Sequence) or isinstance(value, (str, bytes)) or len(value) != 2
            or not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in value)):
        raise ProblemError("input_range", value, f"expected [low, high] (two numbers), got {value!r}")
    return (float(value[0]), float(value[1]))


def _check_range(value: Any, dtype: str, largest: float) -> None:
    if not (isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, float) for v in value)):
        raise ProblemError("input_range", value, f"expected a (low, high) tuple of floats, got {value!r}")
    lo, hi = value
    if not (math.isfinite(lo) and math.isfinite(hi)) or not lo < hi:
        raise ProblemError("input_range", list(value), f"expected finite low < high, got [{lo:g}, {hi:g}]")
    if max(abs(lo), abs(hi)) > largest:
        raise ProblemError("input_range", list(value),
                           f"[{lo:g}, {hi:g}] goes beyond {dtype}'s largest finite value {largest:g}: inputs would be inf")


def check_input_data(data: Any, value: tuple[float, float], dtype: str) -> None:
    """Integer data needs integer bounds, each integer between them exact in the input format."""
    if data not in INPUT_DATA:
        raise ProblemError.unknown("input_data", data, INPUT_DATA)
    if data != "integers":
        return
    lo, hi = value
    if not (lo.is_integer() and hi.is_integer()):
        raise ProblemError("input_range", list(value), f"integer data needs integer bounds, got [{lo:g}, {hi:g}]")
    for fmt in dict.fromkeys(operand_formats(dtype)):
        spec = get_format(fmt)
        if spec.is_integer:
            continue  # Problem checked the range against the integer format's limits
        exact = 2 ** (spec.mantissa_bits + 1)  # every integer up to 2^(p) is a value of a p-bit format
        if max(abs(lo), abs(hi)) > exact:
            raise ProblemError("input_range", list(value),
                               f"integers in [{lo:g}, {hi:g}] are not all exact in {fmt} (its integers are exact up to "
                               f"{exact}): narrow the range")
