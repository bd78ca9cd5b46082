"""Small table and number formatting helpers shared by explain (text) and study (Markdown, HTML)."""
from __future__ import annotations

import math
from html import escape
from typing import Sequence

from e2egen.metrics.names import HISTOGRAM_BUCKETS
from e2egen.nightly.report.model import fmt, fmt_bucket, fmt_rate


def num(value: float | int | None, digits: int = 4) -> str:
    """Compact numbers for tables: 0, 12.5, 3.2e-05, inf; '-' for none."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return "0"
    return f"{value:.{digits}g}"


# The seed's number formats are the nightly report's: one definition for both.
seed_number = fmt
rate = fmt_rate
bucket_cell = fmt_bucket


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ", left: int = 1) -> list[str]:
    """Fixed-width columns; the first `left` columns align left, the rest right."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        parts = [c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        return (indent + "  ".join(parts)).rstrip()

    return [line(cells[0])] + [line(r) for r in cells[1:]]


def _md_cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    return lines + ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]


def html_table(header: Sequence[str], rows: Sequence[Sequence[object]], left: int = 1) -> str:
    def cell(tag: str, i: int, text: object) -> str:
        cls = ' class="l"' if i < left else ""
        return f"<{tag}{cls}>{escape(str(text))}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def histogram_rows(columns: Sequence[dict[str, int]]) -> list[list[str]]:
    """Bucket rows of the seed's histogram table, one column per histogram."""
    totals = [sum(c.values()) for c in columns]
    return [[bucket, *[bucket_cell(c.get(bucket, 0), t) for c, t in zip(columns, totals)]] for bucket in HISTOGRAM_BUCKETS]
