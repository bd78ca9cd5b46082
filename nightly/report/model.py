"""Everything a report shows, computed once from the store; html.py and markdown.py only lay it out."""
from __future__ import annotations

import math
from dataclasses import dataclass

from e2egen.nightly import machine
from e2egen.nightly.records import CaseRecord
from e2egen.nightly.report.aggregate import (REPORT_METRICS, AggregateTable, GroupStats, HistogramColumn, aggregate_all,
                                             histogram_by, histogram_of, overall, worst_cases)
from e2egen.nightly.report.arithmetic import ArithmeticChange, CellArithmetic, cell_arithmetic
from e2egen.nightly.report.compare_runs import DEFAULT_DRIFT, RunComparison, compare_runs
from e2egen.nightly.report.failures import FailureList, clip, failure_list
from e2egen.nightly.report.trends import DEFAULT_TREND_NIGHTS, Trend, night_trend
from e2egen.nightly.store import RunInfo, Store

WORST_HISTOGRAMS = 3  # the seed shows the histogram of the worst test; a few more show whether it is alone
# Failures listed at the top of the HTML: each is one line (its details folded), so 50 fit in a few screens;
# the rest get one "N more" line that says how to list them all.
MAX_FAILURES_LISTED = 50

# What the report's own words mean (the metrics' meanings: metrics.names.METRIC_DESCRIPTIONS).
REPORT_TERMS = {
    "margin": "value / tolerance of the case's worst metric: above 1 the case fails, near 0 it is far from failing",
    "pass rate": "passed / (passed + failed); skipped cases do not count",
    "drift": "a case that still passes but whose metric grew more than the drift factor since the previous run: "
             "the early warning before it crosses its tolerance",
    "now / tolerance": "how much of its tolerance a drifting metric uses now (1 = at the tolerance)",
}


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
    action: FailureList | None = None  # the failures the report leads with
    trend: Trend | None = None
    store_path: str = ""

    @property
    def title(self) -> str:
        return f"e2egen nightly report: run {self.run.run_id}"

    @property
    def arithmetic_changes(self) -> tuple[ArithmeticChange, ...]:
        return self.comparison.arithmetic_changes if self.comparison is not None else ()

    def metrics_shown(self) -> tuple[str, ...]:
        """Every metric name the report shows, in the aggregates' order, then the others by name: the glossary."""
        from e2egen.metrics.names import METRIC_DESCRIPTIONS

        names = {m for t in self.tables for m in t.metrics_present()}
        names |= {r.worst_metric for r in self.worst if r.worst_metric}
        listed = [item.record for item in self.action.items] if self.action is not None else self.failures
        names |= {m for r in listed for m in r.metrics} | {str(f.get("metric")) for r in listed for f in r.failures}
        if self.comparison is not None:
            names |= {d.metric for d in self.comparison.drifts}
        if self.trend is not None and len(self.trend.nights) > 1:
            names.add("bound_ratio")
        ordered = [m for m in REPORT_METRICS if m in names] + sorted(names - set(REPORT_METRICS))
        return tuple(m for m in ordered if m in METRIC_DESCRIPTIONS)


