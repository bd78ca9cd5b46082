"""Every benchmark script still loads against the code it measures.

The README quotes each script's figures with the command that reproduces them, and nothing else runs the
scripts: a name they import can be renamed or removed without any other test noticing (bench_bound_passes.py
and bench_threads.py imported ulp_terms.CHUNK for a round after it had gone). Each script's module level
(its imports and constants) runs here without its main(), and its argument parser answers --help.
"""
from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("bench_*.py"))


def test_there_are_benchmarks():
    assert len(SCRIPTS) >= 10


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_each_script_loads(script, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    namespace = runpy.run_path(str(script), run_name="benchmark_under_test")
    assert callable(namespace.get("main")), f"{script.name} has no main()"


@pytest.mark.parametrize("script", [BENCHMARKS / "bench_bound_passes.py", BENCHMARKS / "bench_metrics.py"],
                         ids=lambda path: path.name)
def test_a_script_answers_help(script):
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:")


def test_the_comparison_parts_still_match_the_kernel(monkeypatch):
    """bench_compare_parts.py takes each part out of metrics/fused_numba.py by its lines: each part's lines must
    still be in the kernel, and taking it out must change the source."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    namespace = runpy.run_path(str(BENCHMARKS / "bench_compare_parts.py"), run_name="benchmark_under_test")
    source = namespace["KERNEL_SOURCE"].read_text(encoding="utf-8")
    for part in namespace["PARTS"]:
        assert namespace["variant_source"](source, part) != source, part
