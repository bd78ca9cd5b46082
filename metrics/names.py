"""The names other parts of the project validate against: metrics, allowances,
tolerance keys, histogram buckets. One place, so the catalogue checker and the
verdict can never disagree about what a key means."""
from __future__ import annotations

import difflib
from collections.abc import Iterable

# Float metrics usable as tolerance keys (value must be <= tolerance).
METRIC_NAMES = (
    "max_abs_diff",
    "max_rel_diff",
    "max_rel_diff_old",
    "max_eps_diff",
    "max_ulp_diff",
    "rms",
    "rel_l2",
    "bound_ratio",
    "bound_rms",
    "bias_z",
    "rounding_rms",
)

# Metrics that need compare(..., bound=B); absent (None) without one.
BOUND_METRIC_NAMES = ("bound_ratio", "bound_rms")

# Tolerances the error model itself gives (README "Metrics"): every element within its bound; the rms of
# error/bound at a correct kernel's level (final rounding alone: <= 1/sqrt(12) = 0.29); a mean signed error
# within 6 standard deviations of zero. The shipped catalogue uses them; calibrate never proposes less.
MODEL_TOLERANCES = {"bound_ratio": 1.0, "bound_rms": 0.5, "bias_z": 6.0}
# compare(..., rounding=...): the rounding bias_z measures deviations from (runner.arithmetic's names);
# every other name (nearest-even, nearest-away, faithful) is measured against round-to-nearest-even.
ROUNDING_CODES = {"toward-zero": 1, "up": 2, "down": 3}

# Counts that fail a check whenever they are non-zero, unless a tolerance
# names them with the number of elements it allows.
ALLOWANCE_NAMES = ("nan_mismatch", "inf_mismatch", "overflow")

# Metrics of integer (exact) comparisons.
INTEGER_METRIC_NAMES = ("mismatches", "max_abs_diff")

TOLERANCE_KEYS = tuple(dict.fromkeys(METRIC_NAMES + ALLOWANCE_NAMES + INTEGER_METRIC_NAMES))

# Buckets of |ref - out| / |ref|, in the order of the seed's table.
# Each finite edge e opens the bucket "[e, next)"; "0" is exact, "ref == 0"
# collects the elements the relative difference is undefined for.
HISTOGRAM_EDGES = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0)
HISTOGRAM_BUCKETS = (
    "0",
    "(0,1e-6)",
    "[1e-6,1e-5)",
    "[1e-5,1e-4)",
    "[1e-4,1e-3)",
    "[1e-3,1e-2)",
    "[1e-2,0.1)",
    "[0.1,1)",
    ">=1",
    "ref == 0",
)


def unknown_name_error(what: str, name: object, choices: Iterable[str]) -> ValueError:
    """A ValueError naming the bad value, a near miss if there is one, and the valid choices."""
    choices = list(choices)
    message = f"unknown {what} {name!r}"
    if isinstance(name, str):
        close = difflib.get_close_matches(name, choices, n=1)
        if close:
            message += f" (did you mean {close[0]!r}?)"
    return ValueError(f"{message}; valid choices: {', '.join(choices)}")
