"""Reports of a synthetic store: the aggregates (computed here independently), the run comparison,
and the HTML (well formed, tables complete, embedded PNGs that decode) and Markdown files."""
from __future__ import annotations

import base64
import math
import struct
from html import escape
from html.parser import HTMLParser

import pytest

from e2egen.metrics.names import HISTOGRAM_BUCKETS
from e2egen.nightly.report import build_report, write_report
from e2egen.nightly.report.aggregate import GROUPINGS, REPORT_METRICS
from e2egen.nightly.report.model import fmt
from e2egen.nightly.store import Store
from test_nightly_support import histogram, synthetic_record

FTZ = {"device": "cpu", "ftz": True, "accumulate": 0, "round_output": False}
ON_DEVICE_ACC = {"device": "device", "ftz": False, "accumulate": 4, "round_output": False}


def now_records():
    r = synthetic_record
    return [
        r("r2", "s/conv2d/a/fwd/f16/nchw/r0", dtype="f16", range_="r0", direction="fwd", layout="nchw",
          metrics={"max_eps_diff": 10.0, "rms": 1e-4, "max_rel_diff": 0.5}, histogram=histogram(b0=90, b4=10)),
        r("r2", "s/conv2d/b/bwd_data/f16/nhwc/r4", dtype="f16", range_="r4", direction="bwd_data", layout="nhwc",
          status="failed", reason="rms 3e-3 > 1e-3", metrics={"max_eps_diff": 30.0, "rms": 3e-3, "max_rel_diff": 2.0},
          histogram=histogram(b0=50, b5=40, b8=10)),
        r("r2", "s/conv2d/c/fwd/f32/nhwc/r0", dtype="f32", range_="r0", direction="fwd", layout="nhwc",
          metrics={"max_eps_diff": 2.0, "rms": 1e-7, "max_rel_diff": math.inf}, tolerances={"rms": 1e-6},
          histogram=histogram(b1=99, b9=1)),
        r("r2", "s/conv2d/d/bwd_weight/f32/nchw/r4", dtype="f32", range_="r4", direction="bwd_weight", layout="nchw",
          status="skipped", reason="no f32 here"),
        r("r2", "s/conv2d/e/fwd/bf16/nchw/r0", dtype="bf16", range_="r0", direction="fwd", layout="nchw",
          status="failed", reason="crashed: worker died", reference=ON_DEVICE_ACC),
        r("r2", "s/conv2d/f/bwd_data/f16/nchw/r0", dtype="f16", range_="r0", direction="bwd_data", layout="nchw",
          metrics={"max_eps_diff": 6.0, "rms": 5e-4}, reference=FTZ, histogram=histogram(b0=10)),
    ]


def previous_records():
    r = synthetic_record
    return [
        r("r1", "s/conv2d/a/fwd/f16/nchw/r0", metrics={"max_eps_diff": 9.0, "rms": 1e-5, "max_rel_diff": 0.4}),
        r("r1", "s/conv2d/b/bwd_data/f16/nhwc/r4", metrics={"max_eps_diff": 3.0, "rms": 2e-4}),
        r("r1", "s/conv2d/c/fwd/f32/nhwc/r0", status="failed", reason="rms 2e-6 > 1e-6", metrics={"rms": 2e-6},
          tolerances={"rms": 1e-6}),
        r("r1", "s/conv2d/f/bwd_data/f16/nchw/r0", metrics={"max_eps_diff": 6.0, "rms": 4e-4}, reference=FTZ),
        r("r1", "s/conv2d/g/fwd/f16/nchw/r0", metrics={"rms": 1e-4}),
    ]


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "e2e.sqlite") as s:
        s.upsert_run({"run_id": "r1", "global_seed": 1, "started": "2025-01-13T02:00:00Z", "ended": "2025-01-13T03:00:00Z"})
        s.upsert_run({"run_id": "r2", "global_seed": 2, "started": "2025-01-14T02:00:00Z", "ended": "2025-01-14T03:00:00Z",
                      "selected": 6, "machine": {"hostname": "node1", "torch": "2.x"}, "device": "cpu"})
        for record in previous_records() + now_records():
            assert s.add_record(record)
        yield s


