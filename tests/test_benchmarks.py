"""Every benchmark script still loads against the code it measures, and docs/evidence/performance.md lists each one.

That page quotes each script's figures with the command that reproduces them, and nothing else runs the
scripts: a name they import can be renamed or removed without any other test noticing (bench_bound_passes.py
imported ulp_terms.CHUNK for two rounds after it had gone, and bench_threads.py failed through it). Each
script's module level (its imports and constants) runs here without its main(), and two of them answer
--help in a process of their own.
"""
from __future__ import annotations

import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HANG_LIMIT

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("bench_*.py"))


def test_the_performance_page_lists_every_script_and_no_other():
    page = (BENCHMARKS.parent / "docs" / "evidence" / "performance.md").read_text(encoding="utf-8")
    performance = page[page.index("## The scripts"):]
    listed = set(re.findall(r"^\| `(bench_\w+\.py)", performance, flags=re.MULTILINE))
    assert listed == {path.name for path in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_each_script_loads(script, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    namespace = runpy.run_path(str(script), run_name="benchmark_under_test")
    assert callable(namespace.get("main")), f"{script.name} has no main()"


@pytest.mark.parametrize("script", [BENCHMARKS / "bench_bound_passes.py", BENCHMARKS / "bench_metrics.py"],
                         ids=lambda path: path.name)
def test_a_script_answers_help(script):
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=HANG_LIMIT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:")


def _compare_parts(monkeypatch) -> dict:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return runpy.run_path(str(BENCHMARKS / "bench_compare_parts.py"), run_name="benchmark_under_test")


def test_the_comparison_parts_still_match_the_kernel(monkeypatch):
    """bench_compare_parts.py takes each part out of metrics/fused_numba.py by patterns of its lines: each must
    match as often as the part says, and the variant must still be Python."""
    parts = _compare_parts(monkeypatch)
    source = parts["KERNEL_SOURCE"].read_text(encoding="utf-8")
    for part in parts["PARTS"]:
        try:
            variant = parts["variant_source"](source, part)
        except SystemExit as error:
            pytest.fail(str(error))
        assert variant != source, part
        compile(variant, f"<{part}>", "exec")


def test_a_kernel_that_changed_stops_the_comparison_parts(monkeypatch):
    parts = _compare_parts(monkeypatch)
    source = parts["KERNEL_SOURCE"].read_text(encoding="utf-8")
    one_count_fewer = source.replace("            counts_d += 1 if rel >= _E6 else 0\n", "", 1)
    assert one_count_fewer != source
    with pytest.raises(SystemExit, match="histogram"):
        parts["variant_source"](one_count_fewer, "histogram (eight counts)")
