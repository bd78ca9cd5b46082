"""Reports of a synthetic store: the aggregates (computed here independently), the run comparison,
and the HTML (well formed, tables complete, embedded PNGs that decode) and Markdown files."""
from __future__ import annotations

import base64
import math
import struct
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
    # What needs action comes first: the failures right after the summary, then arithmetic changes and trends.
    sections = [line.split('"')[1] for line in html.splitlines() if line.startswith("<section id=")]
    assert sections == ["failures", "arithmetic-changes", "trends", "against", "arithmetic", "aggregates", "histograms",
                        "worst", "glossary"]
    assert html.index("</header>") < html.index('<section id="failures">') < html.index('<section id="aggregates">')
    failures = html[html.index('<section id="failures">'):html.index('<section id="arithmetic-changes">')]
    assert failures.count('<details class="failure') == 2 and "<details open" not in html  # collapsed
    assert failures.index("s/conv2d/e/fwd/bf16/nchw/r0") < failures.index("s/conv2d/b/bwd_data/f16/nhwc/r4")  # by margin


def test_markdown_summary(store, tmp_path):
    md = write_report(store, tmp_path / "reports", "r2", "r1").markdown.read_text(encoding="utf-8")
    assert md.startswith("# e2egen nightly report: run r2")
    assert "**6 cases: 3 passed, 2 failed, 1 skipped (pass rate 60.00%)**" in md
    # The failures lead: the first section after the headline, one line each, then the rest in order.
    sections = [line for line in md.splitlines() if line.startswith("## ")]
    assert sections[0] == "## Failures (2, 2 new)"
    assert sections.index("## Trends") < sections.index("## Against run r1") < sections.index("## Aggregates")
    assert sections[-1] == "## What the numbers mean"
    assert "- **new** `s/conv2d/b/bwd_data/f16/nhwc/r4`: rms 3e-3 > 1e-3" in md
    assert "### Fixed" in md and "### Drifts" in md and "### New failures" not in md  # listed once, at the top
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
    bwd_words = "products see the inputs as given; one partial per kernel tap in f32, partials added in f16; rounds nearest-even"
    fwd_words = "products see tf32-rounded inputs; accumulates in f32; rounds nearest-even"

    html = files.html.read_text(encoding="utf-8")
    checker = Checker()
    checker.feed(html)
    checker.close()
    assert not checker.errors and not checker.stack
    # The change is a table near the top, in words: where, before and now, what changed; no raw field dump.
    assert html.index('<section id="arithmetic-changes">') < html.index('<section id="against">')
    assert '<h2>Arithmetic changes (1)</h2>' in html and "acc_bits 24 -&gt; 11" not in html[:html.index('id="against"')]
    assert '<b>1</b>arithmetic changes</div>' in html and 'class="card bad"' in html
    changes = next(t for t in checker.tables if t[0][:4] == ["device", "impl", "op", "dtype"])
    assert changes[1:] == [["NVIDIA H100", "cudnn", "conv2d", "f16", BWD_CELL, bwd_words.replace("added in f16", "added in f32"),
                            bwd_words, "accumulator significand bits: 24 → 11", "torch 2.5.1 → 2.6.0"]]
    table = next(t for t in checker.tables if t[0][:3] == ["impl", "device", "cell"])
    assert table[1:] == [
        ["cudnn", "NVIDIA H100", BWD_CELL, bwd_words, "probed during this run; cached in /cache/h100.toml",
         "changed since r1: accumulator significand bits: 24 → 11; versions: torch 2.5.1 → 2.6.0"],
        ["cudnn", "NVIDIA H100", FWD_CELL, fwd_words, "cached profile nvidia-h100--cudnn.toml", "unchanged since r1"]]

    md = files.markdown.read_text(encoding="utf-8")
    assert "## Arithmetic changes (1)" in md
    assert (f"| NVIDIA H100 | cudnn | conv2d | f16 | {bwd_words.replace('added in f16', 'added in f32')} | {bwd_words} | "
            "accumulator significand bits: 24 → 11 | torch 2.5.1 → 2.6.0 |") in md
    assert md.index("## Failures") < md.index("## Arithmetic changes") < md.index("## Against run r1") < md.index("## Arithmetic\n")
    assert (f"| cudnn | NVIDIA H100 | {BWD_CELL} | {bwd_words} | probed during this run; cached in /cache/h100.toml | "
            "changed since r1: accumulator significand bits: 24 → 11; versions: torch 2.5.1 → 2.6.0 |") in md