def expected_tables(records):
    """The aggregates, computed the plain way: {axis: {group: {row: value}}}."""
    out = {}
    for axis, _title in GROUPINGS:
        groups = {}
        for rec in records:
            value = rec.reference_variant if axis == "reference_variant" else rec.axes[axis]
            groups.setdefault(value, []).append(rec)
        table = {}
        for value, members in groups.items():
            rows = {}
            for metric in REPORT_METRICS:
                values = [m.metrics[metric] for m in members if metric in m.metrics and math.isfinite(m.metrics[metric])]
                rows[f"{metric} ave"] = sum(values) / len(values) if values else None
                rows[f"{metric} max"] = max(values) if values else None
            passed = sum(m.status == "passed" for m in members)
            failed = sum(m.status == "failed" for m in members)
            rows["pass rate"] = passed / (passed + failed) if passed + failed else None
            rows["cases"] = len(members)
            table[value] = rows
        out[axis] = table
    return out


def test_aggregates_match_an_independent_computation(store):
    data = build_report(store)
    assert data.run.run_id == "r2" and data.previous.run_id == "r1"  # default: latest against the one before
    expected = expected_tables(now_records())
    assert {t.axis for t in data.tables} == set(expected)
    for table in data.tables:
        assert {g.value for g in table.groups} == set(expected[table.axis])
        for group in table.groups:
            want = expected[table.axis][group.value]
            assert group.cases == want["cases"]
            assert group.pass_rate == pytest.approx(want["pass rate"]) if want["pass rate"] is not None else group.pass_rate is None
            for metric in REPORT_METRICS:
                for kind, got in (("ave", group.metrics[metric].average), ("max", group.metrics[metric].maximum)):
                    w = want[f"{metric} {kind}"]
                    assert (got is None and w is None) or got == pytest.approx(w), (table.axis, group.value, metric, kind)
    dtypes = next(t for t in data.tables if t.axis == "dtype")
    assert [g.value for g in dtypes.groups] == ["f32", "f16", "bf16"]  # natural order, not alphabetical
    refs = next(t for t in data.tables if t.axis == "reference_variant")
    assert {g.value for g in refs.groups} == {"cpu", "cpu+ftz", "device+acc4"}
    # Headline: 3 passed, 2 failed, 1 skipped; pass rate 3/5.
    assert (data.summary.passed, data.summary.failed, data.summary.skipped) == (3, 2, 1)
    assert data.summary.pass_rate == pytest.approx(0.6)


def test_histograms_sum_buckets_per_dtype(store):
    data = build_report(store)
    by_dtype = {c.label: c for c in data.histogram_by_dtype}
    assert set(by_dtype) == {"f32", "f16"}
    assert by_dtype["f16"].counts[HISTOGRAM_BUCKETS[0]] == 90 + 50 + 10
    assert by_dtype["f16"].counts[HISTOGRAM_BUCKETS[8]] == 10 and by_dtype["f16"].total == 210
    assert by_dtype["f32"].counts["ref == 0"] == 1 and by_dtype["f16"].max_rel_diff == 2.0


def test_worst_cases_and_the_comparison_with_the_previous_run(store):
    data = build_report(store, drift=4)
    # Failed without a margin (the crash) first, then by margin: b (3x), a (0.1), f (0.5)...
    assert [r.case_id.split("/")[2] for r in data.worst[:3]] == ["e", "b", "f"]
    assert data.worst[1].margin == pytest.approx(3.0) and data.worst[1].worst_metric == "rms"
    c = data.comparison
    assert [ch.case_id.split("/")[2] for ch in c.new_failures] == ["b", "e"]
    assert c.new_failures[1].before is None  # e is new
    assert [ch.case_id.split("/")[2] for ch in c.fixed] == ["c"]
    assert [(d.case_id.split("/")[2], d.metric) for d in c.drifts] == [("a", "rms")]  # 10x; f grew 1.25x only
    assert c.drifts[0].growth == pytest.approx(10.0)
    assert c.only_before == ("s/conv2d/g/fwd/f16/nchw/r0",)
    assert build_report(store, drift=20).comparison.drifts == ()
    # --against: r1 against itself means no comparison; r1 has nothing before it.
    assert build_report(store, "r1").comparison is None


