"""What the nightly runs observed, case by case: the evidence `e2egen calibrate` and `e2egen select` decide from.

Runs are chosen from the results store as the N latest (report order: merged
shards count once, as the run they were merged into) or by id. For each case
the evidence holds, per chosen run that recorded a value, every metric's value,
whether the case failed, its margin (largest value / tolerance), its duration
and the largest |ref| among its recorded worst elements (a lower bound of the
output's magnitude, used for the format's floor of an absolute tolerance).
Only the store's public readers are used (runs(), run(), records()).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from e2egen.nightly.errors import NightlyError
from e2egen.nightly.store import RunInfo, Store


@dataclass
class CaseEvidence:
    """One case over the chosen runs."""

    case_id: str
    values: dict[str, list[tuple[str, float]]] = field(default_factory=dict)  # metric -> [(run_id, value)]
    statuses: list[tuple[str, str, str]] = field(default_factory=list)  # (run_id, status, reason)
    margins: list[tuple[str, float]] = field(default_factory=list)  # (run_id, margin)
    worst_metric: dict[str, str] = field(default_factory=dict)  # run_id -> metric closest to (or over) its tolerance
    durations: list[tuple[str, float]] = field(default_factory=list)  # (device, seconds)
    magnitude: float = 0.0  # largest |ref| / |out| among the recorded worst elements

    def runs_with(self, metric: str) -> int:
        return len({run for run, _ in self.values.get(metric, ())})

    def observed_max(self, metric: str) -> float | None:
        values = [v for _, v in self.values.get(metric, ())]
        return max(values) if values else None

    @property
    def failed_runs(self) -> list[tuple[str, str]]:
        return [(run, reason) for run, status, reason in self.statuses if status == "failed"]

    @property
    def max_margin(self) -> tuple[float, str] | None:
        """The largest margin over the runs, and the run it came from."""
        finite = [(m, run) for run, m in self.margins if not math.isnan(m)]
        return max(finite, key=lambda item: (item[0], item[1])) if finite else None


@dataclass(frozen=True)
class Evidence:
    runs: tuple[RunInfo, ...]  # the chosen runs, oldest first
    asked: int  # how many runs the user asked for
    cases: dict[str, CaseEvidence]

    @property
    def run_ids(self) -> tuple[str, ...]:
        return tuple(r.run_id for r in self.runs)

    def describe_runs(self) -> str:
        ids = ", ".join(f"{r.run_id} (seed {r.global_seed}, {r.recorded} cases)" for r in self.runs) or "none"
        short = f"; asked for {self.asked}, the store has {len(self.runs)}" if len(self.runs) < self.asked else ""
        return f"runs: {ids}{short}"


def choose_runs(store: Store, count: int | None, run_ids: Sequence[str] = (), *,
                allow_empty: bool = False) -> tuple[list[RunInfo], int]:
    """The runs to learn from: the given ids (unknown ones are a user error), else the `count` latest."""
    if run_ids:
        runs = [store.run(run_id) for run_id in dict.fromkeys(run_ids)]  # raises UnknownRun (a NightlyError)
        order = {r.run_id: i for i, r in enumerate(store.runs())}
        return sorted(runs, key=lambda r: order[r.run_id]), len(runs)
    if count is None or count < 1:
        raise NightlyError(f"--runs: expected a number of runs >= 1, got {count}")
    runs = store.report_runs()
    if not runs and not allow_empty:
        raise NightlyError(f"{store.path}: the store holds no runs yet (run `e2egen nightly` first)")
    return runs[-count:], count


def gather(store: Store, runs: Iterable[RunInfo], asked: int) -> Evidence:
    runs = tuple(runs)
    cases: dict[str, CaseEvidence] = {}
    for run in runs:
        for record in store.records(run.run_id):
            ev = cases.setdefault(record.case_id, CaseEvidence(record.case_id))
            ev.statuses.append((run.run_id, record.status, record.reason or record.skip_reason))
            if record.status == "skipped":
                continue
            for name, value in record.metrics.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
                    ev.values.setdefault(name, []).append((run.run_id, float(value)))
            margin = record.margin
            if margin is not None:
                ev.margins.append((run.run_id, float(margin)))
                if record.worst_metric:
                    ev.worst_metric[run.run_id] = record.worst_metric
            if record.duration and record.phase in ("call", "teardown"):
                ev.durations.append((record.device, float(record.duration)))
            for worst in ((record.comparison or {}).get("worst") or {}).values():
                for key in ("ref", "out"):
                    v = worst.get(key)
                    if isinstance(v, (int, float)) and math.isfinite(v):
                        ev.magnitude = max(ev.magnitude, abs(float(v)))
    return Evidence(runs, asked, cases)


def load_evidence(store: Store, count: int | None, run_ids: Sequence[str] = (), *, allow_empty: bool = False) -> Evidence:
    runs, asked = choose_runs(store, count, run_ids, allow_empty=allow_empty)
    return gather(store, runs, asked)
