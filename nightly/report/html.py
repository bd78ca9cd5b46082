"""The report as one self-contained HTML file: inline CSS, plots embedded as base64 PNG, no scripts."""
from __future__ import annotations

import base64
from html import escape
from typing import Collection, Sequence

from e2egen.nightly.report import plots
from e2egen.nightly.report.model import (MAX_FAILURES_LISTED, ReportData, arithmetic_flags, arithmetic_rows, fmt,
                                         fmt_rate, headline, histogram_rows, run_line, table_rows)

CSS = """
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1400px; color: #1b1f23; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
h3 { font-size: 15px; margin-top: 20px; }
.meta { color: #57606a; font-size: 13px; }
.cards { display: flex; gap: 12px; margin: 16px 0; flex-wrap: wrap; }
.card { border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 14px; min-width: 110px; }
.card b { display: block; font-size: 22px; } .card.bad b { color: #c0392b; } .card.good b { color: #1a7f37; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: right; white-space: nowrap; }
th { background: #f6f8fa; } td.l, th.l { text-align: left; white-space: normal; }
td:first-child { white-space: nowrap; } td.w { min-width: 22em; }
td code { font-size: 11px; white-space: normal; }  /* a long repro wraps at its spaces rather than widen the page */
tr.failed td { background: #fff1f0; } tr.sep td { border-top: 2px solid #8c959f; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: #f6f8fa; padding: 1px 4px; border-radius: 4px; white-space: nowrap; }
img { max-width: 100%; border: 1px solid #d0d7de; border-radius: 6px; margin: 6px 0; }
.flag { border: 2px solid #c0392b; background: #fff1f0; border-radius: 6px; padding: 8px 14px; margin: 12px 0; }
.flag ul { margin: 4px 0; padding-left: 20px; }
nav a { margin-right: 12px; } .tables { display: flex; flex-wrap: wrap; gap: 0 28px; align-items: flex-start; } .note { color: #57606a; font-size: 13px; }
"""


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], *, left: Collection[int] = (0,),
           row_classes: Sequence[str] = (), raw_columns: Collection[int] = (), wide: Collection[int] = ()) -> str:
    """A table; `left` columns (text) align left, numbers right; `wide` ones (free text) get room;
    cells are escaped unless their column is in raw_columns (already HTML)."""
    head = "".join(f'<th class="l">{escape(h)}</th>' if i in left else f"<th>{escape(h)}</th>" for i, h in enumerate(header))
    body = []
    for r, row in enumerate(rows):
        cls = f' class="{row_classes[r]}"' if r < len(row_classes) and row_classes[r] else ""
        cells = "".join(
            _td(("l" if i in left else "") + (" w" if i in wide else "")) + (str(cell) if i in raw_columns else escape(str(cell)))
            + "</td>" for i, cell in enumerate(row))
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _td(classes: str) -> str:
    classes = classes.strip()
    return f'<td class="{classes}">' if classes else "<td>"


def _image(png: bytes | None, alt: str) -> str:
    if png is None:
        return f'<p class="note">({escape(alt)}: no data)</p>'
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def _code(text: str) -> str:
    return f"<code>{escape(text)}</code>"


