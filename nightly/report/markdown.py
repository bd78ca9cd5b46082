"""The report as a Markdown summary (for a CI job summary, a chat message, or the PR that moves a tolerance)."""
from __future__ import annotations

import re
from typing import Sequence

from e2egen.metrics.names import HUGE_VALUE_NOTES
from e2egen.nightly.report.model import (REPORT_TERMS, ReportData, arithmetic_change_rows, arithmetic_rows,
                                         describe_term, fmt, fmt_rate, headline, histogram_rows, run_line, table_rows)

MAX_LISTED = 25


def _text(text: object) -> str:
    """Case data as Markdown that shows as itself: no raw HTML (CI systems render reports), one line.

    `&` and `<` become entities, so `<script>` or `<img onerror=...>` from a kernel's message is text.
    """
    text = " ".join(str(text).splitlines())
    return text.replace("&", "&amp;").replace("<", "&lt;")


def _code(text: str) -> str:
    """A code span whose content cannot end it early: fenced by more backticks than it holds in a row."""
    text = " ".join(text.splitlines())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _cell(text: object) -> str:
    """A table cell: escaped text, or (written `like this`) a code span, whose content Markdown shows verbatim."""
    text = str(text)
    if len(text) >= 2 and text.startswith("`") and text.endswith("`"):
        cell = _code(text[1:-1])
    else:
        cell = _text(text)
    return cell.replace("|", "\\|")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _short_reason(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def render_markdown(data: ReportData) -> str:
    """Failures first (new ones, then still failing), then arithmetic changes and trends, then the details."""
    out = [f"# {_text(data.title)}", "", _text(run_line(data.run)), "", f"**{_text(headline(data))}**", ""]
    out += _failures(data) + _arithmetic_changes(data) + _trends(data) + _against(data)
    rows = arithmetic_rows(data)
    if rows:
        out += ["## Arithmetic", "", "How each kernel computes, per impl, device and cell, as the probes measured it.", ""]
        out += table(["impl", "device", "cell", "findings", "origin", "against the previous run"], [cells for _, cells in rows])
        out.append("")
    out += ["## Aggregates", "",
            "Average and maximum of each metric over the cases of each group (finite values); "
            "pass rate = passed / (passed + failed). What each metric means: see the end.", ""]
    notes: dict[str, None] = {}  # values marked *, explained once after the tables
    for t in data.tables:
        rows = table_rows(t)
        out += [f"### By {t.title}", ""]
        out += table(["", *[g.value for g in t.groups]],
                     [[row.label, *[f"{text} *" if note else text for text, note in zip(row.cells, row.notes)]]
                      for row in rows])
        notes.update(dict.fromkeys(n for row in rows for n in row.notes if n))
        out.append("")
    out += [f"\\* {_text(note)}." for note in notes] + ([""] if notes else [])
    if data.histogram_by_dtype:
        out += ["## Relative-difference histogram", "", "Elements per bucket of |ref − out| / |ref|, summed over the cases of each dtype.", ""]
        cols = data.histogram_by_dtype
        out += table(["relative difference", *[c.label for c in cols]], [[n, *cells] for n, cells in histogram_rows(cols)])
        out.append("")
    if data.worst_histograms:
        out += ["### Worst cases", ""]
        cols = data.worst_histograms
        out += table(["relative difference", *[c.label for c in cols]],
                     [[n, *cells] for n, cells in histogram_rows(cols, with_elements=True)])
        out.append("")
    if data.worst:
        out += ["## Worst cases by margin", "", "margin = value / tolerance of the case's worst metric (> 1 fails).", ""]
        rows = []
        for r in data.worst:
            metric = r.worst_metric
            rows.append([r.case_id, r.status, metric or "–", fmt(r.metrics.get(metric)) if metric else "–",
                         fmt(r.tolerances.get(metric)) if metric else "–", fmt(r.margin), f"`{r.repro}`"])
        out += table(["case", "status", "metric", "value", "tolerance", "margin", "repro"], rows)
        out.append("")
    out += ["## What the numbers mean", "", "ref is the exact (float64) result, out the kernel's.", ""]
    for name in (*data.metrics_shown(), *REPORT_TERMS):
        huge = HUGE_VALUE_NOTES.get(name, (None, ""))[1]
        out.append(f"- **{_text(name)}**: {_text(describe_term(name))}" + (f". Very large values: {_text(huge)}" if huge else "") + ".")
    out += ["", f"_Generated {data.generated} by `e2egen report`; pass rate overall {fmt_rate(data.summary.pass_rate)}._", ""]
    return "\n".join(out)


def _failures(data: ReportData) -> list[str]:
    """One line per failure, new ones first: what needs action, before anything else."""
    action = data.action
    if action is None or not action.total:
        return ["## Failures (0)", "", "None: every case that ran passed.", ""]
    compared = f", {action.new} new" if action.compared else ""
    out = [f"## Failures ({action.total}{compared})", ""]
    for item in action.items[:MAX_LISTED]:
        badge = "**new**" if item.new else ("still failing" if action.compared else "failing")
        out.append(f"- {badge} {_code(item.record.case_id)}: {_text(item.summary)}")
    shown = min(len(action.items), MAX_LISTED)
    if action.total > shown:
        new_left = action.new - sum(i.new for i in action.items[:MAX_LISTED])
        out += ["", f"… and {action.total - shown} more not listed" + (f" ({new_left} of them new)" if action.compared else "")
                + "; the HTML report has the details of each."]
    return out + [""]


def _arithmetic_changes(data: ReportData) -> list[str]:
    rows = arithmetic_change_rows(data)
    if not rows:
        compared = data.comparison is not None and data.comparison.arithmetic is not None
        return [f"No cell's measured arithmetic changed since run {_text(data.comparison.against)}.", ""] if compared else []
    out = [f"## Arithmetic changes ({len(rows)})", "",
           f"Cells whose measured arithmetic differs from run {_text(data.comparison.against)}'s; the bounds follow "
           "the new findings.", ""]
    out += table(["device", "impl", "op", "dtype", "before", "now", "what changed", "versions"],
                 [[r.device, r.impl, r.op, r.dtype, r.before, r.now, "; ".join(r.changed), ", ".join(r.versions) or "unchanged"]
                  for r in rows])
    return out + [""]


def _trends(data: ReportData) -> list[str]:
    nights = data.trend.nights if data.trend is not None else ()
    if len(nights) < 2:
        return ["## Trends", "", f"Only one night in the store (run {_text(data.run.run_id)}): the trends start with the "
                "second night.", ""]
    out = ["## Trends", "", f"The last {len(nights)} nights, oldest first (plots in the HTML report).", ""]
    rows = []
    for night in nights:
        worst = max(night.worst_bound_ratio.items(), key=lambda kv: kv[1], default=None)
        slowest = max(night.kernel_seconds.items(), key=lambda kv: kv[1], default=None)
        rows.append([night.run_id, night.date or "–", fmt_rate(night.pass_rate),
                     f"{fmt(worst[1])} ({worst[0]})" if worst else "–",
                     f"{fmt(slowest[1] * 1e3)} ({slowest[0]})" if slowest else "–"])
    out += table(["run", "started", "pass rate", "worst bound_ratio (op)", "median kernel ms of the slowest op"], rows)
    return out + [""]


def _against(data: ReportData) -> list[str]:
    c = data.comparison
    if c is None:
        return ["No earlier run to compare with.", ""]
    out = [f"## Against run {c.against}", "",
           f"{len(c.new_failures)} new failures (listed above), {len(c.fixed)} fixed, "
           f"{len(c.drifts)} drifts (a passing metric grew more than {c.factor:g}x)"
           + (f"; {len(c.only_now)} cases new, {len(c.only_before)} gone" if c.only_now or c.only_before else ""), ""]
    if c.fixed:
        out += ["### Fixed", ""]
        out += table(["case", "failed before with"], [[ch.case_id, _short_reason(ch.before.reason)] for ch in c.fixed[:MAX_LISTED]])
        out += _more(len(c.fixed)) + [""]
    if c.drifts:
        out += [f"### Drifts (still passing, grew more than {c.factor:g}x)", ""]
        out += table(["case", "metric", "before", "now", "growth", "now / tolerance"],
                     [[d.case_id, d.metric, fmt(d.before), fmt(d.now), "from 0" if d.before <= 0 else f"{d.growth:.1f}x",
                       fmt(d.ratio)] for d in c.drifts[:MAX_LISTED]])
        out += _more(len(c.drifts)) + [""]
    return out


def _more(total: int) -> list[str]:
    return ["", f"… and {total - MAX_LISTED} more (see the HTML report)"] if total > MAX_LISTED else []
