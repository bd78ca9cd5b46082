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

from e2egen.runner.dtypes import DTYPES, INTEGER_DTYPES, element_size, input_format_name, operand_formats
from e2egen.runner.errors import ProblemError
from e2egen.runner.ops import OPS, Op, numerics_of
from e2egen.runner.ops.base import UNKNOWN_LAYOUT, Shape, TensorSpec, is_int

if TYPE_CHECKING:
    from e2egen.runner.ops.numerics import OpNumerics

_SEED_LIMIT = 2 ** 64  # torch.Generator.manual_seed accepts unsigned 64-bit seeds
# How inputs get their values (a range's `data`): "uniform" real numbers in [lo, hi]; "integers" lo..hi inclusive
# (each equally likely; rocMLIR's seeded default data, which makes many f32 conv/gemm results exact);
# "pattern", rocmlir-gen's fixed pattern for each input's format (runner/inputs.py); "ones", every input 1.
# [lo, hi] bounds a pattern's or the ones' values (checked) but is not drawn from.
InputData = Literal["uniform", "integers", "pattern", "ones"]
INPUT_DATA: tuple[InputData, ...] = get_args(InputData)
RANDOM_DATA: tuple[InputData, ...] = ("uniform", "integers")  # the kinds drawn at random: they may name `random` inputs
# rocmlir-gen's fixed patterns (getTensorInitPattern), repeated over each tensor's elements in memory order
PATTERNS: Mapping[str, tuple[float, ...]] = {"float": (0.5, -1.0, 0.75), "integer": (1.0, -1.0, 2.0),
                                             "f4e2m1": (1.0, -4.0, 0.5, 1.5),
                                             "e8m0": (1.0, 2.0, 4.0, 8.0, 0.5, 0.25, 0.125)}
# What rocmlir-gen's -rand_side puts in the inputs it does not draw (their min = max = 1)
CONSTANT_BESIDE_RANDOM: Mapping[InputData, float] = {"integers": 1.0, "uniform": 0.1}
_RANDOM_MARK = " random="  # input_data "integers random=w,x": only w and x drawn (split_input_data)


def pattern_of(fmt: str) -> tuple[float, ...]:
    """rocmlir-gen's fixed pattern for an input of this format."""
    if fmt in PATTERNS:
        return PATTERNS[fmt]
    return PATTERNS["integer" if get_format(fmt).is_integer else "float"]


def join_input_data(kind: str, random: Sequence[str] = ()) -> str:
    """The one string a case carries for its data: the kind, and the inputs drawn at random where only some are."""
    return kind + (_RANDOM_MARK + ",".join(random) if random else "")


def split_input_data(data: str) -> tuple[str, tuple[str, ...]]:
    """(kind, random inputs) of join_input_data's string; no random inputs named: every input as the kind says."""
    kind, mark, names = data.partition(_RANDOM_MARK)
    return kind, tuple(names.split(",")) if mark else ()


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
        check_input_data(self.input_data, self.input_range, self.dtype, tuple(self.input_shapes))
        if not is_int(self.seed) or not 0 <= self.seed < _SEED_LIMIT:
            raise ProblemError("seed", self.seed, f"expected an integer in [0, 2**64), got {self.seed!r}")

    def drawn_independently(self, name: str) -> bool:
        """Whether input `name`'s elements are drawn independently at random (uniform reals or integers), not
        set (a pattern, ones, rocmlir-gen's constant beside its random inputs): the premise bounds may rest on."""
        kind, random = split_input_data(self.input_data)
        return kind in RANDOM_DATA and (not random or name in random)

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
    if dtype in INTEGER_DTYPES:  # two's complement: one more below zero (i8's -128 is a value kernels must meet)
        if lo < -largest - 1 or hi > largest:
            raise ProblemError("input_range", list(value),
                               f"[{lo:g}, {hi:g}] goes beyond {dtype}'s range [{-largest - 1:g}, {largest:g}]: inputs would wrap")
        return
    if max(abs(lo), abs(hi)) > largest:
        raise ProblemError("input_range", list(value),
                           f"[{lo:g}, {hi:g}] goes beyond {dtype}'s largest finite value {largest:g}: inputs would be inf")


def check_input_data(data: Any, value: tuple[float, float], dtype: str, inputs: Sequence[str] | None = None) -> None:
    """A known kind; integer data needs integer bounds, each integer between them exact in the input format; a
    pattern or ones lies in the range; random inputs (where given) are among `inputs`, the problem's."""
    if not isinstance(data, str):
        raise ProblemError.unknown("input_data", data, INPUT_DATA)
    kind, random = split_input_data(data)
    if kind not in INPUT_DATA:
        raise ProblemError.unknown("input_data", kind, INPUT_DATA)
    if random and kind not in RANDOM_DATA:
        raise ProblemError("input_data", data, f"only {' and '.join(RANDOM_DATA)} data draw some inputs at random, not {kind}")
    if inputs is not None and not set(random) <= set(inputs):
        raise ProblemError("input_data", data, f"random inputs {', '.join(random)}: expected some of {', '.join(inputs)}")
    lo, hi = value
    if kind in ("pattern", "ones"):
        fixed = {1.0} if kind == "ones" else {v for fmt in operand_formats(dtype) for v in pattern_of(fmt)}
        if not lo <= min(fixed) <= max(fixed) <= hi:
            raise ProblemError("input_range", list(value), f"{kind} data in {dtype} takes values {min(fixed):g}..{max(fixed):g}, "
                                                           f"outside [{lo:g}, {hi:g}]: widen the range")
        return
    if kind != "integers":
        return
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