def build_report(store: Store, run_id: str | None = None, against: str | None = None, *,
                 drift: float = DEFAULT_DRIFT, top: int = 20, trend_nights: int = DEFAULT_TREND_NIGHTS) -> ReportData:
    """The report of `run_id` (default: the latest run) against `against` (default: the run before it), with
    the trends of the `trend_nights` nights up to it."""
    run = store.run(run_id) if run_id else store.latest_run()
    previous = store.run(against) if against else store.previous_run(run.run_id)
    if previous is not None and previous.run_id == run.run_id:
        previous = None
    read = {run.run_id: tuple(store.records(run.run_id))}
    records = read[run.run_id]
    worst = tuple(worst_cases(records, top))
    worst_histograms = tuple(h for h in (histogram_of(r) for r in worst if r.histogram) if h is not None)[:WORST_HISTOGRAMS]
    comparison = None
    if previous is not None:
        read[previous.run_id] = tuple(store.records(previous.run_id))
        comparison = compare_runs(records, read[previous.run_id], run_id=run.run_id, against=previous.run_id,
                                  factor=drift)
    failures = tuple(sorted((r for r in records if r.status == "failed"),
                            key=lambda r: (-(r.margin if r.margin is not None else math.inf), r.case_id)))
    trend = night_trend(store, run, trend_nights, lambda rid: read[rid] if rid in read else store.records(rid))
    return ReportData(
        run=run, previous=previous, records=records, summary=overall(records), tables=tuple(aggregate_all(records)),
        histogram_by_dtype=tuple(histogram_by(records, "dtype")), worst=worst, worst_histograms=worst_histograms,
        failures=failures, comparison=comparison, generated=machine.utc_now(), arithmetic=tuple(cell_arithmetic(records)),
        action=failure_list(failures, comparison, MAX_FAILURES_LISTED), trend=trend, store_path=str(store.path),
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


@dataclass(frozen=True)
class TableRow:
    """A row of an aggregate table: its label ("rms ave"), the metric (or report term) it shows, its cells, and
    for each cell the note that explains a value too large to read as an error size (value_note), or None."""

    label: str
    term: str | None
    cells: tuple[str, ...]
    notes: tuple[str | None, ...]


def table_rows(table: AggregateTable) -> list[TableRow]:
    """The seed's layout: one row per (metric, ave | max), then pass rate and case counts."""
    rows = []
    for metric in table.metrics_present():
        for kind, values in (("ave", [g.metrics[metric].average for g in table.groups]),
                             ("max", [g.metrics[metric].maximum for g in table.groups])):
            rows.append(TableRow(f"{metric} {kind}", metric, tuple(fmt(v) for v in values),
                                 tuple(value_note(metric, v) for v in values)))
    groups = table.groups
    rows.append(TableRow("pass rate", "pass rate", tuple(fmt_rate(g.pass_rate) for g in groups), (None,) * len(groups)))
    rows.append(TableRow("cases (passed / failed / skipped)", None,
                         tuple(f"{g.passed} / {g.failed} / {g.skipped}" for g in groups), (None,) * len(groups)))
    return rows


def value_note(metric: str, value: float | None) -> str | None:
    """Why a value this large is no error size (metrics.names.HUGE_VALUE_NOTES), or None for an ordinary one."""
    from e2egen.metrics.names import HUGE_VALUE_NOTES

    threshold, note = HUGE_VALUE_NOTES.get(metric, (math.inf, None))
    return note if value is not None and math.isfinite(value) and value >= threshold else None


def describe_term(name: str) -> str:
    """What a metric or one of the report's terms means, in one line ("" for a name nothing describes)."""
    from e2egen.metrics.names import METRIC_DESCRIPTIONS

    return METRIC_DESCRIPTIONS.get(name) or REPORT_TERMS.get(name, "")


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
    from e2egen.nightly.report.arithmetic import changed_fields

    compared = data.comparison.arithmetic if data.comparison is not None else None
    changes = {c.key: c for c in data.arithmetic_changes}
    rows = []
    for cell in data.arithmetic:
        since = compared.since(cell) if compared is not None else "–"
        if cell.key in changes:  # in words, as the changes table says it (since() gives the raw fields)
            change = changes[cell.key]
            since = f"changed since {change.against}: " + "; ".join(changed_fields(change.before.findings, cell.findings))
            if change.version_changes:
                since += "; versions: " + ", ".join(v.replace(" -> ", " → ") for v in change.version_changes)
        # Clipped: the words end with a probe's unexplained findings, up to thousands of characters (in full: the
        # details of the failures they caused).
        rows.append((cell, [cell.impl, cell.device, cell.cell, clip(cell.words, 240), cell.origin_words, clip(since, 240)]))
    return rows


@dataclass(frozen=True)
class ChangeRow:
    """A cell whose arithmetic changed, as the report's table says it: where, before and now in words."""

    device: str
    impl: str
    op: str
    dtype: str
    cell: str  # the whole cell: op/direction/dtype/layout[/shape class]
    before: str
    now: str
    changed: tuple[str, ...]  # "accumulator significand bits: 24 → 11"
    versions: tuple[str, ...]  # "torch 2.5.1 → 2.6.0"
    change: ArithmeticChange


def arithmetic_change_rows(data: ReportData) -> list[ChangeRow]:
    from e2egen.nightly.report.arithmetic import changed_fields

    rows = []
    for change in data.arithmetic_changes:
        now, before = change.now, change.before
        op, _, rest = now.cell.partition("/")
        dtype = rest.split("/")[1] if rest.count("/") >= 1 else ""
        rows.append(ChangeRow(now.device, now.impl, op, dtype, now.cell, clip(before.words, 240), clip(now.words, 240),
                              tuple(changed_fields(before.findings, now.findings)),
                              tuple(v.replace(" -> ", " → ") for v in change.version_changes), change))
    return rows
