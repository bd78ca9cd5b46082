"""The HTML report as a person sees it: rendered by headless Chromium at 1280×900, checked through the DOM.

What a reader must get without scrolling or clicking: the failures right under the summary, within the first
screen; each failure one line with its details folded (no probe dump on show); trend plots that load; an
explanation on every metric name. Needs Debian's chromium (/usr/bin/chromium) and the Python package
playwright (the dev extra); playwright's own browser download is not used.
"""
from __future__ import annotations

import shutil
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from e2egen.nightly.records import metric_keys
from e2egen.nightly.report import write_report
from test_nightly_report import (FWD_CELL, PROBE_DUMP, arithmetic, failed, metric_failure, nightly_store)
from test_nightly_support import synthetic_record

CHROMIUM = Path("/usr/bin/chromium")
VIEWPORT = {"width": 1280, "height": 900}


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the Python package playwright is missing: .venv/bin/pip install 'playwright>=1.40' "
                    "(or pip install -e '.[dev]')")
    if not CHROMIUM.exists() or not shutil.which(str(CHROMIUM)):
        pytest.skip(f"{CHROMIUM} is missing: apt-get install -y chromium (Debian); playwright's own browsers are not used")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """Three nights; the last has a new failure past its bound, one still failing with a probe dump in its
    reason and findings, and a max_ulp_diff of 2e9 (a sign flip in f32)."""
    tmp = tmp_path_factory.mktemp("browser")
    with nightly_store(tmp / "e2e.sqlite", 3) as store:
        store.add_record(failed("s/gemm/old/fwd/f16/nn/r0", "rms over", run_id="n2", failures=[metric_failure("rms", 1.0, 1e-3)]))
        store.add_record(failed(
            "s/gemm/old/fwd/f16/nn/r0", "arithmetic: the probes' crafted inputs came back wrong, which no rounding explains "
            f"(a kernel bug): {PROBE_DUMP}", run_id="n3", failures=[metric_failure("rms", 1.0, 1e-3)],
            arithmetic=arithmetic(FWD_CELL, "probed now", acc_bits=11, unexplained=(PROBE_DUMP,))))
        store.add_record(failed(
            "s/gemm/new/fwd/f32/nn/r0", "FAIL: bound_ratio 3.2 > 1 (3.2x)", run_id="n3",
            failures=[metric_failure("bound_ratio", 3.2, 1.0)],
            metrics={**dict.fromkeys(metric_keys(), 0.0), "bound_ratio": 3.2, "max_ulp_diff": 2.0e9},
            worst={"bound_ratio": {"index": 145, "position": [4, 17], "ref": 1.0, "out": -1.0, "bound": 0.1}}))
        store.add_record(replace(synthetic_record("n3", "s/gemm/b/fwd/f32/nn/r0", dtype="f32",
                                                  metrics={"max_ulp_diff": 2.0e9, "rms": 1e-4})))
        return write_report(store, tmp / "reports").html


@pytest.fixture
def page(browser, report):
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(report.as_uri())
    page.wait_for_load_state("load")
    yield page
    page.close()


def test_the_first_screen_shows_the_failures(page, tmp_path):
    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot))
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (VIEWPORT["width"], VIEWPORT["height"])
    from PIL import Image

    with Image.open(shot) as image:
        colours = image.convert("L").getextrema()
    assert colours[1] - colours[0] > 100 and len(png) > 20_000  # text and colour, not a blank page

    # The failures are the first section after the summary, and start within the first screen.
    order = page.evaluate("""() => {
        const header = document.querySelector('header#summary');
        const first = document.querySelector('main > section');
        return [header.nextElementSibling.tagName, first.id, first.previousElementSibling];
    }""")
    assert order == ["MAIN", "failures", None]
    box = page.locator("section#failures").bounding_box()
    assert box is not None and box["y"] < VIEWPORT["height"]
    # New first, each one line in words.
    summaries = page.locator("section#failures details > summary").all_inner_texts()
    assert len(summaries) == 3  # the new gemm and conv2d failures, then the gemm failing since n2
    assert summaries[0].startswith("new") and "s/gemm/new/fwd/f32/nn/r0" in summaries[0]
    assert "bound exceeded 3.2× at element (4, 17)" in summaries[0]
    assert summaries[1].startswith("new") and "s/conv2d/a/fwd/f16/nchw/r0" in summaries[1]
    assert summaries[2].startswith("still failing") and "no rounding explains" in summaries[2]


def test_details_are_folded_until_opened(page):
    details = page.locator("details")
    assert details.count() >= 2
    assert page.evaluate("() => [...document.querySelectorAll('details')].every(d => !d.open)")
    # No raw probe dump on show: not in the rendered text, and its element hidden.
    assert "0x3c00" not in page.locator("body").inner_text()
    probe = page.locator("section#failures pre.probe").first
    assert not probe.is_visible()
    page.locator("section#failures details > summary").nth(2).click()
    assert probe.is_visible() and "0x3c00" in probe.inner_text()


def test_trend_plots_load(page):
    images = page.locator("section#trends img")
    assert images.count() == 3
    sizes = page.evaluate("() => [...document.querySelectorAll('#trends img')].map(i => [i.complete, i.naturalWidth])")
    assert all(complete and width > 0 for complete, width in sizes), sizes


def test_every_metric_name_shown_is_explained(page):
    terms = page.evaluate("""() => [...document.querySelectorAll('a.term')].map(a => [
        a.textContent, a.title, !!document.getElementById(a.getAttribute('href').slice(1))])""")
    assert terms and {"bound_ratio", "max_ulp_diff", "rms", "pass rate", "margin"} <= {t[0] for t in terms}
    for name, title, has_entry in terms:
        assert title.strip() and has_entry, name
    # Every metric a failure's details list is a term too (ftz_allowed and the counts included).
    metric_cells = page.evaluate("""() => [...document.querySelectorAll('section#failures table tbody td:first-child')]
        .map(td => [td.textContent, !!td.querySelector('a.term[title]')])""")
    assert metric_cells and all(explained for _, explained in metric_cells), metric_cells
    glossary = page.locator("section#glossary").inner_text()
    assert "max_ulp_diff" in glossary and "opposite sides of zero" in glossary
    # The 2e9 ulp count is marked and explained in words where it is shown.
    huge = page.locator("section#aggregates span.huge").first
    assert huge.inner_text() == "2.00E+09 *" and "opposite sides of zero" in huge.get_attribute("title")
    assert page.locator("section#aggregates p.huge-note").first.is_visible()
