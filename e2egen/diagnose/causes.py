"""From evidence to causes: the decision rules of `e2egen explain`.

Notation (all on the case's own inputs and kernel output, explain.py):
  V            a reference: a runner variant (plain, ftz, accumulate = k,
               round_output, device) or an accumulator model (variants.py)
  E(V)         max_eps_diff of the output against V
  R(V)         bound_ratio against V under OBJECTIVE_BOUND (f32 accumulator,
               lambda 5, sqrt(K), 1 ulp): R <= 1 is "as accurate as f32
               accumulation allows"
  pass(V)      the case's own tolerances (check()) hold against V
  R16(plain)   bound_ratio under the same model with an accumulator in the
               output's format (f16 or bf16 outputs only)
  M(V)         the fraction of elements where out != round_T(V): 0 when V
               reproduces the kernel bit for bit (a count, so one extreme
               element cannot sway it)
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

1. kernel bug, confirmed: the kernel raised, or the exact-arithmetic probe
   (probe.py: inputs in {-1,0,1}, every partial sum an exact integer) has a
   wrong element. No rounding effect can do that.
2. overflow: the exact result exceeds the format's max (overflow > 0), or
   the kernel returned inf/NaN where the result is finite and the narrower
   range (inputs scaled so that every |result| < max/2) makes that go away
   (an intermediate overflow). Remedy: that range, or `overflow = N`.
3. flushed subnormals: ftz explains. Remedy: `reference.ftz = true`, or a
   range away from zero.
4. accumulation (truncation or order): some `accumulate = k` or accumulator
   model explains; or, weaker ("likely"), R(plain) > 1 >= R16(plain) and the
   probe passed: the error fits an f16/bf16 accumulator but no modelled
   chunking reproduces it. Remedy: `bound.acc` (narrow accumulators) or
   `reference.accumulate = k` (f32 chunks).
5. cancellation near zero: not pass(plain), R(plain) <= 1, every failing
   metric is relative (max_rel_diff, max_rel_diff_old, max_eps_diff,
   max_ulp_diff) and its worst element has Σ|a·b| / |ref| >= 10 (CONDITION).
   Evidence also shown: max_eps_diff over the well-conditioned elements and
   the r4 rerun. Remedy: bound_ratio (+ rms) or max_rel_diff_old, or r4.
6. within the error bound: not pass(plain), R(plain) <= 1 and not 5: the
   tolerance is tighter than f32 arithmetic allows. Remedy: bound_ratio.
7. likely a kernel bug: anomalous and none of 2-6 accounts for it
   ("no reference variant explains it"); also inf/NaN mismatches that no
   range change removes.
If nothing is anomalous and the probe passed: "nothing to explain".
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from e2egen import metrics
from e2egen.metrics.names import ALLOWANCE_NAMES

GAIN = 10.0
GAIN_WITH_PASS = 2.0
CONDITION = 10.0
EPS_FLOOR = 1 / 64
RELATIVE_METRICS = ("max_rel_diff", "max_rel_diff_old", "max_eps_diff", "max_ulp_diff")

KERNEL_BUG = "kernel bug"
OVERFLOW = "overflow"
FLUSHED = "flushed subnormals"
ACCUMULATION = "accumulation"
CANCELLATION = "cancellation near zero"
WITHIN_BOUND = "within the error bound"
LIKELY_BUG = "likely a kernel bug"
NOTHING = "nothing to explain"
CAUSES = (KERNEL_BUG, OVERFLOW, FLUSHED, ACCUMULATION, CANCELLATION, WITHIN_BOUND, LIKELY_BUG, NOTHING)


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


def diagnose(ex) -> list[Finding]:
    """The findings for an Explanation (explain.py), most certain first."""
    if ex.kernel_failure:
        return [Finding(KERNEL_BUG, "kernel bug: the kernel failed", evidence=[ex.kernel_failure],
                        remedy=["fix the kernel (it raised or broke the kernel contract)"])]
    findings: list[Finding] = []
    plain = ex.plain
    comparison = plain.comparison
    probe = ex.probe
    if probe is not None and probe.ran and probe.wrong:
        findings.append(Finding(KERNEL_BUG, "kernel bug: wrong results where the arithmetic is exact",
                                evidence=[probe.describe()],
                                remedy=["fix the kernel: indexing, dropped or doubled products, races "
                                        "(no tolerance, range or reference setting can make this pass honestly)"]))
    value_failures = [f for f in plain.verdict.failures if f.metric not in ALLOWANCE_NAMES]
    count_failures = [f for f in plain.verdict.failures if f.metric in ALLOWANCE_NAMES]
    values_anomalous = bool(value_failures) or plain.ratio > 1
    accounted_values = False
    accounted_counts = not count_failures

    overflow = _overflow(ex, comparison)
    if overflow is not None:
        findings.append(overflow)
        accounted_counts = True

    ftz = ex.row("ftz")
    if values_anomalous and explains(plain, ftz):
        findings.append(_flushed(ex, plain, ftz))
        accounted_values = True

    if values_anomalous:
        accumulation = _accumulation(ex, plain)
        if accumulation is not None:
            findings.append(accumulation)
            accounted_values = True

    if value_failures and plain.ratio <= 1:
        findings.append(_cancellation_or_bound(ex, plain, value_failures))
        accounted_values = True

    if (values_anomalous and not accounted_values) or not accounted_counts:
        if not any(f.cause == KERNEL_BUG for f in findings):
            findings.append(_likely_bug(ex, plain, value_failures, count_failures))

    if not findings:
        what = "passes" if plain.verdict.passed else "fails"
        findings.append(Finding(NOTHING, f"nothing to explain: the case {what} and its error is within what f32 accumulation "
                                         f"allows (bound_ratio {_fmt(plain.ratio)})",
                                evidence=[probe.describe()] if probe is not None else []))
    return findings


def _overflow(ex, comparison) -> Finding | None:
    fmt = metrics.get_format(ex.problem.out_dtype)
    narrow = next((r for r in ex.ranges if r.role == "narrow"), None)
    narrow_ok = narrow is not None and narrow.comparison is not None
    narrow_clean = narrow_ok and not (narrow.comparison.overflow or narrow.comparison.inf_mismatch or narrow.comparison.nan_mismatch)
    evidence, remedy = [], []
    if comparison.overflow:
        headline = f"overflow: {comparison.overflow} exact results exceed {ex.problem.out_dtype}'s max {fmt.max:g}"
        evidence.append(f"{comparison.overflow} of {comparison.n} elements overflow (largest |ref| {_fmt(ex.stats.get('max_abs_ref'))}); "
                        f"they are left out of every maximum and counted apart")
        confidence = "confirmed"
    elif (comparison.inf_mismatch or comparison.nan_mismatch) and narrow_clean:
        headline = (f"overflow of intermediate sums: inf/NaN where the exact result is finite "
                    f"({comparison.inf_mismatch} inf, {comparison.nan_mismatch} NaN), gone at a narrower range")
        confidence = "likely"
    else:
        return None
    if narrow_ok:
        c = narrow.comparison
        evidence.append(f"narrower range {narrow.label}: overflow {c.overflow}, inf mismatches {c.inf_mismatch}, "
                        f"NaN mismatches {c.nan_mismatch}; case tolerances: {_verdict_word(narrow.verdict)}")
        if narrow_clean:
            remedy.append(f"a range that avoids it: `[ranges] {ex.case.range} = [{narrow.lo:g}, {narrow.hi:g}]` "
                          f"(or a new range for this suite)")
    elif narrow is not None and narrow.note:
        evidence.append(f"narrower range {narrow.label}: {narrow.note}")
    if comparison.overflow:
        remedy.append(f"or accept it: `{_table_key(ex.case, 'tolerances')} overflow = {comparison.overflow}` "
                      f"(out = inf of the right sign is then allowed where the exact result overflows)")
    return Finding(OVERFLOW, headline, confidence, evidence, remedy)


def _flushed(ex, plain, ftz) -> Finding:
    stats = ex.stats
    evidence = [f"under ftz: {_change(plain, ftz)}",
                f"{stats['flushed_results']} of the {stats['subnormal_results']} results that are subnormal in "
                f"{ex.problem.out_dtype} came back as 0; {stats['subnormal_inputs']} inputs are subnormal"]
    away = next((r for r in ex.ranges if r.role == "away" and r.comparison is not None), None)
    if ex.case.reference.ftz:
        remedy = ["the case already sets `reference.ftz = true`: it accepts the flushed results"]
    else:
        remedy = [f"if flushing is acceptable for this kernel: `{_table_key(ex.case, 'reference')} ftz = true` "
                  f"(out = 0 is accepted where the exact result is subnormal)"]
    if away is not None:
        remedy.append(f"or test away from zero: range r4 [1, 5] (rerun there: {_verdict_word(away.verdict)}, "
                      f"max_eps_diff {_fmt(away.comparison.max_eps_diff)})")
    return Finding(FLUSHED, "flushed subnormals: the kernel flushes subnormal values to zero", "confirmed", evidence, remedy)


def _accumulation(ex, plain) -> Finding | None:
    case = ex.case
    candidates = [(row_gain(plain, r), r.label, r) for r in ex.rows if r.key.startswith("acc") and explains(plain, r)]
    search = ex.search
    model_text = None
    if search is not None and search.best is not None:
        model, eps, ratio, miss = search.best
        if search.full is not None:
            if explains(plain, search.full):
                candidates.append((row_gain(plain, search.full), search.full.label, search.full))
                model_text = model
        else:
            g = gain((search.plain_eps, search.plain_ratio, search.plain_miss), (eps, ratio, miss), search.sample)
            if g >= GAIN:
                candidates.append((g, f"model: {model.describe()}", None))
                model_text = model
    low_acc = plain.low_acc_ratio
    if candidates:
        candidates.sort(key=lambda c: -c[0])
        best_gain, label, row = candidates[0]
        evidence = []
        if row is not None:
            evidence.append(f"{label}: {_change(plain, row)}")
        else:
            model, eps, ratio, miss = search.best
            evidence.append(f"{label} (on {search.sample} sampled elements incl. the worst): max_eps_diff "
                            f"{_fmt(search.plain_eps)} -> {_fmt(eps)}, bound_ratio {_fmt(search.plain_ratio)} -> {_fmt(ratio)}, "
                            f"elements not reproduced {_pct(search.plain_miss)} -> {_pct(miss)} (x{_fmt(best_gain)} smaller)")
        for g, other, _ in candidates[1:3]:
            evidence.append(f"also: {other} (x{_fmt(g)} smaller)")
        remedy = []
        narrow_model = model_text is not None and label.startswith("model") and model_text.fmt != "f32"
        if narrow_model:
            headline = (f"accumulation: partial sums are kept in {model_text.fmt} "
                        f"({model_text.describe()} reproduces the output)")
            remedy.append(_declare_acc(case, model_text.fmt, low_acc))
            remedy.append("or fix the kernel to accumulate in f32")
        else:
            k = _chunk_of(label, model_text)
            headline = f"accumulation order / truncation: the output matches partial sums rounded to f32 every {k} products"
            remedy.append(f"model it in the reference: `{_table_key(case, 'reference')} accumulate = {k}`")
        return Finding(ACCUMULATION, headline, "confirmed", evidence, remedy)
    probe_ok = ex.probe is None or not ex.probe.ran or ex.probe.passed
    if low_acc is not None and plain.ratio > 1 >= low_acc and probe_ok:
        fmt = ex.problem.out_dtype
        evidence = [f"bound_ratio {_fmt(plain.ratio)} under an f32 accumulator, {_fmt(low_acc)} under an {fmt} accumulator",
                    "the exact-arithmetic probe passes: the error comes from rounding, not indexing"]
        if search is not None and search.best is not None:
            model, eps, ratio, miss = search.best
            evidence.append(f"closest of {search.tried} modelled chunkings: {model.describe()} "
                            f"(max_eps_diff {_fmt(search.plain_eps)} -> {_fmt(eps)} on {search.sample} sampled elements)")
        remedy = [_declare_acc(case, fmt, low_acc), "or fix the kernel to accumulate in f32"]
        return Finding(ACCUMULATION, f"accumulation: the error fits an {fmt} accumulator, not an f32 one", "likely",
                       evidence, remedy)
    return None


def _declare_acc(case, fmt: str, ratio: float | None) -> str:
    this_run = f" (this run: bound_ratio {_fmt(ratio)} under it)" if ratio is not None else ""
    if case.bound is not None and case.bound.acc == fmt and "bound_ratio" in case.tolerances:
        return f"the catalogue already declares `bound.acc = \"{fmt}\"` for this case and judges it by bound_ratio{this_run}"
    return f"declare the accumulator: `{_table_key(case, 'bound', direction=True)} acc = \"{fmt}\"` with bound_ratio <= 1{this_run}"


def _chunk_of(label: str, model) -> int:
    if model is not None:
        return model.chunk
    digits = "".join(ch if ch.isdigit() else " " for ch in label).split()
    return int(digits[0]) if digits else 0


def _cancellation_or_bound(ex, plain, value_failures) -> Finding:
    stats = ex.stats
    condition = stats.get("worst_condition", {})
    relative = all(f.metric in RELATIVE_METRICS for f in value_failures)
    worst_kappa = max((condition.get(f.metric, 0.0) for f in value_failures), default=0.0)
    case = ex.case
    c = plain.comparison
    away = next((r for r in ex.ranges if r.role == "away" and r.comparison is not None), None)
    if relative and worst_kappa >= CONDITION:
        evidence = [f"bound_ratio {_fmt(plain.ratio)} <= 1: the error is within what f32 accumulation allows",
                    f"failing: {', '.join(f.metric for f in value_failures)}; at the worst element Σ|a·b| / |ref| = "
                    f"{_fmt(worst_kappa)}: the result is a small difference of large terms",
                    f"max_eps_diff over the {stats.get('well_conditioned', 0)} well-conditioned elements "
                    f"(f32-accumulation error < ½ ulp): {_fmt(stats.get('eps_well_conditioned'))}"]
        if away is not None:
            evidence.append(f"at r4 [1, 5] (away from zero): max_eps_diff {_fmt(away.comparison.max_eps_diff)}, "
                            f"case tolerances {_verdict_word(away.verdict)}")
        remedy = [f"judge this case with a metric that is not relative to a near-zero result: "
                  f"`{_table_key(case, 'tolerances')} bound_ratio = 1.0, rms = ...` (this run: bound_ratio {_fmt(plain.ratio)}, "
                  f"rms {_fmt(c.rms)}) or max_rel_diff_old (this run: {_fmt(c.max_rel_diff_old)})",
                  "or test away from zero: range r4 [1, 5]"]
        return Finding(CANCELLATION, "cancellation near zero: relative metrics are large only where the result "
                                     "nearly cancels", "confirmed", evidence, remedy)
    evidence = [f"bound_ratio {_fmt(plain.ratio)} <= 1: as accurate as f32 accumulation allows",
                "failing: " + "; ".join(f"{f.metric} {_fmt(f.value)} > {f.tolerance:g}" for f in value_failures)]
    remedy = [f"the tolerance is tighter than the arithmetic allows: use `{_table_key(case, 'tolerances')} bound_ratio = 1.0` "
              f"or loosen " + ", ".join(f"{f.metric} to >= {_fmt(f.value)}" for f in value_failures)]
    return Finding(WITHIN_BOUND, "within the error bound: the tolerance is tighter than f32 arithmetic allows",
                   "confirmed", evidence, remedy)


def _likely_bug(ex, plain, value_failures, count_failures) -> Finding:
    evidence = []
    tried = [r.label for r in ex.rows if r.computed and r.key != "plain"]
    evidence.append(f"no reference variant explains it (tried: {', '.join(tried)}"
                    + (f", {ex.search.tried} accumulator models" if ex.search is not None else "") + ")")
    evidence.append(f"bound_ratio {_fmt(plain.ratio)} under an f32 accumulator"
                    + (f", {_fmt(plain.low_acc_ratio)} under an {ex.problem.out_dtype} accumulator" if plain.low_acc_ratio is not None else ""))
    for f in count_failures:
        evidence.append(f.reason)
    if ex.probe is not None:
        evidence.append(ex.probe.describe())
    confidence = "likely"
    return Finding(LIKELY_BUG, "no reference variant explains it: likely a kernel bug", confidence, evidence,
                   ["look at the worst elements below; rerun with `e2egen run` after a fix"])
