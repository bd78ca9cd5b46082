"""The verdict every case gets unless its catalogue says otherwise: e2egen's default policy.

Tolerances: the model's verdict, the same for every dtype (docs/concepts/default-verdict.md):
- bound_ratio 1: every element within its error bound (1 = as accurate as the measured arithmetic allows);
- bound_rms 0.5: the rms of error/bound stays at a correct kernel's level (its final rounding alone gives at
  most 1/sqrt(12) = 0.29), far below a kernel whose elements sit near their bound;
- bias_z 6: the mean signed error in ulps is zero within 6 standard deviations (a systematic bug that stays
  under every element's bound still errs to one side).
Requirements: the defaults of runner.options.Requirements (partial sums at least f32, inputs never rounded
below the case's dtype, element-wise math at least in f32); integer outputs are compared exactly.

A catalogue may loosen either (a tolerance raised or set to false, a requirement relaxed, an [[accept]]
entry); `loosened` names what a case runs under that is looser than this, and reports say it.
"""
from __future__ import annotations

import math
from typing import Any, Collection, Mapping

from e2egen.metrics.names import MODEL_TOLERANCES
from e2egen.runner.arithmetic.model import FORMAT_BITS
from e2egen.runner.options import ANY, EXACT, Requirements

DEFAULT_TOLERANCES: Mapping[str, float] = MODEL_TOLERANCES  # the error model's own verdict (metrics.names)
DEFAULT_REQUIREMENTS = Requirements()
# An integer output (i8's gemm and conv write i32) is exact or wrong: no rounding for the model's metrics to bound.
INTEGER_TOLERANCES: Mapping[str, float] = {"max_abs_diff": 0}

def _asks(value: str) -> float:
    """How much a requirement's value asks: the significand bits of its format; "exact" (not below the dtype),
    "nearest" and "kept" all there is; "any" nothing."""
    if value == ANY:
        return 0.0
    return float(FORMAT_BITS[value]) if value in FORMAT_BITS else math.inf


def loosened(tolerances: Mapping[str, Any], require: Requirements, dropped: Collection[str] = ()) -> list[str]:
    """What a case's policy loosens against the defaults, in words ("require.acc = \"any\" (default f32)").

    tolerances: the case's; dropped: default metrics the op itself leaves out (not a loosening)."""
    found = []
    for metric, default in DEFAULT_TOLERANCES.items():
        if metric in dropped:
            continue
        value = tolerances.get(metric)
        if value is None or value is False:
            found.append(f"tolerances.{metric} off (default {default:g})")
        elif value > default:
            found.append(f"tolerances.{metric} = {value:g} (default {default:g})")
    default_require = DEFAULT_REQUIREMENTS.to_catalogue()
    for key, value in require.to_catalogue().items():
        if _asks(value) < _asks(default_require[key]):
            found.append(f"require.{key} = \"{value}\" (default {default_require[key]})")
    return found
