"""From evidence to causes: the decision rules of `e2egen explain`.

Notation (all on the case's own inputs and kernel output, explain.py):
  V            a reference: a runner variant (plain, ftz, accumulate = k,
               round_output, device), the reference from inputs rounded as
               the probes found the kernel rounds them, or an accumulator
               model (variants.py)
  E(V)         max_eps_diff of the output against V
  R(V)         bound_ratio against V under OBJECTIVE_BOUND (f32 accumulator,
               lambda 5, sqrt(K), 1 ulp): R <= 1 is "as accurate as f32
               accumulation allows"
  Rm(plain)    bound_ratio under the same model following the measured
               arithmetic (runner/arithmetic: input rounding, accumulator
               width and grouping), as the case's bound does
  pass(V)      the case's own tolerances (check()) hold against V
  R16(plain)   bound_ratio under the same model with an accumulator in the
               output's format (f16 or bf16 outputs only)
  M(V)         the fraction of elements where out != round_T(V): 0 when V
               reproduces the kernel bit for bit (a count, so one extreme
               element cannot sway it); 1 - M(V) is what V "reproduces"
  gain(V)      the largest of E(plain)/E(V) (counted when E(plain) > 1),
               R(plain)/R(V) (when R(plain) > 1), both floored at 1/64, and
               M(plain)/M(V) (when M(plain) >= 1%; floored at one element)
  V explains   gain(V) >= 10 (GAIN), or pass(V) and not pass(plain) and
               gain(V) >= 2 (GAIN_WITH_PASS). For models ranked on a sample
               of elements, gain is taken on that sample unless the best
               model could be computed over every element.
  anomalous    not pass(plain), or R(plain) > 1: there is an error to explain
               even when the case's own (looser) tolerances pass.

Findings, each tested on its own, reported in this order:

1. kernel bug, confirmed: the kernel raised, the exact-arithmetic probe
   (probe.py: inputs in {-1,0,1}, every partial sum an exact integer) has a
   wrong element, or the arithmetic probes have `unexplained` outcomes
   (crafted sums that came back with a value no rounding explains). No
   rounding effect can do that.
2. input rounding: the arithmetic probes found the products see inputs
   rounded to a format narrower than the case's dtype (bf16 or tf32 for
   f32, bf16 for f16). Confirmed by the probes; the reference from the
   rounded inputs shows how much of the error it accounts for. It accounts
   for the error when that reference explains it or Rm(plain) <= 1, and
   then 8 is not reported. Remedy: the kernel's precision setting, or
   `[[accept]]` / `require.inputs` when it is intended; never `bound.acc`.
3. overflow: the exact result exceeds the format's max (overflow > 0), or
   the kernel returned inf/NaN where the result is finite and the narrower
   range (inputs scaled so that every |result| < max/2) makes that go away
   (an intermediate overflow). Remedy: that range, or `overflow = N`.
4. flushed subnormals: ftz explains. Remedy: `reference.ftz = true`, or a
   range away from zero; nothing when the probes found the kernel flushes
   (the run then already uses a flushing reference).
5. accumulation (truncation or order). When the probes measured an
   accumulation other than one flat f32 accumulator, it names that ("the
   probes measured: one partial per kernel tap in f32, partials added in
   f16"), when some variant or model explains or Rm(plain) <= 1; nothing is
   to be declared (the bound already follows the measurement). Otherwise
   some `accumulate = k` or accumulator model that explains AND reproduces
   the output, M(V) <= 10% (REPRODUCE_MAX_MISS); remedy `bound.acc` (narrow
   accumulators) or `reference.accumulate = k` (f32 chunks). A model that
   explains by its gain but reproduces less is never recommended: the
   finding says no modelled accumulation reproduces the output, and every
   model shown carries the fraction of elements it reproduces. Weaker
   ("likely"), only where the arithmetic was not measured: R(plain) > 1 >=
   R16(plain) and the probe passed: the error fits an f16/bf16 accumulator;
   remedy: measure the arithmetic, or fix the kernel.
6. cancellation near zero: not pass(plain), R(plain) <= 1, every failing
   metric is relative (max_rel_diff, max_rel_diff_old, max_eps_diff,
   max_ulp_diff) and its worst element has Σ|a·b| / |ref| >= 10 (CONDITION).
   Evidence also shown: max_eps_diff over the well-conditioned elements and
   the r4 rerun. Remedy: bound_ratio (+ rms) or max_rel_diff_old, or r4.
7. within the error bound: not pass(plain), R(plain) <= 1 and not 6: the
   tolerance is tighter than f32 arithmetic allows. Remedy: bound_ratio.
   Wherever 6 or 7 suggests an rms tolerance, the kernel reruns at
   MARGIN_SEEDS more seeds (explain.margin_seeds) and the suggestion is the
   largest rms over all of them times RMS_MARGIN (2), the values stated.
8. likely a kernel bug: anomalous and none of 2-7 accounts for it
   ("no reference variant explains it"); also inf/NaN mismatches that no
   range change removes.
If nothing is anomalous and the probes passed: "nothing to explain".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from e2egen import metrics
from e2egen.metrics.names import ALLOWANCE_NAMES
from e2egen.runner.options import MEASURED

GAIN = 10.0
GAIN_WITH_PASS = 2.0
CONDITION = 10.0
EPS_FLOOR = 1 / 64
REPRODUCE_MAX_MISS = 0.10  # a model is recommended only when it reproduces >= 90% of the elements bit for bit
RELATIVE_METRICS = ("max_rel_diff", "max_rel_diff_old", "max_eps_diff", "max_ulp_diff")
F32_BITS = 24

KERNEL_BUG = "kernel bug"
INPUT_ROUNDING = "input rounding"
OVERFLOW = "overflow"
FLUSHED = "flushed subnormals"
ACCUMULATION = "accumulation"
CANCELLATION = "cancellation near zero"
WITHIN_BOUND = "within the error bound"
LIKELY_BUG = "likely a kernel bug"
NOTHING = "nothing to explain"
CAUSES = (KERNEL_BUG, INPUT_ROUNDING, OVERFLOW, FLUSHED, ACCUMULATION, CANCELLATION, WITHIN_BOUND, LIKELY_BUG, NOTHING)


@dataclass
class Finding:
    cause: str  # one of CAUSES
    headline: str
    confidence: str = "confirmed"  # confirmed | likely
    evidence: list[str] = field(default_factory=list)
    remedy: list[str] = field(default_factory=list)


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return str(x)
    return f"{x:.4g}"


MISS_MIN = 0.01


def gain(plain: tuple[float, float | None, float | None], other: tuple[float, float | None, float | None],
         elements: int) -> float:
    """(eps, ratio, miss) of plain and of a variant -> how many times smaller the variant's error is."""
    (plain_eps, plain_ratio, plain_miss), (eps, ratio, miss) = plain, other
    gains = [1.0]
    if plain_eps > 1:
        gains.append(plain_eps / max(eps, EPS_FLOOR))
    if plain_ratio is not None and ratio is not None and plain_ratio > 1:
        gains.append(plain_ratio / max(ratio, EPS_FLOOR))
    if plain_miss is not None and miss is not None and plain_miss >= MISS_MIN:
        gains.append(plain_miss / max(miss, 1 / max(elements, 1)))
    return max(gains)


def row_gain(plain, row) -> float:
    return gain((plain.eps, plain.ratio, plain.miss), (row.eps, row.ratio, row.miss), plain.comparison.n)


def explains(plain, row) -> bool:
    if row is None or not row.computed:
        return False
    g = row_gain(plain, row)
    return g >= GAIN or (row.verdict.passed and not plain.verdict.passed and g >= GAIN_WITH_PASS)


def _verdict_word(verdict) -> str:
    return "PASS" if verdict.passed else "FAIL"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.3g}%"


def _change(plain, row) -> str:
    return (f"max_eps_diff {_fmt(plain.eps)} -> {_fmt(row.eps)}, bound_ratio {_fmt(plain.ratio)} -> {_fmt(row.ratio)}, "
            f"elements not reproduced {_pct(plain.miss)} -> {_pct(row.miss)} (x{_fmt(row_gain(plain, row))} smaller); "
            f"case tolerances: {_verdict_word(row.verdict)}")


def _table_key(case, table: str, direction: bool = False) -> str:
    return f"[{table}.{case.dtype}.{case.direction}]" if direction else f"[{table}.{case.dtype}]"


