"""The report as one self-contained HTML file: templates/report.html.j2 (jinja2, autoescaped), inline CSS,
plots embedded as base64 PNG, no scripts.

This module computes what the template shows (cards, rows, images, words); the template only lays it out.
"""
from __future__ import annotations

import base64
import functools
import json
from dataclasses import dataclass
from typing import Any

import jinja2

from e2egen.nightly.report import plots
from e2egen.nightly.report.arithmetic import describe_findings
from e2egen.nightly.report.failures import PHASE_WORDS
from e2egen.metrics.names import HUGE_VALUE_NOTES
from e2egen.nightly.report.model import (REPORT_TERMS, ReportData, arithmetic_change_rows, arithmetic_rows, describe_term, fmt,
                                         fmt_rate, headline, histogram_rows, run_line, table_rows, value_note)


@functools.lru_cache(maxsize=None)
def environment() -> jinja2.Environment:
    """Templates from the package (templates/*.j2: package data, so an installed e2egen has them too)."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("e2egen.nightly.report", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(fmt=fmt, rate=fmt_rate)
    env.globals.update(describe=describe_term, note=value_note, term_id=term_id, phase_words=PHASE_WORDS,
                       findings_words=describe_findings, findings_text=findings_text, case_metric_rows=case_metric_rows)
    return env


def stylesheet() -> str:
    """The report's CSS (templates/report.css.j2): other pages (e2egen study's) share the report's look."""
    env = environment()
    return env.loader.get_source(env, "report.css.j2")[0]


def term_id(name: str) -> str:
    """The glossary entry's id of a metric or term ("pass rate" -> "term-pass-rate")."""
    return "term-" + "-".join(name.split()).replace("/", "per")


@dataclass(frozen=True)
class Card:
    value: str
    label: str
    tone: str  # "good", "bad" or ""
    explanation: str


@dataclass(frozen=True)
class Image:
    src: str | None  # a data: URI, or None when there was nothing to plot
    alt: str
    caption: str = ""


def render_html(data: ReportData) -> str:
    return environment().get_template("report.html.j2").render(**context(data))


def context(data: ReportData) -> dict[str, Any]:
    changes = arithmetic_change_rows(data)
    tables = [(t, table_rows(t)) for t in data.tables]
    return {
        "data": data, "title": data.title, "run_line": run_line(data.run), "headline": headline(data),
        "cards": cards(data), "action": data.action,
        "store_path": data.store_path or "STORE",
        "changes": changes, "changed_keys": {row.change.key for row in changes},
        "arithmetic_rows": arithmetic_rows(data), "trend_images": trend_images(data),
        "tables": tables,
        "aggregate_notes": list(dict.fromkeys(note for _, rows in tables for row in rows for note in row.notes if note)),
        "histogram_image": _image(plots.histogram_plot(data.histogram_by_dtype, "Relative difference by dtype (all cases)"),
                                  "relative-difference histogram by dtype") if data.histogram_by_dtype else None,
        "histogram_rows": histogram_rows(data.histogram_by_dtype),
        "worst_histogram_image": _image(plots.histogram_plot(data.worst_histograms, "Relative difference of the worst cases"),
                                        "relative-difference histogram of the worst cases"),
        "worst_histogram_rows": histogram_rows(data.worst_histograms, with_elements=True),
        "margin_image": _image(plots.margin_plot(data.records), "margin of every case by dtype"),
        "glossary": [(name, describe_term(name), HUGE_VALUE_NOTES.get(name, (None, ""))[1])
                     for name in (*data.metrics_shown(), *REPORT_TERMS)],
    }


def cards(data: ReportData) -> list[Card]:
    s = data.summary
    out = [Card(str(s.cases), "cases", "", "cases of this run: passed + failed + skipped"),
           Card(str(s.passed), "passed", "good", "cases within every tolerance"),
           Card(str(s.failed), "failed", "bad" if s.failed else "good", "cases over a tolerance, or that did not run to the end"),
           Card(str(s.skipped), "skipped", "", "cases the device or the catalogue could not run (not counted in the pass rate)"),
           Card(fmt_rate(s.pass_rate), "pass rate", "", describe_term("pass rate"))]
    c = data.comparison
    if c is not None:
        out += [Card(str(len(c.new_failures)), "new failures", "bad" if c.new_failures else "good",
                     f"failing now, not failing in run {c.against}"),
                Card(str(len(c.fixed)), "fixed", "", f"passing now, failing in run {c.against}"),
                Card(str(len(c.drifts)), f"drifts > {c.factor:g}x", "bad" if c.drifts else "good", describe_term("drift"))]
        if c.arithmetic is not None:
            n = len(c.arithmetic_changes)
            out.append(Card(str(n), "arithmetic changes", "bad" if n else "good",
                            f"cells whose measured arithmetic differs from run {c.against}'s"))
    return out


def trend_images(data: ReportData) -> list[Image]:
    trend = data.trend
    if trend is None or len(trend.nights) < 2:
        return []
    return [
        _image(plots.pass_rate_trend(trend), "pass rate per night",
               "passed / (passed + failed) of each night's run."),
        _image(plots.family_trend(trend, "worst_bound_ratio", "Worst bound_ratio per op family", "bound_ratio",
                                  limit_line=1.0),
               "worst bound_ratio per op family per night",
               "The largest bound_ratio over each op family's cases: above the dashed line (1) an element left its "
               "error bound; a line climbing toward it is a kernel losing accuracy before any case fails."),
        _image(plots.family_trend(trend, "kernel_seconds", "Median kernel time per op family", "ms per case",
                                  scale=1e3),
               "median kernel time per op family per night",
               "The median time the kernel itself took per case (inputs, reference and comparison left out)."),
    ]


@dataclass(frozen=True)
class MetricRow:
    metric: str
    value: float
    tolerance: float | None  # None: measured, not checked
    ratio: float | None
    failed: bool
    worst: str  # the worst element: index, position, ref, out, bound


def case_metric_rows(record) -> list[MetricRow]:
    """Every metric one case measured, checked ones first (as `e2egen run` prints its verdict)."""
    ratios = record.ratios()
    failed = {str(f.get("metric")) for f in record.failures}
    worst = (record.comparison or {}).get("worst") or {}
    rows = []
    for metric, value in record.metrics.items():
        tolerance = record.tolerances.get(metric)
        element = worst.get(metric) if isinstance(worst.get(metric), dict) else None
        where = (f"#{element.get('index')} {tuple(element.get('position') or ())}: ref {element.get('ref')!r}, "
                 f"out {element.get('out')!r}" + (f", bound {element['bound']!r}" if element.get("bound") is not None else "")
                 ) if element else ""
        rows.append(MetricRow(metric, value, None if isinstance(tolerance, bool) else tolerance, ratios.get(metric),
                              metric in failed, where))
    return sorted(rows, key=lambda r: (not r.failed, r.tolerance is None, r.metric))


def findings_text(findings: Any) -> str:
    """A case's recorded arithmetic findings as the probes left them (free text included), for its details."""
    return json.dumps(findings, indent=1, sort_keys=True, default=str, ensure_ascii=False)


def _image(png: bytes | None, alt: str, caption: str = "") -> Image:
    src = f"data:image/png;base64,{base64.b64encode(png).decode('ascii')}" if png is not None else None
    return Image(src, alt, caption)


CSS = stylesheet()  # e2egen study's pages import it (diagnose/study.py)
