"""An op's spec: what it is, with no torch. Its numerics (torch) are the other half,
runner/ops/numerics.py; the registry (runner/ops/__init__.py) pairs them.

The spec, in the order a case uses it:

    parse_params      catalogue table -> the op's frozen params dataclass: shapes
                      and any option that is not a shape (a mask, a scale)
    input_shapes      named inputs, in drawing order
    outputs           named outputs, each with its logical shape and format
                      (several for ops such as attention's (O, LSE); integer
                      formats for integer ops); the first is the primary one
    input_formats, input_ranges, largest_input
    edge_data         the data of the problem's edges case, which reaches what the
                      catalogue's ranges may not (runner/edge_data.py)
    reduction_size, flops, scratch_elements
    probe_params      the small problem its probes run on (None: no probes)

An op is stateless; a problem's parameters live in the op's own frozen
params dataclass, which checks its invariants when it is built. Describing an
op and checking its parameters needs no torch, so generating a suite stays fast.
"""
from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, ClassVar, Generic, Literal, Mapping, Sequence, TypeVar, get_args

from e2egen.runner.dtypes import FLOAT_DTYPES, largest_finite, operand_formats, output_dtype_name
from e2egen.runner.edge_data import EdgeData, format_edges
from e2egen.runner.errors import ProblemError

Shape = tuple[int, ...]
Direction = Literal["fwd", "bwd_data", "bwd_weight"]
DIRECTIONS: tuple[Direction, ...] = get_args(Direction)
ParamsT = TypeVar("ParamsT")  # an op's frozen params dataclass
UNKNOWN_LAYOUT = "unknown layout"  # Op.layout_problem: not a name this op knows


@dataclass(frozen=True)
class TensorSpec:
    """A tensor of the problem: logical shape and format name (f32, f16, bf16, i32, ...)."""

    shape: Shape
    dtype: str