class Checker(HTMLParser):
    """Checks nesting and collects tables (rows of cells) and image sources."""

    VOID = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.tables, self.images, self.errors = [], [], [], []
        self._cell = None

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs))
        if tag in self.VOID:
            return
        self.stack.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()
        if tag in ("td", "th"):
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_html_report_is_well_formed_with_tables_and_png_plots(store, tmp_path):
    files = write_report(store, tmp_path / "reports")
    html = files.html.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "<script" not in html and "http://" not in html and "https://" not in html
    checker = Checker()
    checker.feed(html)
    checker.close()
    assert not checker.errors and not checker.stack
    # Every table is rectangular; the aggregate tables carry the expected numbers in the seed's layout.
    assert len(checker.tables) >= len(GROUPINGS) + 3
    for table in checker.tables:
        assert table and len({len(row) for row in table}) == 1, table[:2]
    by_range = next(t for t in checker.tables if t[0][1:] == ["r0", "r4"])
    rows = {row[0]: row[1:] for row in by_range}
    expected = expected_tables(now_records())["range"]
    assert rows["max_eps_diff ave"] == [fmt(expected["r0"]["max_eps_diff ave"]), fmt(expected["r4"]["max_eps_diff ave"])]
    assert rows["rms max"] == [fmt(expected["r0"]["rms max"]), fmt(expected["r4"]["rms max"])]
    assert rows["pass rate"] == ["75.00%", "0.00%"]
    histogram_table = next(t for t in checker.tables if t[0][0] == "relative difference")
    assert [row[0] for row in histogram_table[1:len(HISTOGRAM_BUCKETS) + 1]] == list(HISTOGRAM_BUCKETS)
    assert histogram_table[1][1:] == ["0(0.000000%)", "150(71.428571%)"]  # f32, f16: bucket "0"
    # Plots: embedded PNGs that decode, with a sane size.
    assert len(checker.images) >= 3
    for image in checker.images:
        src = image["src"]
        assert src.startswith("data:image/png;base64,")
        png = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
        width, height = struct.unpack(">II", png[16:24])
        assert 100 < width < 5000 and 100 < height < 5000
        assert image.get("alt")
    # Repro commands of the worst cases are in the page.
    assert "e2egen run s/conv2d/b/bwd_data/f16/nhwc/r4 --seed 1" in html


def test_markdown_summary(store, tmp_path):
    md = write_report(store, tmp_path / "reports", "r2", "r1").markdown.read_text(encoding="utf-8")
    assert md.startswith("# e2egen nightly report: run r2")
    assert "**6 cases: 3 passed, 2 failed, 1 skipped (pass rate 60.00%)**" in md
    assert "### New failures" in md and "### Fixed" in md and "### Drifts" in md
    assert "| max_eps_diff ave | " in md and "### By reference variant" in md and " | cpu+ftz | " in md
    for line in md.splitlines():
        if line.startswith("|"):
            assert line.endswith("|")
    assert "`e2egen run s/conv2d/b/bwd_data/f16/nhwc/r4 --seed 1`" in md


def test_report_of_an_empty_store_is_a_user_error(tmp_path):
    from e2egen.nightly.errors import NightlyError

    with Store(tmp_path / "e.sqlite") as s, pytest.raises(NightlyError, match="no runs yet"):
        build_report(s)


# -- the kernels' arithmetic ---------------------------------------------------------------
def arithmetic(cell: str, origin: str, *, impl: str = "cudnn", device: str = "NVIDIA H100", torch: str = "2.5.1",
               **findings) -> dict:
    from e2egen.runner.arithmetic.model import Arithmetic

    return {"cell": cell, "device": device, "impl": impl, "versions": {"torch": torch, "cudnn": "90100"},
            "origin": origin, "findings": Arithmetic(**findings).to_table()}


BWD_CELL = "conv2d/bwd_data/f16/nchw/window"
FWD_CELL = "conv2d/fwd/f16/nchw/window"


def arithmetic_store(path, *, acc_bits_now: int, impl: str = "cudnn", origin: str = "cached profile nvidia-h100--cudnn.toml"):
    """Two runs of two cases (one per cell); in r2 the bwd_data cell was probed during the run."""
    from dataclasses import replace

    store = Store(path)
    store.upsert_run({"run_id": "r1", "started": "2025-01-13T02:00:00Z"})
    store.upsert_run({"run_id": "r2", "started": "2025-01-14T02:00:00Z"})
    for run_id, bits, bwd_origin, torch in (("r1", 24, origin, "2.5.1"),
                                            ("r2", acc_bits_now, "probed now, cached in /cache/h100.toml", "2.6.0")):
        bwd = arithmetic(BWD_CELL, bwd_origin, impl=impl, torch=torch, acc_bits=bits, groups="taps", inner_bits=24,
                         probed_with=f"probe of {run_id}")
        fwd = arithmetic(FWD_CELL, origin, impl=impl, torch=torch, inputs="tf32")
        for case, data in (("s/conv2d/a/bwd_data/f16/nchw/r0", bwd), ("s/conv2d/a/fwd/f16/nchw/r0", fwd),
                           ("s/conv2d/b/fwd/f16/nchw/r0", fwd)):
            assert store.add_record(replace(synthetic_record(run_id, case, metrics={"rms": 1e-4}), arithmetic=data))
    return store


