"""The seed's aggregate tables: per metric the average and the maximum over the cases of
each group, grouped by input range, dtype, direction, layout and reference variant, with
pass rates; and the relative-difference histogram summed over each group.

Averages and maxima run over the cases that computed the metric and got a
finite value (a case that crashed has no metrics; an infinite max_rel_diff
would make every average infinite): `nonfinite` counts the others.
Pass rate = passed / (passed + failed); skipped cases do not count.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from e2egen.metrics.names import HISTOGRAM_BUCKETS
from e2egen.nightly.records import CaseRecord

# Rows of the tables, in the seed's order of interest.
REPORT_METRICS = ("max_eps_diff", "max_ulp_diff", "max_abs_diff", "max_rel_diff", "max_rel_diff_old", "rms", "rel_l2",
                  "bound_ratio")

GROUPINGS: tuple[tuple[str, str], ...] = (
    ("range", "input range"),
    ("dtype", "dtype"),
    ("direction", "direction"),
    ("layout", "layout"),
    ("reference_variant", "reference variant"),
)

# Natural orders for the columns; values not listed follow, sorted.
_ORDER = {
    "dtype": ("f32", "tf32", "f16", "bf16", "f8e4m3", "f8e5m2", "i8"),
    "direction": ("fwd", "bwd_data", "bwd_weight"),
    "layout": ("nchw", "nhwc", "nn", "nt", "tn", "tt"),
}


@dataclass(frozen=True)
class MetricStats:
    count: int  # cases with a finite value
    average: float | None
    maximum: float | None
    nonfinite: int = 0


@dataclass(frozen=True)
class GroupStats:
    value: str
    passed: int
    failed: int
    skipped: int
    metrics: Mapping[str, MetricStats]

    @property
    def cases(self) -> int:
        return self.passed + self.failed + self.skipped

    @property
    def pass_rate(self) -> float | None:
        judged = self.passed + self.failed
        return self.passed / judged if judged else None


@dataclass(frozen=True)
class AggregateTable:
    axis: str
    title: str
    groups: tuple[GroupStats, ...]

    def metrics_present(self) -> tuple[str, ...]:
        return tuple(m for m in REPORT_METRICS if any(g.metrics[m].count or g.metrics[m].nonfinite for g in self.groups))


@dataclass(frozen=True)
class HistogramColumn:
    label: str
    counts: Mapping[str, int]  # bucket -> elements
    max_rel_diff: float | None
    ref: float | None = None  # the worst element's reference and output (the seed's cpuVal / gpuVal)
    out: float | None = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def axis_value(record: CaseRecord, axis: str) -> str:
    """A record's value on a grouping axis: a part of its case's id, or its reference variant."""
    return record.reference_variant if axis == "reference_variant" else record.axes[axis]


def column_order(axis: str) -> Callable[[str], tuple]:
    """Sort key for an axis' values: the natural order where there is one, else names with
    numbers compared as numbers (r0 < r1 < r10)."""
    order = _ORDER.get(axis, ())

    def key(value: str) -> tuple:
        if value in order:
            return (0, order.index(value), ())
        return (1, 0, tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", value)))

    return key


def metric_stats(values: Iterable[float | None]) -> MetricStats:
    finite, nonfinite = [], 0
    for v in values:
        if v is None:
            continue
        if isinstance(v, (int, float)) and math.isfinite(v):
            finite.append(float(v))
        else:
            nonfinite += 1
    if not finite:
        return MetricStats(0, None, None, nonfinite)
    return MetricStats(len(finite), math.fsum(finite) / len(finite), max(finite), nonfinite)


def group_stats(value: str, records: Sequence[CaseRecord]) -> GroupStats:
    status = [r.status for r in records]
    return GroupStats(
        value=value, passed=status.count("passed"), failed=status.count("failed"), skipped=status.count("skipped"),
        metrics={m: metric_stats(r.metrics.get(m) for r in records) for m in REPORT_METRICS},
    )


def aggregate(records: Sequence[CaseRecord], axis: str, title: str | None = None) -> AggregateTable:
    groups: dict[str, list[CaseRecord]] = {}
    for record in records:
        groups.setdefault(axis_value(record, axis), []).append(record)
    ordered = sorted(groups, key=column_order(axis))
    return AggregateTable(axis, title or axis, tuple(group_stats(v, groups[v]) for v in ordered))


def aggregate_all(records: Sequence[CaseRecord]) -> list[AggregateTable]:
    return [aggregate(records, axis, title) for axis, title in GROUPINGS]


def overall(records: Sequence[CaseRecord]) -> GroupStats:
    return group_stats("all", records)


def histogram_by(records: Sequence[CaseRecord], axis: str = "dtype") -> list[HistogramColumn]:
    """The relative-difference buckets summed over the cases of each group (one column per group)."""
    groups: dict[str, list[CaseRecord]] = {}
    for record in records:
        if record.histogram:
            groups.setdefault(axis_value(record, axis), []).append(record)
    columns = []
    for value in sorted(groups, key=column_order(axis)):
        counts = {b: sum(int(r.histogram.get(b, 0)) for r in groups[value]) for b in HISTOGRAM_BUCKETS}
        maximum = metric_stats(r.metrics.get("max_rel_diff") for r in groups[value]).maximum
        columns.append(HistogramColumn(value, counts, maximum))
    return columns


def histogram_of(record: CaseRecord) -> HistogramColumn | None:
    """One case's histogram, with its worst relative difference's element (the seed's worst-test table)."""
    if not record.histogram:
        return None
    worst = ((record.comparison or {}).get("worst") or {}).get("max_rel_diff") or {}
    return HistogramColumn(record.case_id, {b: int(record.histogram.get(b, 0)) for b in HISTOGRAM_BUCKETS},
                           record.metrics.get("max_rel_diff"), worst.get("ref"), worst.get("out"))


def worst_cases(records: Sequence[CaseRecord], top: int = 20) -> list[CaseRecord]:
    """Cases by margin (value / tolerance of their worst metric), worst first.

    Failed cases without a margin (crashes, setup errors) lead: nothing says how far off they are.
    """
    def key(record: CaseRecord) -> tuple:
        margin = record.margin
        if record.status == "failed" and margin is None:
            return (0, 0.0, record.case_id)
        return (1, -(margin if margin is not None else -1.0), record.case_id)
    judged = [r for r in records if r.status != "skipped"]
    return sorted(judged, key=key)[:top]
