"""A run against the one before: new failures, fixed failures, and drifts.

A drift is a case that still passes but whose checked metric grew by more
than `factor` (default 4x) since the previous run: the early warning before
it crosses its tolerance. Inputs are fresh every night, so small changes are
noise; a factor of 4 is rarely noise. A metric that was exactly 0 and is not
any more counts as an infinite growth.

The kernels' arithmetic is compared too (arithmetic.py): a cell whose
findings differ from the previous run's for the same impl, device and cell.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from e2egen.nightly.records import CaseRecord, tolerance_ratio
from e2egen.nightly.report.arithmetic import ArithmeticComparison, cell_arithmetic, compare_arithmetic

DEFAULT_DRIFT = 4.0


@dataclass(frozen=True)
class StatusChange:
    case_id: str
    now: CaseRecord
    before: CaseRecord | None  # None: the case is new since the previous run


@dataclass(frozen=True)
class Drift:
    case_id: str
    metric: str
    before: float
    now: float
    tolerance: float
    record: CaseRecord

    @property
    def growth(self) -> float:
        return self.now / self.before if self.before > 0 else math.inf

    @property
    def ratio(self) -> float:
        """now / tolerance: how much of its headroom the metric uses now."""
        return tolerance_ratio(self.now, self.tolerance)


@dataclass(frozen=True)
class RunComparison:
    run_id: str
    against: str
    new_failures: tuple[StatusChange, ...]
    fixed: tuple[StatusChange, ...]
    drifts: tuple[Drift, ...]
    factor: float
    only_before: tuple[str, ...]  # cases the previous run had and this one has not
    only_now: tuple[str, ...]
    arithmetic: ArithmeticComparison | None = None  # None: the previous run recorded no arithmetic

    @property
    def arithmetic_changes(self) -> tuple:
        return self.arithmetic.changes if self.arithmetic is not None else ()


def compare_runs(now: Sequence[CaseRecord], before: Sequence[CaseRecord], *, run_id: str, against: str,
                 factor: float = DEFAULT_DRIFT) -> RunComparison:
    previous = {r.case_id: r for r in before}
    current = {r.case_id: r for r in now}
    new_failures, fixed, drifts = [], [], []
    for case_id, record in current.items():
        old = previous.get(case_id)
        if record.status == "failed" and (old is None or old.status != "failed"):
            new_failures.append(StatusChange(case_id, record, old))
        elif record.status == "passed" and old is not None and old.status == "failed":
            fixed.append(StatusChange(case_id, record, old))
        if record.status == "passed" and old is not None and old.status == "passed":
            drifts.extend(_drifts(record, old, factor))
    drifts.sort(key=lambda d: (-d.ratio, -d.growth if math.isfinite(d.growth) else -math.inf, d.case_id, d.metric))
    return RunComparison(
        run_id=run_id, against=against,
        new_failures=tuple(sorted(new_failures, key=lambda c: c.case_id)),
        fixed=tuple(sorted(fixed, key=lambda c: c.case_id)),
        drifts=tuple(drifts), factor=factor,
        only_before=tuple(sorted(set(previous) - set(current))),
        only_now=tuple(sorted(set(current) - set(previous))),
        arithmetic=compare_arithmetic(cell_arithmetic(now), cell_arithmetic(before), against=against),
    )


def _drifts(now: CaseRecord, before: CaseRecord, factor: float) -> list[Drift]:
    out = []
    for metric, tolerance in now.tolerances.items():
        if isinstance(tolerance, bool):
            continue
        value, old = now.metrics.get(metric), before.metrics.get(metric)
        if value is None or old is None or not math.isfinite(value) or not math.isfinite(old):
            continue
        if value > 0 and (old <= 0 or value > factor * old):
            out.append(Drift(now.case_id, metric, float(old), float(value), float(tolerance), now))
    return out