def render_html(data: ReportData) -> str:
    s = data.summary
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(data.title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(data.title)}</h1>", f'<p class="meta">{escape(run_line(data.run))}</p>',
        '<div class="cards">',
        f'<div class="card"><b>{s.cases}</b>cases</div>',
        f'<div class="card good"><b>{s.passed}</b>passed</div>',
        f'<div class="card {"bad" if s.failed else "good"}"><b>{s.failed}</b>failed</div>',
        f'<div class="card"><b>{s.skipped}</b>skipped</div>',
        f'<div class="card"><b>{fmt_rate(s.pass_rate)}</b>pass rate</div>',
    ]
    if data.comparison is not None:
        c = data.comparison
        parts += [f'<div class="card {"bad" if c.new_failures else "good"}"><b>{len(c.new_failures)}</b>new failures</div>',
                  f'<div class="card"><b>{len(c.fixed)}</b>fixed</div>',
                  f'<div class="card {"bad" if c.drifts else "good"}"><b>{len(c.drifts)}</b>drifts &gt; {c.factor:g}x</div>']
        if c.arithmetic is not None:
            n = len(c.arithmetic_changes)
            parts.append(f'<div class="card {"bad" if n else "good"}"><b>{n}</b>arithmetic changes</div>')
    parts.append("</div>")
    parts.append(f'<p>{escape(headline(data))}</p>')
    parts += _arithmetic_flags(data)
    parts.append('<nav><a href="#against">against previous</a><a href="#arithmetic">arithmetic</a><a href="#aggregates">aggregates</a>'
                 '<a href="#histograms">histograms</a><a href="#worst">worst cases</a><a href="#failures">failures</a></nav>')
    parts += _comparison(data)
    parts += _arithmetic(data)
    parts += _aggregates(data)
    parts += _histograms(data)
    parts += _worst(data)
    parts += _failures(data)
    parts.append(f'<p class="note">Generated {escape(data.generated)} by <code>e2egen report</code>.</p></body></html>')
    return "\n".join(parts)


def _comparison(data: ReportData) -> list[str]:
    out = ['<h2 id="against">Against the previous run</h2>']
    c = data.comparison
    if c is None:
        return out + ['<p class="note">No earlier run to compare with.</p>']
    out.append(f"<p>Run {_code(c.run_id)} against {_code(c.against)}: {len(c.new_failures)} new failures, "
               f"{len(c.fixed)} fixed, {len(c.drifts)} cases whose passing metric grew more than {c.factor:g}x"
               + (f"; {len(c.only_now)} cases new, {len(c.only_before)} gone" if c.only_now or c.only_before else "") + ".</p>")
    if c.new_failures:
        out.append("<h3>New failures</h3>")
        out.append(_table(["case", "before", "reason", "repro"],
                          [[ch.case_id, ch.before.status if ch.before else "(new case)", ch.now.reason, _code(ch.now.repro)]
                           for ch in c.new_failures], left=(0, 1, 2, 3), raw_columns=(3,), wide=(2,)))
    if c.fixed:
        out.append("<h3>Fixed</h3>")
        out.append(_table(["case", "failed before with"], [[ch.case_id, ch.before.reason] for ch in c.fixed], left=(0, 1), wide=(1,)))
    if c.drifts:
        out.append(f"<h3>Drifts: still passing, grew more than {c.factor:g}x</h3>")
        out.append(_table(["case", "metric", "before", "now", "growth", "now / tolerance", "repro"],
                          [[d.case_id, d.metric, fmt(d.before), fmt(d.now), "from 0" if d.before <= 0 else f"{d.growth:.1f}x",
                            fmt(d.ratio), _code(d.record.repro)] for d in c.drifts], left=(0, 1, 6), raw_columns=(6,)))
    return out


def _arithmetic_flags(data: ReportData) -> list[str]:
    flags = arithmetic_flags(data)
    if not flags:
        return []
    items = "".join(f"<li>{escape(flag)}</li>" for flag in flags)
    return [f'<div class="flag"><b>Arithmetic changed in {len(flags)} cell{"s" if len(flags) != 1 else ""}</b> '
            f'(the bound follows the new findings; see <a href="#arithmetic">Arithmetic</a>):<ul>{items}</ul></div>']


