"""What a kernel's arithmetic is, as the probes measure it (torch-free).

One `Arithmetic` per cell (op, direction, dtype, layout) of one kernel on one
device. Each field is a finding of one probe (probes.py), stated in terms
that do not depend on the problem's size, so the bound of any case of the
cell can follow it (runner/bound.py):

inputs            the format the products really see: "exact" (the inputs as
                  given) or "tf32" / "bf16" / "f16" (the kernel rounds each
                  input first), with `inputs_rounding` "nearest" or "toward-zero".
acc_bits          significand bits (with the implicit one) of the narrowest
                  format a partial sum passes through between distant
                  products: 53 f64, 24 f32, 11 f16, 8 bf16. `acc_bits_exact`
                  is false when the probe's range ended first: "at least".
groups            how the reduction is cut when some partial sums are kept
                  wider than `acc_bits`: "none"; "taps" (one partial per
                  kernel tap, as col2im keeps them); "samples" (one per batch
                  sample); "chunks" (of `group_size` consecutive products in
                  the documented reduction order, runner/ops/product_sum/lowering.py).
reversed          the partials are added last group first (in the documented
                  reduction order of runner/ops/product_sum/lowering.py).
partials          "stored": each group's partial is rounded to the accumulator
                  before it is added (col2im's columns); "running": it is added
                  at its own width and the running sum rounded.
inner_bits        significand bits inside a group (0 when groups = "none").
rounding          the rounding of the result and of accumulation where it
                  shows: "nearest-even", "nearest-away", "toward-zero", "up",
                  "down", "faithful" (always a neighbour, no single mode).
subnormal_inputs  "kept" | "flushed";  subnormal_outputs likewise.
special_values    "ieee" when NaN and inf propagate as IEEE-754 says, else
                  what differed ("inf*0 gave 0").
unexplained       crafted sums that came back with a value no hypothesis of
                  any probe explains (a dropped or doubled product, a wrong
                  index): not rounding, a kernel bug. Such findings are not
                  used to widen a bound (the bound assumes the dtype's
                  arithmetic instead) and the case fails, naming them.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal, Mapping, get_args

# Each finding's closed set of values once, as a Literal type; the tuple of its values derives from it.
InputFormat = Literal["exact", "tf32", "bf16", "f16"]
INPUT_FORMATS: tuple[InputFormat, ...] = get_args(InputFormat)
Rounding = Literal["nearest-even", "nearest-away", "toward-zero", "up", "down", "faithful"]
ROUNDINGS: tuple[Rounding, ...] = get_args(Rounding)
Grouping = Literal["none", "taps", "samples", "chunks"]
GROUPINGS: tuple[Grouping, ...] = get_args(Grouping)
Subnormals = Literal["kept", "flushed"]
SUBNORMALS: tuple[Subnormals, ...] = get_args(Subnormals)
Partials = Literal["stored", "running"]
PARTIALS: tuple[Partials, ...] = get_args(Partials)
InputRounding = Literal["nearest", "toward-zero"]  # how inputs (or the intermediate) are rounded to their format
INPUT_ROUNDINGS: tuple[InputRounding, ...] = get_args(InputRounding)
Intermediate = Literal["", InputFormat]  # "": the op has no such intermediate
INTERMEDIATES: tuple[Intermediate, ...] = get_args(Intermediate)
# The probes' revision, part of every profile's versions: bump it with any change that can alter what a
# probe finds (an op's probe_arithmetic: runner/ops/product_sum/probes.py and experiments.py, and every other
# family's probes), so that cached and shipped findings of the old probes are not used (runs probe again; the
# shipped profiles must be written again: `e2egen arithmetic --out runner/arithmetic/profiles`).
PROBES_REVISION = 3
# Significand bits (the implicit one included) of the formats findings name.
FORMAT_BITS = {"f64": 53, "f32": 24, "tf32": 11, "f16": 11, "bf16": 8, "f8e4m3fn": 4, "f8e5m2": 3, "f8e4m3fnuz": 4, "f8e5m2fnuz": 3}
# The significand widths a finding may name: the probes report 2..61 (a gap range capped at 60, runner/ops/*/probes.py);
# anything outside 1..64 (x87's 64-bit significand the widest a kernel could keep) is no arithmetic at all.
MIN_BITS, MAX_BITS = 1, 64
MAX_GROUP_SIZE = 2 ** 40  # a chunk of consecutive products: far beyond any reduction a case runs
MAX_TEXT = 10_000  # characters of one free-text finding (special_values, probed_with, a note)


def format_of_bits(bits: int, exact: bool = True) -> str:
    """The named format with that many significand bits ("f32", "f16"...), or "N-bit" / ">= N-bit"."""
    names = {53: "f64", 24: "f32", 11: "f16", 8: "bf16"}
    if not exact:
        return f">= {bits}-bit" if bits not in names or bits < 53 else "f64"
    return names.get(bits, f"{bits}-bit")


@dataclass(frozen=True)
class CellKey:
    """What one set of findings covers: op, direction, dtype, layout and the op's shape class
    (Op.shape_class: e.g. a conv's "1x1" or "window-strided"; empty when one class covers every shape).
    Written op/direction/dtype/layout[/shape class]; the shape class may hold "/" itself (a scaled gemm's
    "mx32/e8m0-e8m0/out-f32"), the other four may not."""

    op: str
    direction: str
    dtype: str
    layout: str
    shape: str = ""

    def __post_init__(self) -> None:
        for name in ("op", "direction", "dtype", "layout"):
            value = getattr(self, name)
            if not value or "/" in value:
                raise ValueError(f"a cell's {name} must be a non-empty name without '/', got {value!r}")

    def __str__(self) -> str:
        parts = [self.op, self.direction, self.dtype, self.layout] + ([self.shape] if self.shape else [])
        return "/".join(parts)

    @classmethod
    def parse(cls, text: str) -> "CellKey":
        parts = text.split("/", 4)
        if len(parts) not in (4, 5) or not all(parts):
            raise ValueError(f"a cell is op/direction/dtype/layout[/shape class], got {text!r}")
        return cls(*parts)


@dataclass(frozen=True)
class Arithmetic:
    inputs: InputFormat = "exact"
    inputs_rounding: InputRounding = "nearest"
    acc_bits: int = 24
    acc_bits_exact: bool = True
    groups: Grouping = "none"
    group_size: int = 0
    reversed: bool = False
    partials: Partials = "stored"
    inner_bits: int = 0
    rounding: Rounding = "nearest-even"
    subnormal_inputs: Subnormals = "kept"
    subnormal_outputs: Subnormals = "kept"
    special_values: str = "ieee"
    intermediate: Intermediate = ""  # a fused op's intermediate (attention's P) before its second product: "" (no
    # such intermediate), "exact" (kept in the compute format) or the format it is rounded to
    intermediate_rounding: InputRounding = "nearest"
    compute: str = ""  # element-wise math: the format it is computed in ("" where not measured: other ops)
    probed_with: str = ""  # the problem the probes ran on
    notes: tuple[str, ...] = field(default_factory=tuple)  # what a probe saw but could not pin down
    unexplained: tuple[str, ...] = field(default_factory=tuple)  # outcomes no arithmetic explains: a bug

    def __post_init__(self) -> None:
        for name, choices in (("inputs", INPUT_FORMATS), ("rounding", ROUNDINGS), ("groups", GROUPINGS),
                              ("subnormal_inputs", SUBNORMALS), ("subnormal_outputs", SUBNORMALS)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} = {getattr(self, name)!r}; valid: {', '.join(choices)}")
        if self.partials not in PARTIALS:
            raise ValueError(f"partials = {self.partials!r}; valid: {', '.join(PARTIALS)}")
        for name in ("inputs_rounding", "intermediate_rounding"):
            if getattr(self, name) not in INPUT_ROUNDINGS:
                raise ValueError(f"{name} = {getattr(self, name)!r}; valid: {', '.join(INPUT_ROUNDINGS)}")
        if self.intermediate not in INTERMEDIATES:
            raise ValueError(f"intermediate = {self.intermediate!r}; valid: (empty), {', '.join(INPUT_FORMATS)}")
        self._check_numbers_and_text()

    def _check_numbers_and_text(self) -> None:
        """Every other field's type and range (a finding read from a file is checked like a catalogue's value:
        acc_bits = -3 would make a bound 10^8 looser, "24" crash it): ValueError naming the field, the value and
        what is valid."""
        for name in ("acc_bits_exact", "reversed"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} = {getattr(self, name)!r}; valid: true, false")
        for name, low in (("acc_bits", MIN_BITS), ("inner_bits", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_BITS:
                raise ValueError(f"{name} = {value!r}; valid: an integer number of significand bits, {low} to {MAX_BITS}")
        size = self.group_size
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_GROUP_SIZE:
            raise ValueError(f"group_size = {size!r}; valid: an integer, 0 to {MAX_GROUP_SIZE}")
        if self.groups == "chunks" and size < 2:
            raise ValueError(f"group_size = {size!r} with groups = \"chunks\"; valid: 2 or more products per chunk")
        if self.groups != "chunks" and size != 0:
            raise ValueError(f"group_size = {size!r} with groups = {self.groups!r}; valid: 0 (only chunks have a size)")
        if self.groups == "none" and self.inner_bits != 0:
            raise ValueError(f"inner_bits = {self.inner_bits!r} with groups = \"none\"; valid: 0 (no groups, no inner sums)")
        if self.groups != "none" and self.inner_bits < MIN_BITS:
            raise ValueError(f"inner_bits = {self.inner_bits!r} with groups = {self.groups!r}; valid: {MIN_BITS} to {MAX_BITS}")
        if self.compute not in ("", *FORMAT_BITS):
            raise ValueError(f"compute = {self.compute!r}; valid: (empty), {', '.join(FORMAT_BITS)}")
        for name in ("special_values", "probed_with"):
            value = getattr(self, name)
            if not isinstance(value, str) or len(value) > MAX_TEXT:
                raise ValueError(f"{name} = {_short(value)}; valid: a string of at most {MAX_TEXT} characters")
        if not self.special_values:
            raise ValueError('special_values = ""; valid: "ieee" or what differed ("inf*0 gave 0")')
        for name in ("notes", "unexplained"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(isinstance(text, str) and len(text) <= MAX_TEXT for text in value):
                raise ValueError(f"{name} = {_short(value)}; valid: a list of strings of at most {MAX_TEXT} characters each")

    # -- what the bound needs ------------------------------------------------------
    @property
    def acc_unit_roundoff(self) -> float:
        return math.ldexp(1.0, -self.acc_bits)

    @property
    def inner_unit_roundoff(self) -> float:
        return math.ldexp(1.0, -self.inner_bits) if self.inner_bits else 0.0

    @property
    def truncates(self) -> bool:
        """Errors of one sign: the bound grows linearly in the number of roundings."""
        return self.rounding in ("toward-zero", "up", "down")

    @property
    def flushes(self) -> bool:
        return self.subnormal_inputs == "flushed" or self.subnormal_outputs == "flushed"

    def group_count(self, reduction_size: int, samples: int, taps: int) -> int:
        """Partials the reduction is cut into (1 when not grouped)."""
        if self.groups == "taps":
            return max(1, min(taps, reduction_size))
        if self.groups == "samples":
            return max(1, min(samples, reduction_size))
        if self.groups == "chunks" and self.group_size:
            return max(1, math.ceil(reduction_size / self.group_size))
        return 1

    # -- words ----------------------------------------------------------------------
    @property
    def acc_name(self) -> str:
        return format_of_bits(self.acc_bits, self.acc_bits_exact)

    def describe_inputs(self) -> str:
        if self.inputs == "exact":
            return "products see the inputs as given"
        how = "" if self.inputs_rounding == "nearest" else " toward zero"
        return f"products see {self.inputs}-rounded inputs{how}"

    def describe_intermediate(self) -> str:
        if self.intermediate == "exact":
            return "the intermediate (attention's P, a chain's first product) stays in the compute format"
        how = "" if self.intermediate_rounding == "nearest" else " toward zero"
        return (f"the intermediate (attention's P, a chain's first product) is rounded to {self.intermediate}{how} "
                f"before the second product")

    def describe_accumulation(self) -> str:
        if self.groups == "none":
            return f"accumulates in {self.acc_name}"
        part = {"taps": "one partial per kernel tap", "samples": "one partial per sample",
                "chunks": f"one partial per {self.group_size} products"}[self.groups]
        return f"{part} in {format_of_bits(self.inner_bits)}, partials added in {self.acc_name}"

    def describe(self) -> str:
        if self.compute:
            return "; ".join([f"computes in {self.compute}", *(f"UNEXPLAINED: {text}" for text in self.unexplained[:1])])
        words = [self.describe_inputs(), self.describe_accumulation(), f"rounds {self.rounding}"]
        if self.intermediate:
            words.insert(1, self.describe_intermediate())
        if self.flushes:
            words.append(f"subnormals: inputs {self.subnormal_inputs}, outputs {self.subnormal_outputs}")
        if self.special_values != "ieee":
            words.append(f"special values: {self.special_values}")
        if self.unexplained:
            words.append(f"UNEXPLAINED: {self.unexplained[0]}")
        return "; ".join(words)

    # -- TOML form ------------------------------------------------------------------
    def to_table(self) -> dict[str, Any]:
        table = asdict(self)
        if not self.intermediate:  # product sums have none: their profiles stay as they were
            del table["intermediate"], table["intermediate_rounding"]
        if not self.compute:
            del table["compute"]
        table["notes"] = list(self.notes)
        table["unexplained"] = list(self.unexplained)
        return table

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> "Arithmetic":
        if not isinstance(table, Mapping):
            raise ValueError(f"the findings must be a table of keys, got {_short(table)}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ValueError(f"unknown key {unknown[0]!r}; valid: {', '.join(sorted(known))}")
        values = dict(table)
        for key in ("notes", "unexplained"):
            if isinstance(values.get(key), list):  # TOML's and JSON's form; anything else __post_init__ refuses
                values[key] = tuple(values[key])
        return cls(**values)

    def differences(self, other: "Arithmetic") -> list[str]:
        """The findings that differ ("acc_bits 24 -> 11"), probe bookkeeping left out."""
        skip = {"probed_with", "notes"}
        return [f"{f.name} {getattr(self, f.name)!r} -> {getattr(other, f.name)!r}" for f in fields(self)
                if f.name not in skip and getattr(self, f.name) != getattr(other, f.name)]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def assumed_arithmetic(dtype: str) -> Arithmetic:
    """What the bound assumes where nothing was measured: inputs as the dtype says (a tf32 kernel rounds
    them to tf32), one f32 accumulator rounding to nearest."""
    return Arithmetic(inputs="tf32" if dtype == "tf32" else "exact", probed_with="(assumed, not measured)")


def with_accumulator(arithmetic: Arithmetic, fmt: str) -> Arithmetic:
    """The same inputs and rounding, one flat accumulator of format `fmt` (a catalogue's `bound.acc`)."""
    return replace(arithmetic, acc_bits=FORMAT_BITS[fmt], acc_bits_exact=True, groups="none", group_size=0,
                   inner_bits=0, partials="stored", reversed=False)