def test_no_arithmetic_flag_when_nothing_changed(tmp_path):
    with arithmetic_store(tmp_path / "e.sqlite", acc_bits_now=24) as store:
        data = build_report(store)
        files = write_report(store, tmp_path / "reports")
    assert data.comparison.arithmetic is not None and data.comparison.arithmetic_changes == ()
    html = files.html.read_text(encoding="utf-8")
    md = files.markdown.read_text(encoding="utf-8")
    assert "profile changed" not in html and "profile changed" not in md
    assert "No cell's measured arithmetic changed since run r1." in md
    assert "No cell's measured arithmetic changed since run r1." in html and "<table class=\"changes\">" not in html
    assert '<b>0</b>arithmetic changes</div>' in html
    assert "probed during this run; cached in /cache/h100.toml" in html  # the section is there all the same
    assert md.count("unchanged since r1") == 2


def test_reports_of_runs_without_arithmetic_have_no_section_and_no_flag(store, tmp_path):
    data = build_report(store)
    assert data.arithmetic == () and data.comparison.arithmetic is None
    html = write_report(store, tmp_path / "reports").html.read_text(encoding="utf-8")
    assert "No case of this run recorded its kernel's arithmetic" in html and "arithmetic changes</div>" not in html
    assert "Run r1 recorded no arithmetic: nothing to compare with." in html


def test_arithmetic_text_is_escaped_in_html(tmp_path):
    with arithmetic_store(tmp_path / "e.sqlite", acc_bits_now=8, impl="my<impl>&co",
                          origin="cached profile <b>odd</b>.toml") as store:
        html = write_report(store, tmp_path / "reports").html.read_text(encoding="utf-8")
    assert "<b>odd</b>" not in html and "my<impl>" not in html
    assert "cached profile &lt;b&gt;odd&lt;/b&gt;.toml" in html
    assert "<td class=\"l\">my&lt;impl&gt;&amp;co</td>" in html
    checker = Checker()
    checker.feed(html)
    checker.close()
    assert not checker.errors and not checker.stack


# -- what needs action: failures in one line each, new first, capped -------------------------
def failed(case_id: str, reason: str, *, run_id: str = "r2", failures=(), worst=None, arithmetic=None, phase="call",
           metrics=None):
    from dataclasses import replace

    record = synthetic_record(run_id, case_id, status="failed", reason=reason, metrics=metrics or {"rms": 1e-2})
    comparison = {"worst": worst} if worst else None
    return replace(record, failures=tuple(failures), comparison=comparison, arithmetic=arithmetic, phase=phase)


def metric_failure(metric: str, value: float, tolerance: float) -> dict:
    ratio = value / tolerance if tolerance else math.inf
    return {"metric": metric, "value": value, "tolerance": tolerance, "ratio": ratio, "reason": "…"}


PROBE_DUMP = "sum of 4096 crafted terms " + "0x3c00 + 0x0001 -> 0x3c01; " * 60  # ~1,700 characters of probe output