def test_arithmetic_section_and_the_flag_of_a_changed_cell(tmp_path):
    with arithmetic_store(tmp_path / "e.sqlite", acc_bits_now=11) as store:
        data = build_report(store)
        files = write_report(store, tmp_path / "reports")
    assert [(c.impl, c.device, c.cell, c.cases) for c in data.arithmetic] == [
        ("cudnn", "NVIDIA H100", BWD_CELL, 1), ("cudnn", "NVIDIA H100", FWD_CELL, 2)]
    (change,) = data.comparison.arithmetic_changes
    assert change.key == ("cudnn", "NVIDIA H100", BWD_CELL) and change.differences == ("acc_bits 24 -> 11",)
    assert change.text == "profile changed since r1: acc_bits 24 -> 11; versions: torch 2.5.1 -> 2.6.0"
    flag = f"cudnn on NVIDIA H100, {BWD_CELL}: profile changed since r1: acc_bits 24 -> 11"
    bwd_words = "products see the inputs as given; one partial per kernel tap in f32, partials added in f16; rounds nearest-even"
    fwd_words = "products see tf32-rounded inputs; accumulates in f32; rounds nearest-even"

    html = files.html.read_text(encoding="utf-8")
    checker = Checker()
    checker.feed(html)
    checker.close()
    assert not checker.errors and not checker.stack
    # The flag sits at the top, before the first section, with both values.
    assert "Arithmetic changed in 1 cell</b>" in html and escape(flag) in html
    assert html.index(escape(flag)) < html.index('<h2 id="against">')
    assert '<div class="card bad"><b>1</b>arithmetic changes</div>' in html
    table = next(t for t in checker.tables if t[0][:3] == ["impl", "device", "cell"])
    assert table[1:] == [
        ["cudnn", "NVIDIA H100", BWD_CELL, bwd_words, "probed during this run; cached in /cache/h100.toml",
         "profile changed since r1: acc_bits 24 -> 11; versions: torch 2.5.1 -> 2.6.0"],
        ["cudnn", "NVIDIA H100", FWD_CELL, fwd_words, "cached profile nvidia-h100--cudnn.toml", "unchanged since r1"]]

    md = files.markdown.read_text(encoding="utf-8")
    assert "**Arithmetic changed in 1 cell**" in md and f"- {flag}" in md
    assert md.index(flag) < md.index("## Against run r1") < md.index("## Arithmetic")
    assert (f"| cudnn | NVIDIA H100 | {BWD_CELL} | {bwd_words} | probed during this run; cached in /cache/h100.toml | "
            "profile changed since r1: acc_bits 24 -> 11; versions: torch 2.5.1 -> 2.6.0 |") in md


def test_no_arithmetic_flag_when_nothing_changed(tmp_path):
    with arithmetic_store(tmp_path / "e.sqlite", acc_bits_now=24) as store:
        data = build_report(store)
        files = write_report(store, tmp_path / "reports")
    assert data.comparison.arithmetic is not None and data.comparison.arithmetic_changes == ()
    html = files.html.read_text(encoding="utf-8")
    md = files.markdown.read_text(encoding="utf-8")
    assert "profile changed" not in html and "profile changed" not in md and "Arithmetic changed" not in html + md
    assert '<div class="card good"><b>0</b>arithmetic changes</div>' in html
    assert "probed during this run; cached in /cache/h100.toml" in html  # the section is there all the same
    assert md.count("unchanged since r1") == 2


def test_reports_of_runs_without_arithmetic_have_no_section_and_no_flag(store, tmp_path):
    data = build_report(store)
    assert data.arithmetic == () and data.comparison.arithmetic is None
    html = write_report(store, tmp_path / "reports").html.read_text(encoding="utf-8")
    assert "No case of this run recorded its kernel's arithmetic" in html and "arithmetic changes</div>" not in html


def test_arithmetic_text_is_escaped_in_html(tmp_path):
    with arithmetic_store(tmp_path / "e.sqlite", acc_bits_now=8, impl="my<impl>&co",
                          origin="cached profile <b>odd</b>.toml") as store:
        html = write_report(store, tmp_path / "reports").html.read_text(encoding="utf-8")
    assert "<b>odd</b>" not in html and "my<impl>" not in html
    assert "cached profile &lt;b&gt;odd&lt;/b&gt;.toml" in html
    assert "my&lt;impl&gt;&amp;co on NVIDIA H100, conv2d/bwd_data/f16/nchw/window: profile changed since r1: acc_bits 24 -&gt; 8" in html
    checker = Checker()
    checker.feed(html)
    checker.close()
    assert not checker.errors and not checker.stack
