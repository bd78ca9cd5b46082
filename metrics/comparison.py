"""The result of compare(): every metric, counts, histogram and worst elements.

FloatComparison for float outputs, IntegerComparison for i8/i32. Both are
frozen, serialise with as_dict() and judge themselves with check().
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from e2egen.metrics.names import ALLOWANCE_NAMES, BOUND_METRIC_NAMES, INTEGER_METRIC_NAMES, METRIC_NAMES
from e2egen.metrics.verdict import Verdict, check


@dataclass(frozen=True)
class WorstElement:
    """The element that set a metric (the first, for counts)."""

    index: int  # flat, row-major
    position: tuple[int, ...]  # the same index in the input's shape
    ref: float
    out: float
    bound: float | None = None  # the per-element bound, when compare() got one
    value: float | None = None  # the metric's value at this element (None for counts)

    def describe(self) -> str:
        text = f"#{self.index} {self.position}: ref {self.ref!r}, out {self.out!r}"
        if self.bound is not None:
            text += f", bound {self.bound!r}"
        return text

    def as_dict(self) -> dict:
        return {"index": self.index, "position": list(self.position), "ref": self.ref,
                "out": self.out, "bound": self.bound, "value": self.value}


@dataclass(frozen=True)
class FloatComparison:
    dtype: str
    shape: tuple[int, ...]
    n: int  # elements
    compared: int  # elements finite in ref and out with |ref| <= max_T: what the maxima run over
    ftz: bool
    rel_floor: float
    format_max: float  # T's largest finite value, for the overflow message
    max_abs_diff: float
    max_rel_diff: float
    max_rel_diff_old: float
    max_eps_diff: float
    max_ulp_diff: float
    rms: float
    rel_l2: float
    bound_ratio: float | None  # max |ref - out| / B; None without a bound
    bound_rms: float | None  # sqrt(mean((|ref - out| / B)**2)); None without a bound
    bias_z: float  # max |z| of the mean signed error in ulps (compare.py)
    rounding_rms: float  # rms deviation from the correctly rounded result, in ulps (compare.py)
    nan_mismatch: int
    inf_mismatch: int
    overflow: int
    ftz_allowed: int
    histogram: dict[str, int]
    worst: dict[str, WorstElement]
    backend: str
    rounding: str = "nearest-even"  # the rounding bias_z was centred for
    bias_lean: str = ""  # where bias_z's larger z points: "toward zero", "away from zero", "upward", "downward"
    bias_ulps: float = 0.0  # the mean deviation, in ulps, in that direction (the lean's size, >= 0)

    is_integer = False

    @property
    def metric_values(self) -> dict[str, float]:
        """The float metrics this comparison computed, by name."""
        values = {name: getattr(self, name) for name in METRIC_NAMES}
        for name in BOUND_METRIC_NAMES:
            if values[name] is None:
                del values[name]
        return values

    @property
    def counts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in ALLOWANCE_NAMES}

    def why_not_applicable(self, key: str) -> str | None:
        """Why a known tolerance key cannot be checked here, or None if it can."""
        if key in BOUND_METRIC_NAMES and getattr(self, key) is None:
            return f"{key} was not computed: pass compare(..., bound=B) with the per-element error bounds"
        if key == "mismatches":
            return (f"mismatches applies to integer outputs (i8, i32); this comparison is {self.dtype}: "
                    f"use {', '.join(METRIC_NAMES)}")
        return None

    def check(self, tolerances: Mapping[str, float]) -> Verdict:
        return check(self, tolerances)

    def as_dict(self) -> dict:
        """Every field as plain JSON types (non-finite floats stay floats: Python's json writes them)."""
        return {
            "dtype": self.dtype, "shape": list(self.shape), "n": self.n, "compared": self.compared,
            "ftz": self.ftz, "rel_floor": self.rel_floor, "backend": self.backend, "rounding": self.rounding,
            **{name: getattr(self, name) for name in METRIC_NAMES},
            **self.counts,
            "ftz_allowed": self.ftz_allowed,
            "histogram": dict(self.histogram),
            "worst": {name: w.as_dict() for name, w in self.worst.items()},
        }


@dataclass(frozen=True)
class IntegerComparison:
    """Exact comparison: ref (float64) must equal out element by element."""

    dtype: str
    shape: tuple[int, ...]
    n: int
    format_min: int
    format_max: int
    mismatches: int  # elements where ref != out (NaN, inf and out-of-range ref included)
    max_abs_diff: float  # over ref finite and within the format's range
    nan_mismatch: int  # ref NaN (an integer out cannot match it)
    inf_mismatch: int  # ref ±inf
    overflow: int  # ref finite but outside [format_min, format_max]
    worst: dict[str, WorstElement]

    is_integer = True

    @property
    def metric_values(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in INTEGER_METRIC_NAMES}

    @property
    def counts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in ALLOWANCE_NAMES}

    def why_not_applicable(self, key: str) -> str | None:
        if key in INTEGER_METRIC_NAMES or key in ALLOWANCE_NAMES:
            return None
        return (f"{key} is a float metric; {self.dtype} outputs are compared exactly: "
                f"use {', '.join(INTEGER_METRIC_NAMES + ALLOWANCE_NAMES)}")

    def check(self, tolerances: Mapping[str, float]) -> Verdict:
        return check(self, tolerances)

    def as_dict(self) -> dict:
        return {
            "dtype": self.dtype, "shape": list(self.shape), "n": self.n,
            **self.metric_values, **self.counts,
            "worst": {name: w.as_dict() for name, w in self.worst.items()},
        }
