"""Comparison of a kernel's output with its float64 reference, and the verdict.

    from metrics import compare
    c = compare(ref, out, dtype="f16")
    v = c.check({"rms": 1e-4, "max_eps_diff": 8})

Depends on numpy and torch only (numba, when installed, makes the CPU path a
single fused pass). See DESIGN.md, "Metrics (exact definitions)".
"""
from metrics.compare import compare
from metrics.comparison import FloatComparison, IntegerComparison, WorstElement
from metrics.formats import DTYPE_NAMES, Format, IntegerFormat, dtype_name, get_format
from metrics.names import (
    ALLOWANCE_NAMES,
    HISTOGRAM_BUCKETS,
    INTEGER_METRIC_NAMES,
    METRIC_NAMES,
    TOLERANCE_KEYS,
)
from metrics.rounding import flush_subnormals, round_to, ulp
from metrics.verdict import Failure, Verdict

__all__ = [
    "compare", "FloatComparison", "IntegerComparison", "WorstElement", "Verdict", "Failure",
    "Format", "IntegerFormat", "get_format", "dtype_name", "ulp", "round_to", "flush_subnormals",
    "DTYPE_NAMES", "METRIC_NAMES", "ALLOWANCE_NAMES", "INTEGER_METRIC_NAMES", "TOLERANCE_KEYS",
    "HISTOGRAM_BUCKETS",
]
