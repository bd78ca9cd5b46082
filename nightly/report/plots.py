"""The report's plots, as PNG bytes (matplotlib, Agg: no display needed)."""
from __future__ import annotations

import io
import math
from typing import Sequence

import matplotlib

matplotlib.use("Agg")  # before pyplot: the report is written on headless CI machines
import matplotlib.pyplot as plt  # noqa: E402

from e2egen.metrics.names import HISTOGRAM_BUCKETS  # noqa: E402
from e2egen.nightly.records import CaseRecord  # noqa: E402
from e2egen.nightly.report.aggregate import HistogramColumn, column_order  # noqa: E402
from e2egen.nightly.report.trends import Trend  # noqa: E402

DPI = 110


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def histogram_plot(columns: Sequence[HistogramColumn], title: str) -> bytes | None:
    """Grouped bars: the fraction of elements in each relative-difference bucket, one colour per column.

    Log scale: the interesting buckets hold 0.1% of the elements or less (the seed's table).
    """
    columns = [c for c in columns if c.total]
    if not columns:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.6))
    width = 0.8 / len(columns)
    for i, column in enumerate(columns):
        fractions = [column.counts.get(b, 0) / column.total for b in HISTOGRAM_BUCKETS]
        xs = [x + (i - (len(columns) - 1) / 2) * width for x in range(len(HISTOGRAM_BUCKETS))]
        ax.bar(xs, [f if f > 0 else math.nan for f in fractions], width=width, label=_short(column.label))
    ax.set_yscale("log")
    ax.set_ylim(bottom=1e-7, top=1.5)
    ax.set_xticks(range(len(HISTOGRAM_BUCKETS)))
    ax.set_xticklabels(HISTOGRAM_BUCKETS, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("fraction of elements")
    ax.set_xlabel("|ref − out| / |ref|")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")
    return _png(fig)


def margin_plot(records: Sequence[CaseRecord]) -> bytes | None:
    """Each case's margin (value / tolerance of its worst metric) by dtype, log scale, with the
    tolerance at 1: how close passing cases come to failing, which the aggregates hide."""
    by_dtype: dict[str, list[float]] = {}
    for record in records:
        margin = record.margin
        if margin is not None and math.isfinite(margin):
            by_dtype.setdefault(record.parts.dtype, []).append(max(margin, 1e-12))
    if not by_dtype:
        return None
    dtypes = sorted(by_dtype, key=column_order("dtype"))
    fig, ax = plt.subplots(figsize=(9, 0.6 + 0.55 * len(dtypes)))
    for row, dtype in enumerate(dtypes):
        values = sorted(by_dtype[dtype])
        # Spread equal values vertically a little so that dense clusters stay readable.
        jitter = [row + 0.25 * (((i * 0.618) % 1.0) - 0.5) for i in range(len(values))]
        colours = ["#c0392b" if v > 1 else "#2e86c1" for v in values]
        ax.scatter(values, jitter, s=10, c=colours, alpha=0.7, linewidths=0)
    ax.axvline(1.0, color="#c0392b", linestyle="--", linewidth=1)
    ax.text(1.0, len(dtypes) - 0.45, " tolerance", color="#c0392b", fontsize=8, va="bottom")
    ax.set_xscale("log")
    ax.set_yticks(range(len(dtypes)))
    ax.set_yticklabels(dtypes)
    ax.set_ylim(-0.6, len(dtypes) - 0.2)
    ax.set_xlabel("margin = metric / tolerance (worst metric of each case; > 1 fails)")
    ax.set_title("Headroom of every case", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def pass_rate_trend(trend: Trend) -> bytes | None:
    """Pass rate per night (%); a night without a judged case is a gap."""
    rates = [100 * n.pass_rate if n.pass_rate is not None else math.nan for n in trend.nights]
    if len(trend.nights) < 2 or all(math.isnan(r) for r in rates):
        return None
    fig, ax = _trend_axes(trend, "Pass rate per night")
    ax.plot(range(len(rates)), rates, marker="o", color="#1a7f37")
    ax.set_ylabel("pass rate (%)")
    return _png(fig)


def family_trend(trend: Trend, values: str, title: str, ylabel: str, *, scale: float = 1.0,
                 limit_line: float | None = None) -> bytes | None:
    """One line per op family of a per-night mapping (Night.<values>), log scale; `limit_line` marks a tolerance."""
    series = {f: [getattr(n, values).get(f, math.nan) * scale for n in trend.nights] for f in trend.families}
    series = {f: v for f, v in series.items() if any(x > 0 for x in v if not math.isnan(x))}
    if len(trend.nights) < 2 or not series:
        return None
    fig, ax = _trend_axes(trend, title)
    for family, points in series.items():
        ax.plot(range(len(points)), [p if p > 0 else math.nan for p in points], marker="o", label=_short(family))
    if limit_line is not None:
        ax.axhline(limit_line, color="#c0392b", linestyle="--", linewidth=1)
        ax.text(0, limit_line, " bound", color="#c0392b", fontsize=8, va="bottom")
    ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7, loc="best")
    return _png(fig)


def _trend_axes(trend: Trend, title: str):
    fig, ax = plt.subplots(figsize=(6, 2.8))
    ax.set_xticks(range(len(trend.nights)))
    ax.set_xticklabels(trend.labels, rotation=30, ha="right", fontsize=7)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    return fig, ax


def _short(label: str, limit: int = 48) -> str:
    return label if len(label) <= limit else "…" + label[-(limit - 1):]
