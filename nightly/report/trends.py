"""The last N nights from the store: pass rate, worst bound_ratio per op family and kernel time, per night.

A night is one run the report compares by default (Store.report_runs: whole sweeps and merged runs, not the
shards merged into them), up to and including the run reported. An op family is the op part of the case id
(conv2d, gemm, …): its worst bound_ratio over the night's cases shows a kernel creeping toward its bound
before any case fails; its median kernel time per case shows a slowdown that the case count does not hide
(a total would move with every case added or filtered).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from e2egen.nightly.records import CaseRecord
from e2egen.nightly.report.aggregate import overall
from e2egen.nightly.store import RunInfo, Store

DEFAULT_TREND_NIGHTS = 14


@dataclass(frozen=True)
class Night:
    run_id: str
    started: str | None
    pass_rate: float | None  # passed / (passed + failed)
    worst_bound_ratio: Mapping[str, float]  # op family -> the largest finite bound_ratio of its cases
    kernel_seconds: Mapping[str, float]  # op family -> median kernel time of its cases that ran

    @property
    def date(self) -> str:
        return (self.started or "")[:10]


@dataclass(frozen=True)
class Trend:
    nights: tuple[Night, ...]  # oldest first, the reported run last
    requested: int  # --trend-nights

    @property
    def labels(self) -> tuple[str, ...]:
        """The nights as an axis shows them: the dates they started, or the run ids where dates repeat or lack."""
        dates = [n.date for n in self.nights]
        return tuple(dates) if all(dates) and len(set(dates)) == len(dates) else tuple(n.run_id for n in self.nights)

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(sorted({f for n in self.nights for f in (*n.worst_bound_ratio, *n.kernel_seconds)}))


def night_of(run: RunInfo, records: Sequence[CaseRecord]) -> Night:
    by_family: dict[str, list[CaseRecord]] = {}
    for record in records:
        by_family.setdefault(record.parts.op, []).append(record)
    worst, kernel = {}, {}
    for family, members in by_family.items():
        ratios = [r.metrics["bound_ratio"] for r in members
                  if isinstance(r.metrics.get("bound_ratio"), (int, float)) and math.isfinite(r.metrics["bound_ratio"])]
        if ratios:
            worst[family] = max(ratios)
        times = [r.timings["kernel"] for r in members if r.status != "skipped" and (r.timings or {}).get("kernel", 0) > 0]
        if times:
            kernel[family] = statistics.median(times)
    return Night(run.run_id, run.started, overall(records).pass_rate, worst, kernel)


def night_trend(store: Store, run: RunInfo, nights: int,
                records_of: Callable[[str], Sequence[CaseRecord]] | None = None) -> Trend:
    """The `nights` runs up to and including `run`, oldest first. `records_of(run_id)` gives a run's records
    (default: from the store; the report passes the two runs it has read already)."""
    records_of = records_of or store.records
    runs = store.report_runs()
    ids = [r.run_id for r in runs]
    if run.run_id in ids:
        end = ids.index(run.run_id) + 1
        chosen = runs[max(0, end - nights):end]
    else:  # a shard merged into another run, reported on its own: no nights of its own kind around it
        chosen = [run]
    return Trend(tuple(night_of(r, records_of(r.run_id)) for r in chosen), nights)