@pytest.mark.parametrize("record, expected", [
    (failed("s/gemm/a/fwd/f16/nn/r0", "FAIL: bound_ratio 3.2 > 1 (3.2x)",
            failures=[metric_failure("bound_ratio", 3.2, 1.0)],
            worst={"bound_ratio": {"index": 145, "position": [4, 17], "ref": 1.0, "out": 1.5, "bound": 0.1}}),
     "bound exceeded 3.2× at element (4, 17)"),
    (failed("s/gemm/a/fwd/f16/nn/r0", "FAIL: rms 0.01 > 1e-05 (1e+03x); bound_ratio 630.5 > 1 (630x)",
            failures=[metric_failure("rms", 1e-2, 1e-5), metric_failure("bound_ratio", 630.5, 1.0)]),
     "rms 1,000× its tolerance (0.01 > 1e-05); 1 more metric over tolerance"),
    (failed("s/gemm/a/fwd/f16/nn/r0", 'arithmetic: partial sums pass through f16 (accumulates in f16); the case requires '
            'f32 (require.acc = "f32")', arithmetic=arithmetic(FWD_CELL, "probed now", acc_bits=11)),
     "accumulates in f16 where the catalogue requires f32"),
    (failed("s/gemm/a/fwd/f16/nn/r0", "error while running the case: RuntimeError: CUDA error: an illegal memory access\n"
            "Traceback (most recent call last): ..."),
     "raised RuntimeError: CUDA error: an illegal memory access Traceback (most recent call last): ..."),
    (failed("s/gemm/a/fwd/f16/nn/r0", "the kernel returned NaN where the reference is a number (3 elements, first at "
            "(0, 2)); FAIL: nan_mismatch 3 > 0 allowed", failures=[metric_failure("nan_mismatch", 3, 0.0)]),
     "returned NaN where the reference is a number (3 elements, first at (0, 2))"),
    (failed("s/gemm/a/fwd/f16/nn/r0", "timed out after 600 s"), "timed out after 600 s"),
    (failed("s/gemm/a/fwd/f16/nn/r0", "worker 'gw1' crashed while running this test", phase="crash"),
     "the worker process crashed: worker 'gw1' crashed while running this test"),
    (failed("s/gemm/a/fwd/f16/nn/r0", "crashed: node gw0 went down", phase="crash"),
     "the worker process crashed: node gw0 went down"),
    (failed("s/gemm/a/fwd/f16/nn/r0", "", phase="call"), "failed without a recorded reason"),
])
def test_one_line_reason_says_what_broke_in_words(record, expected):
    from e2egen.nightly.report.failures import one_line_reason

    assert one_line_reason(record) == expected


def test_a_probe_dump_stays_in_the_details(tmp_path):
    from e2egen.nightly.report.failures import ONE_LINE, one_line_reason

    record = failed("s/gemm/a/fwd/f16/nn/r0", "arithmetic: the probes' crafted inputs came back wrong, which no rounding "
                    f"explains (a kernel bug): {PROBE_DUMP}; FAIL: rms 0.01 > 1e-05 (1e+03x)",
                    failures=[metric_failure("rms", 1e-2, 1e-5)])
    line = one_line_reason(record)
    assert line.startswith("the arithmetic probes got results no rounding explains (a kernel bug); rms 1,000×")
    assert len(line) <= ONE_LINE and "0x3c00" not in line
    with Store(tmp_path / "e.sqlite") as store:
        store.upsert_run({"run_id": "r2", "started": "2025-01-14T02:00:00Z"})
        store.add_record(record)
        html = write_report(store, tmp_path / "reports").html.read_text(encoding="utf-8")
    summary = html[html.index("<summary>"):html.index("</summary>")]
    assert "0x3c00" not in summary and "0x3c00" in html[html.index("</summary>"):]  # in the folded details only


