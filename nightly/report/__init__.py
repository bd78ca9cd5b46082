"""Reports of a run: the seed's aggregate and histogram tables, plots, worst cases, and the
comparison with the previous run. `write_report` writes one self-contained HTML file and a
Markdown summary.

    aggregate.py      tables: average / maximum per metric by range, dtype, direction, layout, reference
    compare_runs.py   new failures, fixed failures, drifts against another run
    arithmetic.py     the kernels' arithmetic per (impl, device, cell), and cells whose findings changed
    model.py          everything a report shows (ReportData), and number formats
    plots.py          matplotlib (Agg) figures as PNG bytes
    html.py, markdown.py   layouts of a ReportData
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from e2egen.nightly.report.compare_runs import DEFAULT_DRIFT
from e2egen.nightly.report.model import ReportData, build_report
from e2egen.nightly.store import Store


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    markdown: Path
    data: ReportData


def write_report(store: Store, out_dir: str | Path, run_id: str | None = None, against: str | None = None, *,
                 drift: float = DEFAULT_DRIFT, top: int = 20) -> ReportFiles:
    from e2egen.nightly.report.html import render_html
    from e2egen.nightly.report.markdown import render_markdown

    data = build_report(store, run_id, against, drift=drift, top=top)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path = out_dir / f"report-{data.run.run_id}.html"
    md_path = out_dir / f"report-{data.run.run_id}.md"
    html_path.write_text(render_html(data), encoding="utf-8")
    md_path.write_text(render_markdown(data), encoding="utf-8")
    return ReportFiles(html_path, md_path, data)


__all__ = ["DEFAULT_DRIFT", "ReportData", "ReportFiles", "build_report", "write_report"]
