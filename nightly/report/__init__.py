"""Reports of a run: the seed's aggregate and histogram tables, plots, worst cases, and the
comparison with the previous run. `write_report` writes one self-contained HTML file and a
Markdown summary, each atomically (e2egen.files: a full disk leaves the old file, never half a new one).

    aggregate.py      tables: average / maximum per metric by range, dtype, direction, layout, reference
    compare_runs.py   new failures, fixed failures, drifts against another run
    failures.py       the failures the report leads with, new ones first, each with its reason in one line
    trends.py         pass rate, worst bound_ratio and kernel time over the last N nights
    arithmetic.py     the kernels' arithmetic per (impl, device, cell), and cells whose findings changed
    model.py          everything a report shows (ReportData), and number formats
    plots.py          matplotlib (Agg) figures as PNG bytes
    html.py, markdown.py   layouts of a ReportData (html.py renders templates/report.html.j2 with jinja2)
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from e2egen.files import make_directory, write_text_atomically
from e2egen.nightly.report.compare_runs import DEFAULT_DRIFT
from e2egen.nightly.report.model import ReportData, build_report
from e2egen.nightly.report.trends import DEFAULT_TREND_NIGHTS
from e2egen.nightly.store import Store


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    markdown: Path
    data: ReportData


def write_report(store: Store, out_dir: str | Path, run_id: str | None = None, against: str | None = None, *,
                 drift: float = DEFAULT_DRIFT, top: int = 20, trend_nights: int = DEFAULT_TREND_NIGHTS) -> ReportFiles:
    from e2egen.nightly.report.html import render_html
    from e2egen.nightly.report.markdown import render_markdown

    import math

    from e2egen.nightly.errors import NightlyError

    if not (isinstance(drift, (int, float)) and math.isfinite(drift) and drift > 0):
        raise NightlyError(f"--drift: expected a finite number > 0, got {drift!r}")
    if isinstance(trend_nights, bool) or not isinstance(trend_nights, int) or trend_nights < 1:
        raise NightlyError(f"--trend-nights: expected a whole number >= 1, got {trend_nights!r}")
    data = build_report(store, run_id, against, drift=drift, top=top, trend_nights=trend_nights)
    out_dir = make_directory(out_dir)
    name = file_name_of(data.run.run_id)
    html_path = out_dir / f"report-{name}.html"
    md_path = out_dir / f"report-{name}.md"
    write_text_atomically(html_path, render_html(data))
    write_text_atomically(md_path, render_markdown(data))
    return ReportFiles(html_path, md_path, data)


def file_name_of(run_id: str) -> str:
    """The run id as part of a file name (ids are checked names; one stored before they were is made safe)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", run_id).lstrip(".") or "run"


__all__ = ["DEFAULT_DRIFT", "DEFAULT_TREND_NIGHTS", "ReportData", "ReportFiles", "build_report", "write_report"]
