"""The report as a Markdown summary (for a CI job summary, a chat message, or the PR that moves a tolerance)."""
from __future__ import annotations

import re
from typing import Sequence

from e2egen.nightly.report.model import (ReportData, arithmetic_flags, arithmetic_rows, fmt, fmt_rate, headline,
                                         histogram_rows, run_line, table_rows)

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
    out = [f"# {_text(data.title)}", "", _text(run_line(data.run)), "", f"**{_text(headline(data))}**", ""]
    flags = arithmetic_flags(data)
    if flags:
        out += [f"**Arithmetic changed in {len(flags)} cell{'s' if len(flags) != 1 else ''}** "
                "(the bound follows the new findings):", ""]
        out += [f"- {_text(flag)}" for flag in flags] + [""]
    if data.comparison is not None:
        c = data.comparison
        out += [f"## Against run {c.against}", "",
                f"{len(c.new_failures)} new failures, {len(c.fixed)} fixed, "
                f"{len(c.drifts)} drifts (a passing metric grew more than {c.factor:g}x)"
                + (f"; {len(c.only_now)} cases new, {len(c.only_before)} gone" if c.only_now or c.only_before else ""), ""]
        if c.new_failures:
            out += ["### New failures", ""]
            out += table(["case", "before", "reason", "repro"],
                         [[ch.case_id, ch.before.status if ch.before else "(new case)", _short_reason(ch.now.reason),
                           f"`{ch.now.repro}`"] for ch in c.new_failures[:MAX_LISTED]])
            out += _more(len(c.new_failures)) + [""]
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
    elif data.previous is None:
        out += ["No earlier run to compare with.", ""]
    rows = arithmetic_rows(data)
    if rows:
        out += ["## Arithmetic", "", "How each kernel computes, per impl, device and cell, as the probes measured it.", ""]
        out += table(["impl", "device", "cell", "findings", "origin", "against the previous run"], [cells for _, cells in rows])
        out.append("")
    out += ["## Aggregates", "",
            "Average and maximum of each metric over the cases of each group (finite values); "
            "pass rate = passed / (passed + failed).", ""]
    for t in data.tables:
        out += [f"### By {t.title}", ""]
        out += table(["", *[g.value for g in t.groups]], [[name, *cells] for name, cells in table_rows(t)])
        out.append("")
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
    if data.failures:
        out += [f"## Failures ({len(data.failures)})", ""]
        out += table(["case", "where", "reason"], [[r.case_id, r.phase, _short_reason(r.reason)] for r in data.failures[:MAX_LISTED]])
        out += _more(len(data.failures)) + [""]
    out += [f"_Generated {data.generated} by `e2egen report`; pass rate overall {fmt_rate(data.summary.pass_rate)}._", ""]
    return "\n".join(out)


def _more(total: int) -> list[str]:
    return ["", f"… and {total - MAX_LISTED} more (see the HTML report)"] if total > MAX_LISTED else []
