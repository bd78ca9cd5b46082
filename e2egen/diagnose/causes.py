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


def _reproduces(miss: float | None) -> str:
    return "-" if miss is None else f"{100 * (1 - miss):.4g}%"


def reproduces_output(miss: float | None) -> bool:
    """A model may be recommended: it reproduces the kernel's output on a large majority of elements."""
    return miss is not None and miss <= REPRODUCE_MAX_MISS


def _value_failures(plain) -> list:
    return [f for f in plain.verdict.failures if f.metric not in ALLOWANCE_NAMES]


def wants_rms_margin(ex) -> bool:
    """Whether a finding may suggest an rms tolerance (6 or 7): explain then reruns at more seeds first."""
    plain = ex.plain
    return plain is not None and plain.computed and bool(_value_failures(plain)) and plain.ratio <= 1


def diagnose(ex) -> list[Finding]:
    """The findings for an Explanation (explain.py), most certain first."""
    if ex.kernel_failure:
        return [Finding(KERNEL_BUG, "kernel bug: the kernel failed", evidence=[ex.kernel_failure],
                        remedy=["fix the kernel (it raised or broke the kernel contract)"])]
    findings: list[Finding] = []
    plain = ex.plain
    comparison = plain.comparison
    bug = _confirmed_bug(ex)
    if bug is not None:
        findings.append(bug)
    value_failures = _value_failures(plain)
    count_failures = [f for f in plain.verdict.failures if f.metric in ALLOWANCE_NAMES]
    values_anomalous = bool(value_failures) or plain.ratio > 1
    accounted_values = False
    accounted_counts = not count_failures

    rounding = _input_rounding(ex, plain)
    if rounding is not None:
        findings.append(rounding)
        inputs_row = ex.row("inputs")
        if explains(plain, inputs_row) or (plain.measured_ratio is not None and plain.measured_ratio <= 1):
            accounted_values = True

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
        evidence = [ex.probe.describe()] if ex.probe is not None else []
        if ex.arithmetic is not None:
            evidence.append(f"the probes measured: {ex.arithmetic.arithmetic.describe()} ({ex.arithmetic.origin})")
        findings.append(Finding(NOTHING, f"nothing to explain: the case {what} and its error is within what f32 accumulation "
                                         f"allows (bound_ratio {_fmt(plain.ratio)})", evidence=evidence))
    return findings


def _confirmed_bug(ex) -> Finding | None:
    probe = ex.probe
    probe_wrong = probe is not None and probe.ran and probe.wrong
    unexplained = tuple(ex.arithmetic.arithmetic.unexplained) if ex.arithmetic is not None else ()
    if not probe_wrong and not unexplained:
        return None
    evidence = [probe.describe()] if probe_wrong else []
    evidence += [f"the arithmetic probes' crafted inputs came back with values no rounding explains: {text}"
                 for text in unexplained[:3]]
    if probe_wrong:
        headline = "kernel bug: wrong results where the arithmetic is exact"
    else:
        headline = "kernel bug: the arithmetic probes got results that no rounding explains"
    return Finding(KERNEL_BUG, headline, evidence=evidence,
                   remedy=["fix the kernel: indexing, dropped or doubled products, races "
                           "(no tolerance, range or reference setting can make this pass honestly)"])


