"""Judging a comparison against a tolerance table, and saying why in words.

A check looks at exactly the metrics the table names, plus the always-on
counts: nan_mismatch, inf_mismatch and overflow fail when non-zero unless the
table allows them by count (e.g. overflow = 10). An integer comparison is
exact by default: when the table names neither mismatches nor max_abs_diff,
mismatches must be 0.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Mapping

from e2egen.metrics.names import (ALLOWANCE_NAMES, BIAS_MIN_ULPS, BOUND_RMS_MIN_ELEMENTS, INTEGER_METRIC_NAMES,
                                  TOLERANCE_KEYS, unknown_name_error)


@dataclass(frozen=True)
class Failure:
    metric: str
    value: float
    tolerance: float
    ratio: float  # value / tolerance (inf when the tolerance is 0)
    reason: str  # in words, with the worst (or first) element


@dataclass(frozen=True)
class Row:
    """One metric as the report shows it."""

    metric: str
    value: float
    tolerance: float | None  # None: computed but not checked
    ratio: float | None
    passed: bool
    worst: Any  # WorstElement or None
    not_judged: str = ""  # why a tolerance given was not applied (too few elements for an aggregate)


def _ratio(value: float, tolerance: float) -> float:
    if tolerance == 0:
        return 0.0 if value == 0 else math.inf
    return value / tolerance


def _elements(count: int, verb: str) -> str:
    """'1 element differs', '3 elements differ'."""
    return f"1 element {verb}s" if count == 1 else f"{count} elements {verb}"


def _validate(key: str, tolerance: object) -> float:
    if isinstance(tolerance, bool) or not isinstance(tolerance, numbers.Real) or math.isnan(tolerance) or tolerance < 0:
        raise ValueError(f"tolerance for {key} must be a number >= 0, got {tolerance!r}")
    return float(tolerance)


def _count_reason(comparison, name: str, count: int, tolerance: float, worst) -> str:
    first = f" (first: {worst.describe()})" if worst is not None else ""
    of_result = "1 element of the exact result" if count == 1 else f"{count} elements of the exact result"
    if name == "nan_mismatch" and comparison.is_integer:
        text = f"{of_result} {'is' if count == 1 else 'are'} NaN, which an integer output cannot match{first}"
    elif name == "inf_mismatch" and comparison.is_integer:
        text = f"{of_result} {'is' if count == 1 else 'are'} ±inf, which an integer output cannot match{first}"
    elif name == "nan_mismatch":
        text = (f"{_elements(count, 'disagree')} on NaN: out is NaN where the exact result is not, "
                f"or a number where the exact result is NaN{first}")
    elif name == "inf_mismatch":
        text = (f"{_elements(count, 'disagree')} on infinity: out is ±inf where round_{comparison.dtype}(ref) "
                f"is finite, has the wrong sign, or is not what an overflowing exact result allows "
                f"(max or inf up to 2**(emax+1), inf beyond){first}")
    elif name == "overflow" and comparison.is_integer:
        text = (f"{of_result} {'lies' if count == 1 else 'lie'} outside {comparison.dtype}'s range "
                f"[{comparison.format_min}, {comparison.format_max}]: narrow the input range{first}")
    elif name == "overflow":
        text = (f"{of_result} {'exceeds' if count == 1 else 'exceed'} {comparison.dtype}'s largest value "
                f"{comparison.format_max:g}: narrow the input range{first}")
    else:  # integer mismatches, checked by default
        text = f"{_elements(count, 'differ')} from the exact result{first}"
    if tolerance > 0:
        text += f"; {tolerance:g} allowed"
    elif name == "overflow":
        text += f"; or allow them with overflow = {count}"
    elif name == "mismatches":
        text += "; integer outputs must match exactly unless the tolerances name mismatches or max_abs_diff"
    return text


# What a systematic lean suggests, by where it points (FloatComparison.bias_lean).
BIAS_CAUSES = {
    "toward zero": "the outputs lean toward zero: rounding toward zero (truncation), or a factor below 1",
    "away from zero": "the outputs lean away from zero: a factor above 1, or rounding away from zero",
    "upward": "the outputs lean upward: an added term, or rounding up",
    "downward": "the outputs lean downward: a dropped term, or rounding down",
    "": "a scaled result, truncation, a dropped or added term",
}


def _metric_reason(comparison, name: str, value: float, tolerance: float, ratio: float, worst) -> str:
    where = f"; worst element {worst.describe()}" if worst is not None else ""
    text = f"{name} = {value:.6g} exceeds its tolerance {tolerance:g} ({ratio:.3g}x){where}"
    if name == "rounding_rms":  # an aggregate: no element is to blame
        text += ": the output is further from the correctly rounded result, on average, than a correct kernel's"
    elif name == "bias_z":  # an aggregate: no element is to blame
        text += (f": the mean signed error in ulps is {value:.3g} standard errors away from what "
                 f"{getattr(comparison, 'rounding', 'nearest-even')} rounding gives, a systematic error "
                 f"({BIAS_CAUSES.get(getattr(comparison, 'bias_lean', ''), BIAS_CAUSES[''])})")
    elif name == "bound_rms":
        text += ": the errors sit near their bounds on average, more than a correctly rounded result's do"
    return text


def check(comparison, tolerances: Mapping[str, float]) -> "Verdict":
    """The verdict of a FloatComparison or IntegerComparison under a tolerance table."""
    if not isinstance(tolerances, Mapping):
        raise ValueError(f"tolerances must be a mapping of metric name to tolerance, got {type(tolerances).__name__}")
    checked: dict[str, float] = {}
    for key, tolerance in tolerances.items():
        if key not in TOLERANCE_KEYS:
            raise unknown_name_error("tolerance key", key, TOLERANCE_KEYS)
        why = comparison.why_not_applicable(key)
        if why is not None:
            raise ValueError(why)
        checked[key] = _validate(key, tolerance)

    counted = dict(comparison.counts)
    if comparison.is_integer and not any(k in checked for k in INTEGER_METRIC_NAMES):
        counted["mismatches"] = comparison.mismatches  # exact by default
    rows, failures = [], []
    for name, count in counted.items():
        tolerance = checked.get(name, 0.0)
        worst = comparison.worst.get(name)
        ratio = _ratio(count, tolerance)
        passed = count <= tolerance
        rows.append(Row(name, count, tolerance, ratio, passed, worst))
        if not passed:
            failures.append(Failure(name, count, tolerance, ratio,
                                    _count_reason(comparison, name, count, tolerance, worst)))
    for name, value in comparison.metric_values.items():
        if name in counted:
            continue
        worst = comparison.worst.get(name)
        tolerance = checked.get(name)
        if tolerance is None:
            rows.append(Row(name, value, None, None, True, worst))
            continue
        ratio = _ratio(value, tolerance)
        if name == "bound_rms" and comparison.compared < BOUND_RMS_MIN_ELEMENTS:
            rows.append(Row(name, value, tolerance, ratio, True, worst,
                            f"not judged: {comparison.compared} compared, fewer than {BOUND_RMS_MIN_ELEMENTS}"))
            continue
        lean = getattr(comparison, "bias_ulps", math.inf)
        if name == "bias_z" and value > tolerance and lean < BIAS_MIN_ULPS:
            rows.append(Row(name, value, tolerance, ratio, True, worst,
                            f"not judged: a lean of {lean:.3g} ulp {comparison.bias_lean}, below {BIAS_MIN_ULPS:g}"))
            continue
        passed = value <= tolerance
        rows.append(Row(name, value, tolerance, ratio, passed, worst))
        if not passed:
            failures.append(Failure(name, value, tolerance, ratio,
                                    _metric_reason(comparison, name, value, tolerance, ratio, worst)))
    return Verdict(passed=not failures, failures=tuple(failures), rows=tuple(rows),
                   comparison=comparison, tolerances=checked)


def _fmt(value: float) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    failures: tuple[Failure, ...]
    rows: tuple[Row, ...]
    comparison: Any
    tolerances: dict[str, float]

    def __bool__(self) -> bool:
        return self.passed

    @property
    def summary(self) -> str:
        """One line: PASS, or FAIL with every failing metric, its value and tolerance."""
        if self.passed:
            named = [k for k in self.tolerances if k not in ALLOWANCE_NAMES]
            text = f"PASS ({', '.join(named) if named else 'no metric named'}"
            allowed = [f"{row.metric} {int(row.value)}" for row in self.rows
                       if row.metric in ALLOWANCE_NAMES and row.value > 0]
            return text + (f"; allowed: {', '.join(allowed)})" if allowed else "; no NaN/inf mismatch or overflow)")
        parts = []
        for f in self.failures:
            if f.metric in ALLOWANCE_NAMES or f.metric == "mismatches":
                parts.append(f"{f.metric} {int(f.value)} > {f.tolerance:g} allowed")
            else:
                parts.append(f"{f.metric} {f.value:.4g} > {f.tolerance:g} ({f.ratio:.3g}x)")
        return "FAIL: " + "; ".join(parts)

    def __str__(self) -> str:
        c = self.comparison
        header = f"{'PASS' if self.passed else 'FAIL'}: {c.dtype} output, shape {tuple(c.shape)}, {c.n} elements"
        if not c.is_integer:
            header += f", {c.compared} compared"
            if c.ftz:
                header += f", ftz allowance used by {c.ftz_allowed}"
            header += f" [{c.backend}]"
        lines = [header, f"  {'metric':<18}{'value':<14}{'tolerance':<12}{'margin':<10}{'':<6}worst element"]
        for row in self.rows:
            tolerance = "-" if row.tolerance is None else f"{row.tolerance:g}"
            margin = "-" if row.ratio is None else f"{row.ratio:.3g}"
            status = "" if row.tolerance is None else ("-" if row.not_judged else "ok" if row.passed else "FAIL")
            worst = row.not_judged or (row.worst.describe() if row.worst is not None else "")
            lines.append(f"  {row.metric:<18}{_fmt(row.value):<14}{tolerance:<12}{margin:<10}{status:<6}{worst}")
        if not c.is_integer:
            total = max(c.compared, 1)
            buckets = ", ".join(f"{k}: {v} ({100 * v / total:.3g}%)" for k, v in c.histogram.items() if v)
            lines.append(f"  |ref - out| / |ref| histogram: {buckets or 'no compared element'}")
        if self.failures:
            lines.append("  failures:")
            lines.extend(f"    - {f.reason}" for f in self.failures)
        return "\n".join(lines)
