"""The keys a catalogue may use at each level, and the values each accepts."""
from __future__ import annotations

from e2egen.generator.catalogue import AXES

TOP_KEYS = ("seed", "pr_selection", "ranges", "tolerances", "reference", "bound", "require", "verifier", "accept", "suite", "timeout",
            "edges")
SUITE_KEYS = (
    "name", "description", "op", "dtypes", "directions", "layouts", "ranges",
    "config", "exclude", "tolerances", "reference", "bound", "require", "verifier", "impl", "markers", "pr", "timeout",
    "edges",
)
RANGE_KEYS = ("range", "data", "random")  # a [ranges] entry as a table: { range = [lo, hi], data = "integers", random = ["w"] }
CONFIG_META_KEYS = ("name", "exclude", "tolerances", "reference", "bound", "require", "verifier", "markers", "pr", "timeout")
CONFIG_EXCLUDE_KEYS = AXES  # an exclude names suite axes; a suite's may also name configs
SUITE_EXCLUDE_KEYS = ("configs", *AXES)

# The keys, kinds and defaults of the [reference], [bound], [require] and [verifier] tables live
# with their dataclasses: e2egen.runner.options (ReferenceOptions, BoundModel, Requirements, VerifierOptions).
# An [[accept]] entry's keys: device (required), impl, cells, require (required), reason (required).
ACCEPT_KEYS = ("device", "impl", "cells", "require", "reason")

# Names: suite and config names become parts of case ids and of file names.
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.+-]*"
# A suite names its test module, test_<name>.py, and that module's bytecode file beside it: file systems
# allow 255 bytes per file name, and 100 characters leave room for the prefix and suffixes.
SUITE_NAME_MAX = 100
MARKER_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"
# Markers that change how pytest runs or judges a case (xfail turns a failure into XFAIL, skip hides it),
# pytest's own and those of the plugins the generated suites load, and `pr`, which selects the PR subset
# (`pr = true` says that). Catalogue markers only label cases.
RESERVED_MARKERS = {
    **dict.fromkeys(("filterwarnings", "parametrize", "skip", "skipif", "usefixtures", "xfail", "tryfirst", "trylast"),
                    "a pytest built-in marker"),
    "timeout": "pytest-timeout's marker", "xdist_group": "pytest-xdist's marker",
    "pr": "e2egen's marker of the PR subset (give `pr = true` instead)",
    "edges": "e2egen's marker of the edge-data cases (runner/edge_data.py)",
}

# `timeout`: the seconds each case may run (inputs, probes, kernel, reference, comparison), at the top
# level, in a suite or in a config; the most specific wins, `--timeout` on the command line beats them all,
# and without any a case has cases.DEFAULT_TIMEOUT (600 s). A case past it fails: "timed out after N s".
TIMEOUT_KEY = "timeout"
TIMEOUT_RANGE = "a number of seconds > 0 (finite), e.g. 600 or 1.5"


def timeout_problem(value: object) -> str | None:
    """Why `value` is not a valid `timeout` (None: it is)."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"expected {TIMEOUT_RANGE}, got {type(value).__name__} {value!r}"
    if not math.isfinite(value) or value <= 0:
        return f"timeout {value!r} is out of range: expected {TIMEOUT_RANGE}"
    return None