def _input_rounding(ex, plain) -> Finding | None:
    from e2egen.diagnose.explain import input_rounding_format

    measured = ex.measured
    fmt = input_rounding_format(measured, ex.problem.dtype)
    if fmt is None:
        return None
    case, origin = ex.case, ex.arithmetic.origin
    dtype = ex.problem.dtype
    evidence = [f"the probes measured: {measured.describe_inputs()} ({origin})"]
    row = ex.row("inputs")
    if row is not None and row.computed:
        evidence.append(f"reference from the inputs rounded to {fmt}: {_change(plain, row)}; it reproduces "
                        f"{_reproduces(row.miss)} of elements (plain: {_reproduces(plain.miss)})")
    if plain.measured_ratio is not None:
        evidence.append(f"bound_ratio {_fmt(plain.ratio)} for exact inputs and an f32 accumulator, "
                        f"{_fmt(plain.measured_ratio)} under the measured arithmetic")
    models = _models_line(ex)
    if models:
        evidence.append(models)
    broken = [v for v in ex.violations if v.key == "inputs"]
    excused = [(v, entry) for v, entry in ex.accepted if v.key == "inputs"]
    evidence += [f"requirement broken (the case fails on it): {v.message}" for v in broken]
    evidence += [f"accepted deviation: {v.message} — {entry.reason}" for v, entry in excused]
    cell, device, impl = ex.arithmetic.cell, ex.arithmetic.device.device, ex.arithmetic.device.impl
    cells = f"{cell.op}/{cell.direction}/{cell.dtype}/*"
    remedy = [f"fix the kernel's precision setting: it rounds its {dtype} inputs to {fmt} before multiplying "
              f"(a library's default \"performance\" / reduced-precision mode, an allow_{fmt}-style flag)"]
    if excused:
        remedy.append("the catalogue already accepts it ([[accept]]): nothing to change if it is intended")
    else:
        remedy.append(f"if {fmt} inputs are intended on this device: `[[accept]] device = \"{device}\"`, "
                      f"`impl = \"{impl}\"`, `cells = \"{cells}\"`, "
                      f"`require = [\"inputs\"]`, `reason = \"...\"`; or for these cases "
                      f"`{_table_key(case, 'require')} inputs = \"{fmt}\"` (docs/concepts/requirements.md)")
    return Finding(INPUT_ROUNDING, f"input rounding: products see {fmt}-rounded inputs: the kernel computes in "
                                   f"{fmt} precision, not {dtype}", "confirmed", evidence, remedy)


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
    measured = ex.measured
    away = next((r for r in ex.ranges if r.role == "away" and r.comparison is not None), None)
    if measured is not None and measured.flushes:
        evidence.append(f"the probes measured: subnormals: inputs {measured.subnormal_inputs}, outputs "
                        f"{measured.subnormal_outputs} ({ex.arithmetic.origin})")
        remedy = ["nothing to declare: the probes found the kernel flushes, so `e2egen run` already judges it against "
                  "a flushing reference (out = 0 accepted where the exact result is subnormal)",
                  f"if subnormals must be kept: `{_table_key(ex.case, 'require')} subnormals = \"kept\"` "
                  f"(the case then fails on this kernel)"]
    elif ex.case.reference.ftz:
        remedy = ["the case already sets `reference.ftz = true`: it accepts the flushed results"]
    else:
        remedy = [f"if flushing is acceptable for this kernel: `{_table_key(ex.case, 'reference')} ftz = true` "
                  f"(out = 0 is accepted where the exact result is subnormal)"]
    if away is not None:
        remedy.append(f"or test away from zero: range r4 [1, 5] (rerun there: {_verdict_word(away.verdict)}, "
                      f"max_eps_diff {_fmt(away.comparison.max_eps_diff)})")
    return Finding(FLUSHED, "flushed subnormals: the kernel flushes subnormal values to zero", "confirmed", evidence, remedy)


# -- accumulation ---------------------------------------------------------------------------
@dataclass
class _Candidate:
    gain: float
    label: str
    row: object  # a Row over every element, or None (the search's sample)
    miss: float | None  # fraction of elements not reproduced
    model: object = None  # AccumulatorModel (searched), None for accumulate = k rows
    where: str = ""  # "of all N elements" | "of N sampled elements (the worst included)"


def _candidates(ex, plain) -> list[_Candidate]:
    """Variants (accumulate = k) and the search's best model that explain the error, best gain first."""
    elements = plain.comparison.n
    found = [_Candidate(row_gain(plain, r), r.label, r, r.miss, None, f"of all {elements} elements")
             for r in ex.rows if r.key.startswith("acc") and explains(plain, r)]
    search = ex.search
    if search is not None and search.best is not None:
        model, eps, ratio, miss = search.best
        if search.full is not None:
            if explains(plain, search.full):
                found.append(_Candidate(row_gain(plain, search.full), search.full.label, search.full, search.full.miss,
                                        model, f"of all {elements} elements"))
        else:
            g = gain((search.plain_eps, search.plain_ratio, search.plain_miss), (eps, ratio, miss), search.sample)
            if g >= GAIN:
                found.append(_Candidate(g, f"model: {model.describe()}", None, miss, model,
                                        f"of {search.sample} sampled elements (the worst included)"))
    found.sort(key=lambda c: -c.gain)
    return found


def _best_model(ex):
    """(model, miss, where) of the search's best model, over every element when it was computed so."""
    search = ex.search
    if search is None or search.best is None:
        return None
    model, _, _, miss = search.best
    if search.full is not None:
        return model, search.full.miss, f"of all {search.elements} elements"
    return model, miss, f"of {search.sample} sampled elements (the worst included)"


def _models_line(ex) -> str:
    """What the accumulator models reproduce, in one line ("" when none was searched)."""
    best = _best_model(ex)
    if best is None:
        return ""
    model, miss, where = best
    if reproduces_output(miss):
        return f"closest accumulator model ({ex.search.tried} tried): {model.describe()}, reproduces {_reproduces(miss)} {where}"
    return (f"no modelled accumulation reproduces the output: the closest of {ex.search.tried}, {model.describe()}, "
            f"reproduces {_reproduces(miss)} {where} (a model is named as the cause only when it reproduces "
            f">= {_reproduces(REPRODUCE_MAX_MISS)})")