class Op(ABC, Generic[ParamsT]):
    """One op of the catalogue (conv2d, gemm, ...).

    name: the catalogue's op name; directions, layouts: the valid axes values;
    param_names: the required catalogue parameters; optional_params: the
    optional ones with their defaults.
    """

    name: str
    directions: tuple[Direction, ...]
    layouts: tuple[str, ...]
    param_names: tuple[str, ...]
    optional_params: Mapping[str, Any]
    dtypes: tuple[str, ...] = FLOAT_DTYPES  # the case dtypes it runs in (conv and gemm add fp8 and i8)
    # Where the op's numerics live, "package.module:Class" (an OpNumerics built from this spec); the registry
    # imports it when a case first runs the op. Empty: the numerics are registered with the op (register_op).
    numerics: ClassVar[str] = ""
    # Catalogue parameters with a smallest value of their own: key -> (minimum, hint shown with the error).
    catalogue_minimums: Mapping[str, tuple[int, str]] = MappingProxyType({})
    # Whether torch's own kernel needs fp8/fp4/i8 inputs widened before the call (runner/lowbit.py); an op
    # whose default kernel takes them itself says False.
    torch_kernel_widens: bool = True

    # -- parameters -------------------------------------------------------
    def parse_params(self, raw: Mapping[str, Any]) -> ParamsT:
        """Catalogue dict -> the op's normalised, validated params dataclass."""
        if not isinstance(raw, Mapping):
            raise ProblemError("params", raw, f"expected a table of {self.name} parameters, got {type(raw).__name__}")
        known = (*self.param_names, *self.optional_params)
        for key in raw:
            if key not in known:
                raise ProblemError.unknown(key, key, known, what=f"{self.name} parameter")
        for key in self.param_names:
            if key not in raw:
                raise ProblemError(key, None, f"missing {self.name} parameter; required: {', '.join(self.param_names)}", self.param_names)
        return self._build_params({**self.optional_params, **raw})

    @abstractmethod
    def _build_params(self, raw: Mapping[str, Any]) -> ParamsT:
        """All parameters present (defaults filled in) -> params dataclass."""

    @property
    @abstractmethod
    def params_type(self) -> type: ...

    # -- tensors ------------------------------------------------------------
    @abstractmethod
    def input_shapes(self, params: ParamsT, direction: Direction) -> dict[str, Shape]:
        """Logical shapes of the kernel's inputs, in the order they are drawn."""

    @abstractmethod
    def output_shape(self, params: ParamsT, direction: Direction) -> Shape:
        """Logical shape of the primary output."""

    def output_names(self, params: ParamsT, direction: Direction) -> tuple[str, ...]:
        """The kernel's outputs, in the order it returns them; the first is the primary one."""
        return ("out",)

    def outputs(self, params: ParamsT, direction: Direction, dtype: str) -> dict[str, TensorSpec]:
        """Every output's logical shape and format. By default one output in the case's output format, or
        in the one the params' `out_dtype` asks for (an fp8 conv or gemm writing bf16)."""
        (name,) = self.output_names(params, direction)
        fmt = getattr(params, "out_dtype", "") or output_dtype_name(dtype)
        return {name: TensorSpec(self.output_shape(params, direction), fmt)}

    def layout_problem(self, layout: str) -> str | None:
        """None when `layout` is one of this op's layouts; UNKNOWN_LAYOUT when it is no name of this op (the
        caller lists the valid names, with a did-you-mean); else why a layout string is malformed. By default
        the listed ones; an op whose layouts are data (conv) accepts more than it lists."""
        return None if layout in self.layouts else UNKNOWN_LAYOUT

    def layout_params_problem(self, params: ParamsT, layout: str) -> str | None:
        """Why this (valid) layout cannot store this problem's tensors (None when it can): a tensor op's
        channels_last on a rank-2 shape."""
        return None

    def dtype_params_problem(self, params: ParamsT, dtype: str) -> str | None:
        """Why this problem cannot run in this (valid) dtype (None when it can): fp4 needs an even K, an
        output format only fp8 chooses. By default: an input drawn from a range of its own (input_ranges:
        div's and pow's `y_range`) that its format cannot hold, as a case's range is checked."""
        formats = self.input_formats(params, self.directions[0], dtype)
        for name, (lo, hi) in self.input_ranges(params, (-1.0, 1.0)).items():
            largest = largest_finite(formats[name])
            if max(abs(lo), abs(hi)) > largest:
                return (f"input {name}'s range [{lo:g}, {hi:g}] goes beyond {formats[name]}'s largest finite value "
                        f"{largest:g}: it would draw inf")
        return None

    def shared_rounding(self, params: ParamsT, direction: Direction = "fwd") -> str:
        """Why a correct kernel's errors may lean one way across many elements ("" when they cannot): one
        rounding applied to many of them, such as a product of f32 scales computed once. bias_z assumes
        independent per-element errors, so it does not apply there (generator.cases.applicable_tolerances)."""
        return ""

    def judged_by_intervals(self, params: ParamsT) -> str:
        """Why the op's bound is an acceptance interval that membership alone decides ("" when it is an error
        bound): bound_rms and bias_z then mean nothing and do not apply (generator.cases.applicable_tolerances)."""
        return ""

    def input_ranges(self, params: ParamsT, case_range: tuple[float, float]) -> Mapping[str, tuple[float, float]]:
        """Inputs drawn from a range of their own (a divisor near zero, pow's exponent) instead of the
        case's; by default every input takes the case's range."""
        return {}

    def input_formats(self, params: ParamsT, direction: Direction, dtype: str) -> dict[str, str]:
        """Each input's format. By default the dtype's; for a pair "A_B" (fp8 with bf8) the first input takes
        A's format and every other input B's. An op whose inputs differ in kind (a scaled gemm's scales,
        attention's i8 Q and K with an f16 V) says so here."""
        first, second = operand_formats(dtype)
        return {name: first if index == 0 else second for index, name in enumerate(self.input_shapes(params, direction))}

    def largest_input(self, params: ParamsT, dtype: str) -> float:
        """The largest magnitude the case's input range may reach: by default the largest finite value of the
        input formats (a wider range would draw inf); an op that scales its inputs into the format allows more."""
        return largest_finite(dtype)

    def edge_data(self, params: ParamsT, direction: Direction, dtype: str) -> EdgeData | None:
        """The data of this problem's edges case (runner/edge_data.py), None for none: by default a low-bit format's
        whole range, where the primary output holds every sum of it (format_edges)."""
        output = self.outputs(params, direction, dtype)[self.output_names(params, direction)[0]]
        return format_edges(dtype, output.dtype, self.reduction_size(params, direction))

    # -- cost -----------------------------------------------------------------
    @abstractmethod
    def reduction_size(self, params: ParamsT, direction: Direction) -> int:
        """Products summed into each output element."""

    def flops(self, params: ParamsT, direction: Direction) -> int:
        """2 per multiply-add: every output element sums reduction_size products."""
        return 2 * math.prod(self.output_shape(params, direction)) * self.reduction_size(params, direction)

    def scratch_elements(self, params: ParamsT, direction: Direction) -> int:
        """float64 elements the reference holds at its peak besides its inputs and outputs (conv's unfolded
        windows, attention's score matrices, a chain's intermediate); the bound's Σ|a·b| runs the same
        computation again. runner/memory.py sizes the pre-run memory check with it. None by default."""
        return 0

    def kernel_scratch_bytes(self, params: ParamsT, direction: Direction, dtype: str) -> int:
        """Bytes the default kernel holds besides its inputs and outputs where that outgrows "as much again as
        its outputs" (runner/memory.kernel_bytes): torch's attention with an lse or a score tensor holds its
        f32 scores. 0 by default."""
        return 0

    def owns_params(self, params: ParamsT) -> bool:
        """Whether `params` are this op's (conv1d's, not conv2d's)."""
        return isinstance(params, self.params_type)

    def bound_magnitude_inputs(self, params: ParamsT, direction: Direction) -> tuple[str, ...]:
        """The inputs whose magnitudes error_bound multiplies as they are (Σ|a·b|, attention's |Q|·|K|ᵀ and
        |V|, a fused chain's operands): the runner takes those as f32 while it widens them for the reference
        (runner/magnitude.scanned_inputs), so the bound does not read them again. None by default."""
        return ()

    def streamed_inputs(self, params: ParamsT, direction: Direction) -> tuple[str, ...]:
        """The inputs that the reference and the bound widen to float64 piece by piece themselves (attention's K
        and V at long context): the runner passes them in their input format, and runner/memory.py counts no
        float64 copy of them. None by default."""
        return ()

    # -- arithmetic probes (runner/arithmetic) --------------------------------
    def shape_class(self, params: ParamsT, direction: Direction) -> str:
        """The geometry a kernel may pick its algorithm by ("" when one class covers every shape)."""
        return ""

    def probe_params(self, params: ParamsT, direction: Direction) -> ParamsT | None:
        """A small problem of the same shape class, on which the numerics' probe_arithmetic runs; None when the
        op has no probes (its arithmetic is then assumed from the dtype, and the report says so)."""
        return None

    def unprobed_reason(self, params: ParamsT, direction: Direction) -> str:
        """Why probe_params gave no problem, as a report says it after "assumed"."""
        return f"{self.name} has no probes"

    # -- hooks added by the op families (each with its default) ----------------
    def lowered_dims(self, params: ParamsT, direction: Direction) -> tuple[int, int, int, int] | None:
        """(G, M, R, Ncol) of the op written as one batched matrix product (OpNumerics.lowered), from the
        shapes alone: runner/memory.py sizes an `accumulate = k` reference with it. None: no such form."""
        return None

    def output_dim_names(self, params: ParamsT, direction: Direction) -> tuple[str, ...]:
        """Names of the primary output's logical dims, as a report prints an element's position (a conv's y:
        n, k, h, w); () leaves them to the reader's default (e2egen/diagnose/coords.py)."""
        return ()


