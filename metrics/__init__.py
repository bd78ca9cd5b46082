"""Comparison of a kernel's output with its float64 reference, and the verdict.

    from e2egen.metrics import compare
    c = compare(ref, out, dtype="f16")
    v = c.check({"rms": 1e-4, "max_eps_diff": 8})

Depends on numpy and torch only (numba, when installed, makes the CPU path a
single fused pass). See docs/reference/metrics.md for the exact definitions.

The public names are loaded on first use (PEP 562): torch and numba are
imported when a comparison runs, so code that only needs the names (the
catalogue checker, `e2egen gen`) stays fast.
"""
from __future__ import annotations

from e2egen.metrics.lazy import lazy_exports

# public name -> the submodule that defines it
_SOURCES = {
    "compare": "compare",
    "FloatComparison": "comparison", "IntegerComparison": "comparison", "WorstElement": "comparison",
    "DTYPE_NAMES": "formats", "Format": "formats", "IntegerFormat": "formats", "dtype_name": "formats",
    "get_format": "formats",
    "ALLOWANCE_NAMES": "names", "HISTOGRAM_BUCKETS": "names", "INTEGER_METRIC_NAMES": "names",
    "METRIC_NAMES": "names", "TOLERANCE_KEYS": "names",
    "flush_subnormals": "rounding", "round_to": "rounding", "ulp": "rounding",
    "Failure": "verdict", "Verdict": "verdict",
}

__all__ = [
    "compare", "FloatComparison", "IntegerComparison", "WorstElement", "Verdict", "Failure",
    "Format", "IntegerFormat", "get_format", "dtype_name", "ulp", "round_to", "flush_subnormals",
    "DTYPE_NAMES", "METRIC_NAMES", "ALLOWANCE_NAMES", "INTEGER_METRIC_NAMES", "TOLERANCE_KEYS",
    "HISTOGRAM_BUCKETS",
]


__getattr__, __dir__ = lazy_exports(__name__, _SOURCES, __all__, globals())