def _candidate_evidence(plain, c: _Candidate, search) -> str:
    if c.row is not None:
        return f"{c.label}: {_change(plain, c.row)}; reproduces {_reproduces(c.miss)} {c.where}"
    _, eps, ratio, miss = search.best
    return (f"{c.label} (on {search.sample} sampled elements incl. the worst): max_eps_diff {_fmt(search.plain_eps)} -> "
            f"{_fmt(eps)}, bound_ratio {_fmt(search.plain_ratio)} -> {_fmt(ratio)}, elements not reproduced "
            f"{_pct(search.plain_miss)} -> {_pct(miss)} (x{_fmt(c.gain)} smaller); reproduces {_reproduces(miss)} {c.where}")


def measures_accumulation(arithmetic) -> bool:
    """The probes found an accumulation other than one flat f32 accumulator (narrower, or cut into partials)."""
    return arithmetic is not None and (arithmetic.groups != "none" or arithmetic.acc_bits < F32_BITS)


def _accumulation(ex, plain) -> Finding | None:
    measured = ex.measured
    candidates = _candidates(ex, plain)
    if measures_accumulation(measured):
        return _measured_accumulation(ex, plain, measured, candidates)
    case = ex.case
    search = ex.search
    reproducing = [c for c in candidates if reproduces_output(c.miss)]
    if reproducing:
        best = reproducing[0]
        evidence = [_candidate_evidence(plain, best, search)]
        evidence += [f"also: {c.label} (x{_fmt(c.gain)} smaller; reproduces {_reproduces(c.miss)} {c.where})"
                     for c in candidates if c is not best][:2]
        model = best.model
        remedy = []
        if model is not None and model.fmt != "f32":
            headline = (f"accumulation: partial sums are kept in {model.fmt} ({model.describe()} reproduces "
                        f"{_reproduces(best.miss)} of the output)")
            remedy.append(_declare_acc(case, model.fmt, plain.low_acc_ratio))
            remedy.append("or fix the kernel to accumulate in f32")
        else:
            k = _chunk_of(best.label, model)
            headline = (f"accumulation order / truncation: the output matches partial sums rounded to f32 every {k} "
                        f"products (reproduces {_reproduces(best.miss)} of it)")
            remedy.append(f"model it in the reference: `{_table_key(case, 'reference')} accumulate = {k}`")
        return Finding(ACCUMULATION, headline, "confirmed", evidence, remedy)
    low_acc = plain.low_acc_ratio
    probe_ok = ex.probe is None or not ex.probe.ran or ex.probe.passed
    unmeasured = ex.arithmetic is None or not ex.arithmetic.measured
    if unmeasured and low_acc is not None and plain.ratio > 1 >= low_acc and probe_ok:
        fmt = ex.problem.out_dtype
        evidence = [f"bound_ratio {_fmt(plain.ratio)} under an f32 accumulator, {_fmt(low_acc)} under an {fmt} accumulator",
                    "the exact-arithmetic probe passes: the error comes from rounding, not indexing"]
        line = _models_line(ex)
        if line:
            evidence.append(line)
        why = (f"the arithmetic was not measured ({ex.arithmetic.origin})" if ex.arithmetic is not None
               else "the arithmetic was not measured")
        remedy = [f"measure the kernel's accumulator ({why}): `e2egen arithmetic` probes it, and the bound then "
                  f"follows what it finds; no `bound.acc` is suggested because no modelled accumulation reproduces the output",
                  "or fix the kernel to accumulate in f32"]
        return Finding(ACCUMULATION, f"accumulation: the error fits an {fmt} accumulator, not an f32 one", "likely",
                       evidence, remedy)
    return None