def test_failures_lead_new_first_and_the_rest_are_counted(tmp_path):
    from e2egen.nightly.report.model import MAX_FAILURES_LISTED

    with Store(tmp_path / "e.sqlite") as store:
        store.upsert_run({"run_id": "r1", "started": "2025-01-13T02:00:00Z"})
        store.upsert_run({"run_id": "r2", "started": "2025-01-14T02:00:00Z"})
        for i in range(60):
            case = f"s/gemm/c{i:02d}/fwd/f16/nn/r0"
            store.add_record(synthetic_record("r1", case, status="failed" if i < 15 else "passed", reason="rms",
                                              metrics={"rms": 1e-2}))
            # The old failures are the worst by margin: they would come first if new ones did not lead.
            store.add_record(failed(case, "rms over", metrics={"rms": 1.0 if i < 15 else 2e-3},
                                    failures=[metric_failure("rms", 1.0 if i < 15 else 2e-3, 1e-3)]))
        data = build_report(store)
        files = write_report(store, tmp_path / "reports")
    action = data.action
    assert (action.total, action.new, len(action.items)) == (60, 45, MAX_FAILURES_LISTED)
    assert [item.new for item in action.items] == [True] * 45 + [False] * 5
    assert (action.left_out, action.left_out_new) == (10, 0)
    html = files.html.read_text(encoding="utf-8")
    assert "<h2>Failures (60, 45 new)</h2>" in html
    assert html.count('<details class="failure') == MAX_FAILURES_LISTED
    assert "… and 10 more failures not listed (0 of them new)" in html
    assert "SELECT case_id, reason FROM records WHERE run_id = 'r2' AND status = 'failed'" in html
    md = files.markdown.read_text(encoding="utf-8")
    assert md.count("- **new** ") == 25 and "… and 35 more not listed (20 of them new)" in md


def test_case_text_is_escaped_in_the_failures(tmp_path):
    with Store(tmp_path / "e.sqlite") as store:
        store.upsert_run({"run_id": "r2", "started": "2025-01-14T02:00:00Z"})
        store.add_record(failed("s/gemm/a/fwd/f16/nn/r0", "kernel failed: <script>alert(1)</script> & <img src=x>"))
        files = write_report(store, tmp_path / "reports")
    html = files.html.read_text(encoding="utf-8")
    assert "<script" not in html and "<img src=x>" not in html
    assert "kernel failed: &lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;img src=x&gt;" in html
    assert "kernel failed: &lt;script>alert(1)&lt;/script> &amp; &lt;img src=x>" in files.markdown.read_text(encoding="utf-8")


# -- trends over the last nights ---------------------------------------------------------------
def nightly_store(path, nights: int) -> Store:
    """`nights` runs of a gemm and a conv2d case; the gemm's bound_ratio and kernel time grow each night."""
    from dataclasses import replace

    store = Store(path)
    for n in range(nights):
        run_id = f"n{n + 1}"
        store.upsert_run({"run_id": run_id, "started": f"2025-01-{n + 10:02d}T02:00:00Z"})
        gemm = synthetic_record(run_id, "s/gemm/a/fwd/f16/nn/r0", metrics={"bound_ratio": 0.1 * (n + 1), "rms": 1e-4},
                                tolerances={"bound_ratio": 1.0})
        conv = synthetic_record(run_id, "s/conv2d/a/fwd/f16/nchw/r0", metrics={"bound_ratio": 0.05, "rms": 1e-4},
                                status="failed" if n == nights - 1 else "passed", reason="bound")
        store.add_record(replace(gemm, timings={"kernel": 0.001 * (n + 1)}))
        store.add_record(conv)
    return store


def test_trends_cover_the_last_nights(tmp_path):
    with nightly_store(tmp_path / "e.sqlite", 4) as store:
        data = build_report(store, trend_nights=3)
        files = write_report(store, tmp_path / "reports", trend_nights=3)
        everything = build_report(store)
    assert [n.run_id for n in data.trend.nights] == ["n2", "n3", "n4"]
    assert [n.run_id for n in everything.trend.nights] == ["n1", "n2", "n3", "n4"]  # all the store holds
    assert [n.pass_rate for n in data.trend.nights] == [1.0, 1.0, 0.5]
    assert [n.worst_bound_ratio["gemm"] for n in data.trend.nights] == pytest.approx([0.2, 0.3, 0.4])
    assert data.trend.nights[-1].worst_bound_ratio["conv2d"] == pytest.approx(0.05)
    assert [n.kernel_seconds["gemm"] for n in data.trend.nights] == pytest.approx([0.002, 0.003, 0.004])
    html = files.html.read_text(encoding="utf-8")
    trends = html[html.index('<section id="trends">'):html.index('<section id="against">')]
    assert trends.count('<img alt="') == 3 and "The last 3 nights" in trends
    for alt in ("pass rate per night", "worst bound_ratio per op family per night", "median kernel time per op family per night"):
        assert f'<img alt="{alt}" src="data:image/png;base64,' in trends
    md = files.markdown.read_text(encoding="utf-8")
    assert "| n4 | 2025-01-13 | 50.00% | 0.40 (gemm) | 20.00 (conv2d) |" in md  # conv2d: 20 ms, the fixture's default