def _arithmetic(data: ReportData) -> list[str]:
    out = ['<h2 id="arithmetic">Arithmetic</h2>']
    rows = arithmetic_rows(data)
    if not rows:
        return out + ['<p class="note">No case of this run recorded its kernel\'s arithmetic.</p>']
    out.append('<p class="note">How each kernel computes, per impl, device and cell (op/direction/dtype/layout/shape '
               "class), as the probes measured it: the findings the bounds of this run followed, and where they "
               "came from.</p>")
    changed = {c.key for c in data.comparison.arithmetic_changes} if data.comparison is not None else set()
    out.append(_table(["impl", "device", "cell", "findings", "origin", "against the previous run"],
                      [cells for _, cells in rows], left=(0, 1, 2, 3, 4, 5), wide=(3,),
                      row_classes=["failed" if cell.key in changed else "" for cell, _ in rows]))
    return out


def _aggregates(data: ReportData) -> list[str]:
    out = ['<h2 id="aggregates">Aggregates</h2>',
           '<p class="note">Average and maximum of each metric over the cases of each group (finite values only); '
           "pass rate = passed / (passed + failed).</p>"]
    out.append('<div class="tables">')
    for t in data.tables:
        rows = table_rows(t)
        classes = ["sep" if name.endswith(" ave") and i else "" for i, (name, _) in enumerate(rows)]
        classes[-2] = "sep"
        out.append(f"<div><h3>By {escape(t.title)}</h3>")
        out.append(_table(["", *[g.value for g in t.groups]], [[name, *cells] for name, cells in rows], row_classes=classes))
        out.append("</div>")
    out.append("</div>")
    return out


def _histograms(data: ReportData) -> list[str]:
    out = ['<h2 id="histograms">Relative-difference histograms</h2>']
    if not data.histogram_by_dtype:
        return out + ['<p class="note">No case produced a histogram.</p>']
    out.append('<p class="note">Elements per bucket of |ref − out| / |ref|, summed over the cases of each dtype.</p>')
    out.append(_image(plots.histogram_plot(data.histogram_by_dtype, "Relative difference by dtype (all cases)"),
                      "relative-difference histogram by dtype"))
    cols = data.histogram_by_dtype
    out.append(_table(["relative difference", *[c.label for c in cols]], [[n, *cells] for n, cells in histogram_rows(cols)]))
    if data.worst_histograms:
        out.append("<h3>Worst cases</h3>")
        out.append(_image(plots.histogram_plot(data.worst_histograms, "Relative difference of the worst cases"),
                          "relative-difference histogram of the worst cases"))
        cols = data.worst_histograms
        out.append(_table(["relative difference", *[c.label for c in cols]],
                          [[n, *cells] for n, cells in histogram_rows(cols, with_elements=True)]))
    return out


def _worst(data: ReportData) -> list[str]:
    out = ['<h2 id="worst">Worst cases by margin</h2>',
           '<p class="note">margin = value / tolerance of the case\'s worst metric; above 1 the case fails.</p>',
           _image(plots.margin_plot(data.records), "margin of every case by dtype")]
    rows, classes = [], []
    for r in data.worst:
        metric = r.worst_metric
        rows.append([r.case_id, r.status, metric or "–", fmt(r.metrics.get(metric)) if metric else "–",
                     fmt(r.tolerances.get(metric)) if metric else "–", fmt(r.margin), _code(r.repro)])
        classes.append("failed" if r.status == "failed" else "")
    if rows:
        out.append(_table(["case", "status", "metric", "value", "tolerance", "margin", "repro"], rows, row_classes=classes,
                          left=(0, 1, 2, 6), raw_columns=(6,)))
    return out


def _failures(data: ReportData) -> list[str]:
    out = [f'<h2 id="failures">Failures ({len(data.failures)})</h2>']
    if not data.failures:
        return out + ["<p>None.</p>"]
    shown = data.failures[:MAX_FAILURES_LISTED]
    out.append(_table(["case", "where", "reason", "repro"], [[r.case_id, r.phase, r.reason, _code(r.repro)] for r in shown],
                      left=(0, 1, 2, 3), raw_columns=(3,), wide=(2,)))
    if len(data.failures) > len(shown):
        out.append(f'<p class="note">… and {len(data.failures) - len(shown)} more: <code>e2egen runs</code> / the store.</p>')
    return out
