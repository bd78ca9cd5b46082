"""The options a case carries besides its problem: how its reference is
computed (`ReferenceOptions`) and which rounding-error model bounds it
(`BoundModel`).

Each is a small frozen, torch-free dataclass that lists its catalogue keys
once (`KEYS`): the catalogue loader validates its `[reference]` and `[bound]`
tables against them, expansion builds the dataclass from the resolved table,
and the generated suite writes and reads it back through `to_catalogue` /
`from_catalogue`. No other module spells these keys, their kinds or their
defaults.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal, Mapping, get_args

from e2egen.runner.arithmetic.model import Arithmetic
from e2egen.runner.errors import ProblemError
from e2egen.runner.ops.base import is_int

# Each closed set of values once, as a Literal type; the tuple of its values (choices, messages) derives from it.
Accumulator = Literal["f32", "f16", "bf16"]  # a format bound.acc may name
ACCUMULATORS: tuple[Accumulator, ...] = get_args(Accumulator)
TABLE: Final = "table"  # bound.ulps / bound.abs_error: the op's own allowance table (runner/intervals.py)
MEASURED: Final = "measured"  # bound.acc: follow the kernel's measured arithmetic (runner/arithmetic)
BoundAccumulator = Literal["measured", Accumulator]  # bound.acc: MEASURED, or a format that overrides it
BOUND_ACCUMULATORS: tuple[BoundAccumulator, ...] = get_args(BoundAccumulator)
ReferenceDevice = Literal["cpu", "device"]  # reference.device: the CPU, or the device the kernel runs on
REFERENCE_DEVICES: tuple[ReferenceDevice, ...] = get_args(ReferenceDevice)
# kinds: "bool"; "choice" (one of `choices`); "count" (an integer >= 0); "positive" (a finite number > 0);
# "nonnegative" (a finite number >= 0); "table_or_nonnegative" ("table": the op's own table, or a finite number >= 0).
OptionKind = Literal["bool", "choice", "count", "positive", "nonnegative", "table_or_nonnegative"]
OPTION_KINDS: tuple[OptionKind, ...] = get_args(OptionKind)


@dataclass(frozen=True)
class OptionKey:
    """One catalogue key of an options table: its attribute, kind (OptionKind) and (for "choice") choices."""

    name: str
    attribute: str
    kind: OptionKind
    choices: tuple[str, ...] = ()
    what: str = ""  # how a message names the value ("accumulator type"); the key when empty


def check_option(table: str, key: OptionKey, value: Any) -> Any:
    """`value` if it is valid for `key`, else ProblemError naming `table.key`, the value and what is valid."""
    path = f"{table}.{key.name}"
    if key.kind == "bool":
        if not isinstance(value, bool):
            raise ProblemError(path, value, f"expected true or false, got {value!r}")
    elif key.kind == "choice":
        if value not in key.choices:
            raise ProblemError.unknown(path, value, key.choices, what=key.what or key.name)
    elif key.kind == "count":
        if not is_int(value) or value < 0:
            raise ProblemError(path, value, f"expected 0 (off) or a positive integer, got {value!r}")
    elif key.kind == "table_or_nonnegative" and value == TABLE:
        pass
    else:
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if key.kind == "positive" and not (number and value > 0):
            raise ProblemError(path, value, f"expected a positive number, got {value!r}")
        if key.kind == "nonnegative" and not (number and value >= 0):
            raise ProblemError(path, value, f"expected a number >= 0, got {value!r}")
        if key.kind == "table_or_nonnegative" and not (number and value >= 0):
            raise ProblemError(path, value, f"expected \"table\" or a number >= 0, got {value!r}")
    return value


class CatalogueOptions:
    """What an options dataclass shares: its table name, keys, and the catalogue round trip."""

    TABLE: ClassVar[str]
    KEYS: ClassVar[tuple[OptionKey, ...]]

    def __post_init__(self) -> None:
        for key in self.KEYS:
            check_option(self.TABLE, key, getattr(self, key.attribute))

    @classmethod
    def key(cls, name: str) -> OptionKey:
        return next(k for k in cls.KEYS if k.name == name)

    @classmethod
    def catalogue_keys(cls) -> tuple[str, ...]:
        return tuple(k.name for k in cls.KEYS)

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """The catalogue form of the default options."""
        return cls().to_catalogue()

    @classmethod
    def from_catalogue(cls, table: Mapping[str, Any]):
        """Options from a (resolved) catalogue table; keys left out take their defaults."""
        unknown = [name for name in table if name not in cls.catalogue_keys()]
        if unknown:
            raise ProblemError.unknown(f"{cls.TABLE}.{unknown[0]}", unknown[0], cls.catalogue_keys(), what=f"{cls.TABLE} key")
        return cls(**{cls.key(name).attribute: value for name, value in table.items()})

    def to_catalogue(self) -> dict[str, Any]:
        """The catalogue table (every key, in KEYS order): round-trips through from_catalogue."""
        return {k.name: getattr(self, k.attribute) for k in self.KEYS}

    def changed(self) -> dict[str, Any]:
        """The catalogue keys whose value differs from the default."""
        default = type(self)()
        return {k.name: getattr(self, k.attribute) for k in self.KEYS if getattr(self, k.attribute) != getattr(default, k.attribute)}


@dataclass(frozen=True)
class ReferenceOptions(CatalogueOptions):
    """How the float64 reference is computed (see reference.py for what each variant models)."""

    device: ReferenceDevice = "cpu"
    ftz: bool = False
    accumulate: int = 0  # 0: off; k > 0: chunks of k products
    round_output: bool = False

    TABLE: ClassVar[str] = "reference"
    KEYS: ClassVar[tuple[OptionKey, ...]] = (
        OptionKey("device", "device", "choice", REFERENCE_DEVICES, "reference device"),
        OptionKey("ftz", "ftz", "bool"),
        OptionKey("accumulate", "accumulate", "count"),
        OptionKey("round_output", "round_output", "bool"),
    )


@dataclass(frozen=True)
class BoundModel(CatalogueOptions):
    """The rounding-error model of the per-element bound (see bound.py for the formula).

    lam: the safety factor on the probabilistic term (catalogue key `lambda`);
    acc: "measured" (the kernel's arithmetic as the probes found it) or a
    format that overrides the measured accumulator; strict: worst-case growth
    K instead of sqrt(K); c_out: output ulps allowed for the final rounding;
    ulps, abs_error: element-wise math's allowance per inexact primitive, in
    ulps of the compute format and absolute ("table": runner/intervals.py's).
    arithmetic: the measured findings (not a catalogue key: the run sets it).
    """

    lam: float = 5.0
    acc: BoundAccumulator = MEASURED
    strict: bool = False
    c_out: float = 1.0
    ulps: float | Literal["table"] = TABLE
    abs_error: float | Literal["table"] = TABLE
    arithmetic: Arithmetic | None = None

    TABLE: ClassVar[str] = "bound"
    KEYS: ClassVar[tuple[OptionKey, ...]] = (
        OptionKey("lambda", "lam", "positive"),
        OptionKey("acc", "acc", "choice", BOUND_ACCUMULATORS, "accumulator type"),
        OptionKey("strict", "strict", "bool"),
        OptionKey("c_out", "c_out", "nonnegative"),
        OptionKey("ulps", "ulps", "table_or_nonnegative"),
        OptionKey("abs_error", "abs_error", "table_or_nonnegative"),
    )

    def describe(self) -> str:
        acc = f"acc {self.acc}" if self.acc != MEASURED or self.arithmetic is None else self.arithmetic.describe_accumulation()
        return f"{acc}, lambda {self.lam:g}" + (", strict" if self.strict else "") + (
            f", c_out {self.c_out:g}" if self.c_out != 1.0 else "") + (
            f", ulps {self.ulps:g}" if self.ulps != TABLE else "") + (
            f", abs_error {self.abs_error:g}" if self.abs_error != TABLE else "")

    def with_arithmetic(self, arithmetic: Arithmetic | None) -> "BoundModel":
        from dataclasses import replace

        return replace(self, arithmetic=arithmetic)


EXACT: Final = "exact"  # require.inputs: not below the case's dtype
ANY: Final = "any"  # no requirement
InputRequirement = Literal["exact", "tf32", "f16", "bf16", "any"]
INPUT_REQUIREMENTS: tuple[InputRequirement, ...] = get_args(InputRequirement)
AccRequirement = Literal["any", "f64", "f32", "f16", "bf16"]
ACC_REQUIREMENTS: tuple[AccRequirement, ...] = get_args(AccRequirement)
RoundingRequirement = Literal["any", "nearest"]
ROUNDING_REQUIREMENTS: tuple[RoundingRequirement, ...] = get_args(RoundingRequirement)
SubnormalRequirement = Literal["any", "kept"]
SUBNORMAL_REQUIREMENTS: tuple[SubnormalRequirement, ...] = get_args(SubnormalRequirement)
ComputeRequirement = Literal["any", "f32", "f16", "bf16"]
COMPUTE_REQUIREMENTS: tuple[ComputeRequirement, ...] = get_args(ComputeRequirement)
RequirementName = Literal["inputs", "acc", "rounding", "subnormals", "compute"]  # Requirements' keys, KEYS order
REQUIREMENT_NAMES: tuple[RequirementName, ...] = get_args(RequirementName)


@dataclass(frozen=True)
class Requirements(CatalogueOptions):
    """inputs: the narrowest format the products may see ("exact": not below the case's dtype; a tf32
    case may round to tf32); acc: the narrowest format partial sums may pass through; rounding:
    "nearest" forbids truncation; subnormals: "kept" forbids flushing; compute: the narrowest format
    element-wise math may be computed in (the guide's rule: f16 math in f32, then cast).

    The defaults are e2egen's default policy (generator.defaults): every catalogue gets them unless it
    loosens them."""

    inputs: InputRequirement = EXACT
    acc: AccRequirement = "f32"
    rounding: RoundingRequirement = ANY
    subnormals: SubnormalRequirement = ANY
    compute: ComputeRequirement = "f32"

    TABLE: ClassVar[str] = "require"
    KEYS: ClassVar[tuple[OptionKey, ...]] = (
        OptionKey("inputs", "inputs", "choice", INPUT_REQUIREMENTS, "input requirement"),
        OptionKey("acc", "acc", "choice", ACC_REQUIREMENTS, "accumulator requirement"),
        OptionKey("rounding", "rounding", "choice", ROUNDING_REQUIREMENTS, "rounding requirement"),
        OptionKey("subnormals", "subnormals", "choice", SUBNORMAL_REQUIREMENTS, "subnormal requirement"),
        OptionKey("compute", "compute", "choice", COMPUTE_REQUIREMENTS, "compute-format requirement"),
    )


if Requirements.catalogue_keys() != REQUIREMENT_NAMES:  # pragma: no cover - a contradiction in this file
    raise AssertionError(f"RequirementName {REQUIREMENT_NAMES} must list Requirements.KEYS {Requirements.catalogue_keys()}")


# verifier.kind: no second verifier, or rocMLIR's (rocmlir-gen's legacy comparator, metrics/rocmlir_verifier.py)
VerifierKind = Literal["none", "rocmlir"]
VERIFIER_KINDS: tuple[VerifierKind, ...] = get_args(VerifierKind)
# verifier.decides: which verdict passes or fails the case; the other is reported beside it
VerdictChoice = Literal["both", "verifier", "e2egen"]
VERDICT_CHOICES: tuple[VerdictChoice, ...] = get_args(VerdictChoice)


@dataclass(frozen=True)
class VerifierOptions(CatalogueOptions):
    """A second verifier judged beside e2egen's own verdict: rocMLIR's, for catalogues imported from it.

    rms, abs_diff, rel_diff: its thresholds; 0 is "not given", as in rocmlir-gen (`if (RMSThreshold)`): the
    verifier's own default for the output format then applies (metrics/rocmlir_verifier.py holds them).
    decides: "both" (the case fails when either fails), "verifier" or "e2egen" (that one alone decides)."""

    kind: VerifierKind = "none"
    rms: float = 0.0
    abs_diff: float = 0.0
    rel_diff: float = 0.0
    decides: VerdictChoice = "both"

    TABLE: ClassVar[str] = "verifier"
    KEYS: ClassVar[tuple[OptionKey, ...]] = (
        OptionKey("kind", "kind", "choice", VERIFIER_KINDS, "verifier"),
        OptionKey("rms", "rms", "nonnegative"),
        OptionKey("abs_diff", "abs_diff", "nonnegative"),
        OptionKey("rel_diff", "rel_diff", "nonnegative"),
        OptionKey("decides", "decides", "choice", VERDICT_CHOICES, "verdict choice"),
    )


OPTION_TYPES: Mapping[str, type[CatalogueOptions]] = {"reference": ReferenceOptions, "bound": BoundModel,
                                                     "require": Requirements, "verifier": VerifierOptions}