def test_one_night_says_so_in_one_line(tmp_path):
    with nightly_store(tmp_path / "e.sqlite", 1) as store:
        files = write_report(store, tmp_path / "reports")
    html = files.html.read_text(encoding="utf-8")
    trends = html[html.index('<section id="trends">'):html.index('<section id="against">')]
    assert "Only one night in the store (run n1): the trends start with the second night." in trends
    assert "<img" not in trends
    assert "Only one night in the store (run n1)" in files.markdown.read_text(encoding="utf-8")


def test_trend_nights_must_be_a_whole_number_of_at_least_one(tmp_path):
    import subprocess
    import sys

    from e2egen.nightly.errors import NightlyError

    with nightly_store(tmp_path / "e.sqlite", 2) as store:
        for bad in (0, -1, 2.5, True):
            with pytest.raises(NightlyError, match="--trend-nights: expected a whole number >= 1"):
                write_report(store, tmp_path / "reports", trend_nights=bad)
    result = subprocess.run([sys.executable, "-m", "e2egen", "report", "--store", str(tmp_path / "e.sqlite"),
                             "--trend-nights", "0"], capture_output=True, text=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "argument --trend-nights: expected a whole number >= 1, got '0'" in result.stderr


# -- every metric explained where it is shown --------------------------------------------------
def test_every_metric_name_shown_carries_its_meaning(store, tmp_path):
    import re

    from e2egen.metrics.names import ALLOWANCE_NAMES, INTEGER_METRIC_NAMES, METRIC_DESCRIPTIONS, METRIC_NAMES

    assert set(METRIC_NAMES + ALLOWANCE_NAMES + INTEGER_METRIC_NAMES) <= set(METRIC_DESCRIPTIONS)
    files = write_report(store, tmp_path / "reports")
    html = files.html.read_text(encoding="utf-8")
    terms = re.findall(r'<a class="term" href="#([^"]+)" title="([^"]*)">([^<]+)</a>', html)
    assert {name for _, _, name in terms} >= {"max_eps_diff", "rms", "max_rel_diff", "pass rate", "margin"}
    for target, title, name in terms:
        assert title.strip() and f'<dt id="{target}">{name}</dt>' in html, name
    md = files.markdown.read_text(encoding="utf-8")
    glossary = md[md.index("## What the numbers mean"):]
    for name in ("max_eps_diff", "rms", "max_rel_diff", "margin", "pass rate"):
        assert f"- **{name}**: " in glossary


def test_a_huge_ulp_count_is_explained_in_words(tmp_path):
    with Store(tmp_path / "e.sqlite") as store:
        store.upsert_run({"run_id": "r2", "started": "2025-01-14T02:00:00Z"})
        store.add_record(synthetic_record("r2", "s/gemm/a/fwd/f32/nn/r0", dtype="f32",
                                          metrics={"max_ulp_diff": 2.0e9, "rms": 1e-4}))
        files = write_report(store, tmp_path / "reports")
    html = files.html.read_text(encoding="utf-8")
    assert '<span class="huge" title="a count this large is no rounding error' in html and "2.00E+09 *" in html
    assert '<p class="note huge-note">* a count this large is no rounding error' in html
    assert "opposite sides of zero" in html
    md = files.markdown.read_text(encoding="utf-8")
    assert "| max_ulp_diff max | 2.00E+09 * |" in md and "\\* a count this large is no rounding error" in md
