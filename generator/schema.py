"""The keys a catalogue may use at each level, and the values each accepts."""
from __future__ import annotations

TOP_KEYS = ("seed", "pr_selection", "ranges", "tolerances", "reference", "bound", "suite")
SUITE_KEYS = (
    "name", "description", "op", "dtypes", "directions", "layouts", "ranges",
    "config", "exclude", "tolerances", "reference", "bound", "impl", "markers", "pr",
)
CONFIG_META_KEYS = ("name", "exclude", "tolerances", "reference", "bound", "markers", "pr")
SUITE_EXCLUDE_KEYS = ("configs", "dtypes", "directions", "layouts", "ranges")
CONFIG_EXCLUDE_KEYS = ("dtypes", "directions", "layouts", "ranges")

# Reference options: name -> (valid choices or a type, default).
REFERENCE_DEFAULTS = {"device": "cpu", "ftz": False, "accumulate": 0, "round_output": False}
REFERENCE_DEVICES = ("cpu", "device")

# Error-bound model options (used when a case's tolerances name bound_ratio).
BOUND_DEFAULTS = {"lambda": 5.0, "acc": "f32", "strict": False, "c_out": 1.0}
BOUND_ACCUMULATORS = ("f32", "f16", "bf16")

# Names: suite and config names become parts of case ids and of file names.
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.+-]*"
MARKER_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"