class ProductSumOp(Op[ParamsT]):
    """An op each of whose outputs sums `reduction_size` products of its inputs, then rounds (conv, gemm)."""

    def bound_magnitude_inputs(self, params: ParamsT, direction: Direction) -> tuple[str, ...]:
        return tuple(self.input_shapes(params, direction))  # Σ|a·b|

    def reduction_parts(self, params: ParamsT, direction: Direction) -> tuple[int, int]:
        """(samples, taps): into how many per-sample or per-tap partials a kernel may cut the reduction."""
        return 1, 1

    def accumulation_chunks(self, params: ParamsT, direction: Direction) -> frozenset[int]:
        """Lengths of runs of consecutive products (in the lowered reduction order) that a kernel of this op
        plausibly sums apart, besides powers of two (a conv's window multiples): the accumulator models
        `e2egen explain` searches (e2egen/diagnose/variants.py). None by default."""
        return frozenset()

    def probe_params(self, params: ParamsT, direction: Direction) -> ParamsT | None:
        """A small problem of the same shape class, on which the product-sum probes run."""
        return params


def named_outputs(names: Sequence[str], result: Any, error: Callable[[str], Exception]) -> dict[str, Any]:
    """A kernel's result as {output name: value}: one output may come bare, several as a tuple or list in
    `names` order, or as a mapping by name. Anything else raises error(explanation)."""
    if isinstance(result, Mapping):
        if set(result) != set(names):
            raise error(f"returned outputs {sorted(map(str, result))}, expected {list(names)}")
        return {name: result[name] for name in names}
    if len(names) == 1:
        return {names[0]: result}  # whatever it is: the output's own check names what is wrong
    if not isinstance(result, (tuple, list)) or len(result) != len(names):
        got = f"a {type(result).__name__} of {len(result)}" if isinstance(result, (tuple, list)) else type(result).__name__
        raise error(f"returned {got}, expected a tuple of {len(names)} tensors ({', '.join(names)})")
    return dict(zip(names, result))


