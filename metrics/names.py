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

# Tolerances the error model itself gives (docs/reference/metrics.md): every element within its bound; the rms of
# error/bound at a correct kernel's level (final rounding alone: <= 1/sqrt(12) = 0.29); a mean signed error
# within 6 standard deviations of zero. The shipped catalogue uses them; calibrate never proposes less.
MODEL_TOLERANCES = {"bound_ratio": 1.0, "bound_rms": 0.5, "bias_z": 6.0}
# bound_rms is an average: over a few elements it is no aggregate, and its 0.5 would only halve bound_ratio's 1 for
# them (a mean over one or two outputs failed correct kernels well within their bounds). Below this many compared
# elements it is reported, not judged; bound_ratio still holds every element.
BOUND_RMS_MIN_ELEMENTS = 16
# bias_z tells a lean from noise; this says which leans count. Correct kernels lean by a fraction of an ulp: exp2
# constants off by 1e-8 move every result -0.17 ulp; a shared row sum tilts a whole row; OpenVINO's correct f16
# attention leans 0.004 ulp over 262K outputs (z 7.4). The bugs bias_z is there for lean 0.5 ulp or more
# (adding half an ulp, truncating where nearest was measured, scaling by an ulp). A lean below this many ulps
# is reported, not judged.
BIAS_MIN_ULPS = 0.25
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


# What each metric and count means, in one line a report shows beside the name (HTML title, glossary, Markdown).
# The definitions in full: docs/reference/metrics.md. Every name the reports show has an entry.
METRIC_DESCRIPTIONS = {
    "max_abs_diff": "largest |ref − out| over the elements: the absolute error, in the output's own units",
    "max_rel_diff": "largest |ref − out| / |ref| over the elements with ref ≠ 0; large wherever ref is close to 0",
    "max_rel_diff_old": "max_rel_diff over the elements with |ref| > 1e-3 only (the seed's definition)",
    "max_eps_diff": "largest |ref − out| in units of the output format's spacing (ulp) at ref: 1 is one step of the "
                    "format",
    "max_ulp_diff": "largest number of output-format values between the correctly rounded ref and out: 0 is exact, "
                    "1 a neighbour",
    "rms": "root-mean-square of ref − out over the largest |ref| or |out| (seed 003): the typical error against the "
           "data's scale",
    "rel_l2": "‖ref − out‖₂ / ‖ref‖₂: the error's size against the result's size",
    "bound_ratio": "largest |ref − out| / B, B each element's error bound under the kernel's measured arithmetic: "
                   "≤ 1 means every element lies within its bound",
    "bound_rms": "rms of |ref − out| / B over the elements: a correctly rounded result gives about 0.29",
    "bias_z": "how many standard errors the mean signed error (in ulps) lies from what the kernel's rounding gives: "
              "large means the errors lean one way (a systematic error)",
    "rounding_rms": "rms distance, in ulps, of out from the correctly rounded result",
    "nan_mismatch": "elements where out is NaN and ref a number, or out a number and ref NaN",
    "inf_mismatch": "elements where out is ±inf and the rounded ref finite, or infinite with the wrong sign",
    "overflow": "elements whose exact result exceeds the output format's largest finite value",
    "mismatches": "integer outputs: elements that differ from the exact result",
    "ftz_allowed": "elements where out = 0 was accepted for a subnormal result, the case allowing flush-to-zero (ftz)",
}

# Values of a metric so large that they say something other than "a larger error", and what they say.
# Ulp counts run through every representable value between ref and out, zero included: out of the opposite sign
# to ref spans most of the format (about 2.1e9 values between -1 and 1 in f32, 3e4 in f16). NaN and inf never
# reach these maxima (compare counts them as nan_mismatch / inf_mismatch).
HUGE_VALUE_NOTES = {
    "max_ulp_diff": (1e6, "a count this large is no rounding error: out and ref lie far apart in the format, "
                          "usually on opposite sides of zero (a sign flip spans about 2.1e9 f32 values between -1 "
                          "and 1) or out is 0 or huge against an ordinary ref; NaN and inf are counted apart, "
                          "as nan_mismatch and inf_mismatch"),
    "max_eps_diff": (1e6, "an error of this many ulps of ref is no rounding error: out is far from ref, usually of "
                          "the opposite sign or 0 against a large ref"),
}
