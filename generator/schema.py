"""The keys a catalogue may use at each level, and the values each accepts."""
from __future__ import annotations

from e2egen.generator.catalogue import AXES

TOP_KEYS = ("seed", "pr_selection", "ranges", "tolerances", "reference", "bound", "require", "accept", "suite")
SUITE_KEYS = (
    "name", "description", "op", "dtypes", "directions", "layouts", "ranges",
    "config", "exclude", "tolerances", "reference", "bound", "require", "impl", "markers", "pr",
)
CONFIG_META_KEYS = ("name", "exclude", "tolerances", "reference", "bound", "require", "markers", "pr")
CONFIG_EXCLUDE_KEYS = AXES  # an exclude names suite axes; a suite's may also name configs
SUITE_EXCLUDE_KEYS = ("configs", *AXES)

# The keys, kinds and defaults of the [reference], [bound] and [require] tables live
# with their dataclasses: e2egen.runner.options (ReferenceOptions, BoundModel, Requirements).
# An [[accept]] entry's keys: device (required), impl, cells, require (required), reason (required).
ACCEPT_KEYS = ("device", "impl", "cells", "require", "reason")

# Names: suite and config names become parts of case ids and of file names.
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.+-]*"
MARKER_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"