def frozen_mapping(d: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(d))


# -- catalogue value checks (shared by ops) -------------------------------------
def is_int(value: Any) -> bool:
    # bool is an int subclass in Python; `groups = true` is a user error, not 1.
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def require_int(key: str, value: Any, minimum: int) -> int:
    if not is_int(value):
        raise ProblemError(key, value, f"expected an integer, got {type(value).__name__} {value!r}")
    if value < minimum:
        what = "positive" if minimum == 1 else f">= {minimum}"
        raise ProblemError(key, value, f"must be {what}, got {value}")
    return int(value)


def int_tuple(key: str, value: Any, length: int, minimum: int, dims_text: str) -> tuple[int, ...]:
    """An int (broadcast to every spatial dim) or a list of exactly `length` ints."""
    if is_int(value):
        return (require_int(key, value, minimum),) * length
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        if len(value) != length:
            raise ProblemError(key, value, f"expected an integer or a list of {length} integers ({dims_text}), got a list of {len(value)}")
        items = []
        for item in value:
            if not is_int(item):
                raise ProblemError(key, value, f"expected integers ({dims_text}), got {type(item).__name__} {item!r} in {list(value)!r}")
            if item < minimum:
                what = "positive" if minimum == 1 else f">= {minimum}"
                raise ProblemError(key, value, f"every entry must be {what}, got {list(value)!r}")
            items.append(int(item))
        return tuple(items)
    raise ProblemError(key, value, f"expected an integer or a list of {length} integers ({dims_text}), got {type(value).__name__} {value!r}")
