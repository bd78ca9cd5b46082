"""The keys a catalogue may use at each level, and the values each accepts."""
from __future__ import annotations

from e2egen.generator.catalogue import AXES

TOP_KEYS = ("seed", "pr_selection", "ranges", "tolerances", "reference", "bound", "suite")
SUITE_KEYS = (
    "name", "description", "op", "dtypes", "directions", "layouts", "ranges",
    "config", "exclude", "tolerances", "reference", "bound", "impl", "markers", "pr",
)
CONFIG_META_KEYS = ("name", "exclude", "tolerances", "reference", "bound", "markers", "pr")
CONFIG_EXCLUDE_KEYS = AXES  # an exclude names suite axes; a suite's may also name configs
SUITE_EXCLUDE_KEYS = ("configs", *AXES)

# The keys, kinds and defaults of the [reference] and [bound] tables live with
# their dataclasses: e2egen.runner.options (ReferenceOptions, BoundModel).

# Names: suite and config names become parts of case ids and of file names.
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.+-]*"
MARKER_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"