def _measured_accumulation(ex, plain, measured, candidates) -> Finding | None:
    """The probes measured the accumulation: name it; the bound already follows it, nothing to declare."""
    ratio = plain.measured_ratio
    fits = ratio is not None and ratio <= 1
    if not fits and not candidates:
        return None
    case = ex.case
    words = measured.describe_accumulation()
    evidence = [f"the probes measured: {words} ({ex.arithmetic.origin})"]
    if ratio is not None:
        evidence.append(f"bound_ratio {_fmt(plain.ratio)} under one f32 accumulator, {_fmt(ratio)} under the measured "
                        f"arithmetic")
    if candidates:
        evidence.append(_candidate_evidence(plain, candidates[0], ex.search))
    line = _models_line(ex)
    if line and not (candidates and candidates[0].model is not None):
        evidence.append(line)
    remedy = []
    declared = case.bound is not None and case.bound.acc != MEASURED
    if declared:
        remedy.append(f"the catalogue's `bound.acc = \"{case.bound.acc}\"` replaces the measured arithmetic: remove it "
                      f"so the bound follows the measurement (this run: bound_ratio {_fmt(ratio)} under it)")
    elif "bound_ratio" in case.tolerances:
        remedy.append(f"nothing to declare: the case's bound already follows the measured arithmetic "
                      f"(this run: bound_ratio {_fmt(ratio)} under it)")
    else:
        remedy.append(f"judge the case by bound_ratio, which follows the measured arithmetic: "
                      f"`{_table_key(case, 'tolerances')} bound_ratio = 1.0` (this run: {_fmt(ratio)})")
    narrow = measured.acc_bits < F32_BITS or (measured.inner_bits and measured.inner_bits < F32_BITS)
    broken = [v for v in ex.violations if v.key == "acc"]
    excused = [entry for v, entry in ex.accepted if v.key == "acc"]
    if broken:
        remedy.append(f"the case fails on its requirement ({broken[0].message}): fix the kernel to accumulate in f32, "
                      f"or accept it for this device and kernel once: `[[accept]]` with `require = [\"acc\"]` and its reason")
    elif excused:
        remedy.append(f"the policy requires wider partial sums and accepts this kernel's ({excused[0].describe()})")
    elif narrow:
        remedy.append(f"if partial sums must stay in f32: `{_table_key(case, 'require')} acc = \"f32\"` (the case then "
                      f"fails on this kernel), or fix the kernel to accumulate in f32")
    confidence = "confirmed" if fits else "likely"
    return Finding(ACCUMULATION, f"accumulation: the probes measured {words}", confidence, evidence, remedy)


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


# -- tolerances -------------------------------------------------------------------------------
def _rms_suggestion(ex, this_run: float) -> tuple[str, str]:
    """(the rms value to suggest, where it comes from)."""
    margin = ex.rms_margin
    if margin is None:
        return "...", f"rms this run: {_fmt(this_run)}; leave a margin across seeds"
    return f"{margin.suggested:.2g}", margin.describe()


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
        rms, source = _rms_suggestion(ex, c.rms)
        remedy = [f"judge this case with a metric that is not relative to a near-zero result: "
                  f"`{_table_key(case, 'tolerances')} bound_ratio = 1.0, rms = {rms}` (this run: bound_ratio "
                  f"{_fmt(plain.ratio)}; {source}) or max_rel_diff_old (this run: {_fmt(c.max_rel_diff_old)})",
                  "or test away from zero: range r4 [1, 5]"]
        return Finding(CANCELLATION, "cancellation near zero: relative metrics are large only where the result "
                                     "nearly cancels", "confirmed", evidence, remedy)
    evidence = [f"bound_ratio {_fmt(plain.ratio)} <= 1: as accurate as f32 accumulation allows",
                "failing: " + "; ".join(f"{f.metric} {_fmt(f.value)} > {f.tolerance:g}" for f in value_failures)]
    loosen = []
    for f in value_failures:
        if f.metric == "rms" and ex.rms_margin is not None:
            rms, source = _rms_suggestion(ex, f.value)
            loosen.append(f"rms to {rms} ({source})")
        else:
            loosen.append(f"{f.metric} to >= {_fmt(f.value)}")
    remedy = [f"the tolerance is tighter than the arithmetic allows: use `{_table_key(case, 'tolerances')} bound_ratio = 1.0` "
              f"or loosen " + ", ".join(loosen)]
    return Finding(WITHIN_BOUND, "within the error bound: the tolerance is tighter than f32 arithmetic allows",
                   "confirmed", evidence, remedy)


def _likely_bug(ex, plain, value_failures, count_failures) -> Finding:
    evidence = []
    tried = [r.label for r in ex.rows if r.computed and r.key != "plain"]
    evidence.append(f"no reference variant explains it (tried: {', '.join(tried)}"
                    + (f", {ex.search.tried} accumulator models" if ex.search is not None else "") + ")")
    line = _models_line(ex)
    if line:
        evidence.append(line)
    evidence.append(f"bound_ratio {_fmt(plain.ratio)} under an f32 accumulator"
                    + (f", {_fmt(plain.low_acc_ratio)} under an {ex.problem.out_dtype} accumulator" if plain.low_acc_ratio is not None else "")
                    + (f", {_fmt(plain.measured_ratio)} under the measured arithmetic" if plain.measured_ratio is not None else ""))
    for f in count_failures:
        evidence.append(f.reason)
    if ex.arithmetic is not None:
        evidence.append(f"the probes measured: {ex.arithmetic.arithmetic.describe()} ({ex.arithmetic.origin})")
    if ex.probe is not None:
        evidence.append(ex.probe.describe())
    confidence = "likely"
    return Finding(LIKELY_BUG, "no reference variant explains it: likely a kernel bug", confidence, evidence,
                   ["look at the worst elements below; rerun with `e2egen run` after a fix"])
