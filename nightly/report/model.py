"""Everything a report shows, computed once from the store; html.py and markdown.py only lay it out."""
from __future__ import annotations

import math
from dataclasses import dataclass

from e2egen.nightly import machine
from e2egen.nightly.records import CaseRecord
from e2egen.nightly.report.aggregate import (AggregateTable, GroupStats, HistogramColumn, aggregate_all, histogram_by,
                                      histogram_of, overall, worst_cases)
from e2egen.nightly.report.arithmetic import CellArithmetic, cell_arithmetic
from e2egen.nightly.report.compare_runs import DEFAULT_DRIFT, RunComparison, compare_runs
from e2egen.nightly.store import RunInfo, Store

WORST_HISTOGRAMS = 3  # the seed shows the histogram of the worst test; a few more show whether it is alone
MAX_FAILURES_LISTED = 200


@dataclass(frozen=True)
class ReportData:
    run: RunInfo
    previous: RunInfo | None
    records: tuple[CaseRecord, ...]
    summary: GroupStats
    tables: tuple[AggregateTable, ...]
    histogram_by_dtype: tuple[HistogramColumn, ...]
    worst: tuple[CaseRecord, ...]
    worst_histograms: tuple[HistogramColumn, ...]
    failures: tuple[CaseRecord, ...]
    comparison: RunComparison | None
    generated: str
    arithmetic: tuple[CellArithmetic, ...] = ()  # one per (impl, device, cell) this run recorded

    @property
    def title(self) -> str:
        return f"e2egen nightly report: run {self.run.run_id}"


def build_report(store: Store, run_id: str | None = None, against: str | None = None, *,
                 drift: float = DEFAULT_DRIFT, top: int = 20) -> ReportData:
    """The report of `run_id` (default: the latest run) against `against` (default: the run before it)."""
    run = store.run(run_id) if run_id else store.latest_run()
    previous = store.run(against) if against else store.previous_run(run.run_id)
    if previous is not None and previous.run_id == run.run_id:
        previous = None
    records = tuple(store.records(run.run_id))
    worst = tuple(worst_cases(records, top))
    worst_histograms = tuple(h for h in (histogram_of(r) for r in worst if r.histogram) if h is not None)[:WORST_HISTOGRAMS]
    comparison = None
    if previous is not None:
        comparison = compare_runs(records, store.records(previous.run_id), run_id=run.run_id, against=previous.run_id,
                                  factor=drift)
    failures = tuple(sorted((r for r in records if r.status == "failed"),
                            key=lambda r: (-(r.margin if r.margin is not None else math.inf), r.case_id)))
    return ReportData(
        run=run, previous=previous, records=records, summary=overall(records), tables=tuple(aggregate_all(records)),
        histogram_by_dtype=tuple(histogram_by(records, "dtype")), worst=worst, worst_histograms=worst_histograms,
        failures=failures, comparison=comparison, generated=machine.utc_now(), arithmetic=tuple(cell_arithmetic(records)),
    )


# -- number formats shared by the HTML and the Markdown ------------------------------------
def fmt(value: float | int | None) -> str:
    """As the seed's tables: 314.24, 1,627.64, 2.12E-06; '–' for nothing."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return "0"
    if 1e-2 <= abs(value) < 1e6:
        return f"{value:,.2f}"
    return f"{value:.2E}"


def fmt_rate(rate: float | None) -> str:
    return "–" if rate is None else f"{100 * rate:.2f}%"


def fmt_bucket(count: int, total: int) -> str:
    """The seed's histogram cell: 801676(99.858000%)."""
    return f"{count}({100 * count / total:.6f}%)" if total else f"{count}"


def run_line(run: RunInfo) -> str:
    versions = run.machine or {}
    never = "never: a merge with shards missing or unfinished (INCOMPLETE)" if run.merged_from else "not yet (running or killed)"
    parts = [f"global seed {run.global_seed}", f"started {run.started or '?'}",
             f"ended {run.ended or never}", f"device {run.device or '?'}"]
    if versions.get("hostname"):
        parts.append(f"host {versions['hostname']}")
    if versions.get("torch"):
        parts.append(f"torch {versions['torch']}" + (f", CUDA {versions['cuda']}" if versions.get("cuda") else "")
                     + (f", cuDNN {versions['cudnn']}" if versions.get("cudnn") else ""))
    if run.catalogue:
        rev = f" @ {run.git_revision[:12]}" if run.git_revision else ""
        parts.append(f"catalogue {run.catalogue}{rev}{' (modified)' if run.git_dirty else ''}")
    if run.shard:
        parts.append(f"shard {run.shard}")
    if run.merged_from:
        parts.append(f"merged from {', '.join(run.merged_from)}")
    return "; ".join(parts)


def table_rows(table: AggregateTable) -> list[tuple[str, list[str]]]:
    """The seed's layout: one row per (metric, ave | max), then pass rate and case counts."""
    rows = []
    for metric in table.metrics_present():
        rows.append((f"{metric} ave", [fmt(g.metrics[metric].average) for g in table.groups]))
        rows.append((f"{metric} max", [fmt(g.metrics[metric].maximum) for g in table.groups]))
    rows.append(("pass rate", [fmt_rate(g.pass_rate) for g in table.groups]))
    rows.append(("cases (passed / failed / skipped)", [f"{g.passed} / {g.failed} / {g.skipped}" for g in table.groups]))
    return rows


def histogram_rows(columns: tuple[HistogramColumn, ...] | list[HistogramColumn], with_elements: bool = False) -> list[tuple[str, list[str]]]:
    from e2egen.metrics.names import HISTOGRAM_BUCKETS

    rows = [(bucket, [fmt_bucket(c.counts.get(bucket, 0), c.total) for c in columns]) for bucket in HISTOGRAM_BUCKETS]
    rows.append(("max", [fmt(c.max_rel_diff) for c in columns]))
    if with_elements:
        rows.append(("ref (reference)", [repr(c.ref) if c.ref is not None else "–" for c in columns]))
        rows.append(("out (kernel)", [repr(c.out) if c.out is not None else "–" for c in columns]))
    return rows


def headline(data: ReportData) -> str:
    s = data.summary
    return (f"{s.cases} cases: {s.passed} passed, {s.failed} failed, {s.skipped} skipped "
            f"(pass rate {fmt_rate(s.pass_rate)})"
            + (f"; {data.run.selected - s.cases} of the {data.run.selected} planned not recorded (run incomplete)"
               if data.run.selected and data.run.selected > s.cases else "")
            + ("; INCOMPLETE: a merge with shards missing or unfinished (see `e2egen merge`)"
               if data.run.merged_from and not data.run.ended else ""))


def arithmetic_rows(data: ReportData) -> list[tuple[CellArithmetic, list[str]]]:
    """The Arithmetic section: impl, device, cell, findings in words, origin, and against the previous run."""
    compared = data.comparison.arithmetic if data.comparison is not None else None
    rows = []
    for cell in data.arithmetic:
        since = compared.since(cell) if compared is not None else "–"
        rows.append((cell, [cell.impl, cell.device, cell.cell, cell.words, cell.origin_words, since]))
    return rows


def arithmetic_flags(data: ReportData) -> list[str]:
    """One line per cell whose findings changed since the previous run, for the top of the report."""
    changes = data.comparison.arithmetic_changes if data.comparison is not None else ()
    return [f"{c.now.impl} on {c.now.device}, {c.now.cell}: {c.text}" for c in changes]
