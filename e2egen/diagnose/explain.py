"""`e2egen explain CASE_ID`: rerun one case and say why its error is what it is.

The kernel runs once per input range (the case's, r4 [1, 5] away from zero, a
narrower one) and once on the exact-arithmetic probe (probe.py); every
reference variant (variants.py) reuses the case-range run's inputs and
output. The kernel's arithmetic comes from the probes (runner/arithmetic:
a profile, or probed now and cached), as `e2egen run` takes it: the case's
verdict, its bound and its reference follow it (a flushing kernel gets a
flushing reference), and its requirements (`require`, `[[accept]]`) are
judged against it. When the probes found input rounding, one more
reference is computed from the inputs rounded as the kernel rounds them.
When an rms tolerance may be suggested, the kernel reruns at a few more
seeds (margin_seeds) so the suggestion keeps a margin (RMS_MARGIN).
Each comparison is judged twice:

* with the case's own tolerances (`case.tolerances` through `check()`, its
  bound model for bound_ratio, following the measured arithmetic):
  "passes under V";
* with fixed objective numbers, the same for every case: max_eps_diff and
  bound_ratio under OBJECTIVE_BOUND (f32 accumulator, lambda 5, sqrt(K),
  1 output ulp: "as accurate as f32 accumulation allows").

causes.py turns this evidence into findings; its docstring lists the rules.
Nothing here prints: render() in report.py does.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Literal

import torch

from e2egen import metrics
from e2egen import runner
from e2egen.generator.cases import Case, derive_seed
from e2egen.generator.execute import judge_case
from e2egen.runner.arithmetic.lookup import Measured, measured_arithmetic
from e2egen.runner.arithmetic.model import FORMAT_BITS, Arithmetic
from e2egen.runner.bound import ProductSumError, SumOfBounds, product_sum_bound, product_sum_parts
from e2egen.runner.device import tf32_mode
from e2egen.runner.inputs import generate_inputs, reference_inputs
from e2egen.runner.kernels import TORCH_IMPL
from e2egen.runner.reference import compute_reference

from e2egen.diagnose import variants as V
from e2egen.diagnose.coords import position_text
from e2egen.diagnose.probe import ProbeResult, run_probe

OBJECTIVE_BOUND = runner.BoundModel()  # f32 accumulator, lambda 5, sqrt(K) growth, 1 ulp of output rounding
AWAY_RANGE = (1.0, 5.0)  # the seed's r4: no input near zero, no cancellation, no subnormal
NARROW_FACTOR = 0.5  # the narrower range scales the case's by this (or less, to avoid overflow)
WORST_LISTED = 10
MARGIN_SEEDS = 3  # more seeds the kernel reruns at before explain suggests an rms tolerance
RMS_MARGIN = 2.0  # the suggested rms tolerance: the largest rms over the seeds times this
_CPU = torch.device("cpu")
# What explain_case does, in order, as its `progress` hears it (the keys of Explanation.timings);
# a stage the case does not need is left out.
STAGES = ("kernel run", "arithmetic (probes)", "reference variants", "accumulator models", "other ranges", "probe",
          "other seeds")


@dataclass
class Row:
    """One reference (variant or accumulator model) against the kernel's output."""

    key: str
    label: str
    comparison: Any = None  # FloatComparison, bound_ratio under OBJECTIVE_BOUND
    verdict: Any = None  # Verdict under the case's tolerances
    note: str = ""  # why it was not computed, or "sampled ..."
    low_acc_ratio: float | None = None  # bound_ratio under an accumulator of the output's format (plain only)
    measured_ratio: float | None = None  # bound_ratio under the measured arithmetic (plain only, when measured)
    miss: float | None = None  # fraction of elements where out != round_T(reference)

    @property
    def computed(self) -> bool:
        return self.comparison is not None

    @property
    def eps(self) -> float:
        return self.comparison.max_eps_diff

    @property
    def ratio(self) -> float:
        return self.comparison.bound_ratio


# Which input range a RangeRow ran: the case's own, AWAY_RANGE (away from zero), or the case's narrowed.
RangeRole = Literal["case", "away", "narrow"]


@dataclass
class RangeRow:
    role: RangeRole
    label: str
    lo: float
    hi: float
    comparison: Any = None
    verdict: Any = None
    note: str = ""


@dataclass
class ModelSearch:
    tried: int
    sample: int  # output elements the search ran on
    elements: int  # output elements in all
    plain_eps: float  # on the sample
    plain_ratio: float
    plain_miss: float
    ranked: list[tuple[Any, float, float, float]]  # (AccumulatorModel, eps, ratio, miss) on the sample, best first
    full: Row | None = None  # the best model over every element, when affordable
    seconds: float = 0.0

    @property
    def best(self):
        return self.ranked[0] if self.ranked else None


@dataclass
class RmsMargin:
    """rms of the case's comparison at its own seed and at MARGIN_SEEDS more, and the tolerance suggested."""

    seeds: list[tuple[int, float]]  # (seed, rms), the case's seed first
    suggested: float  # max rms x RMS_MARGIN, rounded up to two significant digits
    notes: list[str] = field(default_factory=list)  # seeds that could not run, and why

    @property
    def largest(self) -> float:
        return max(r for _, r in self.seeds)

    def describe(self) -> str:
        values = ", ".join(f"seed {seed}: {r:.3g}" for seed, r in self.seeds)
        return (f"rms over {len(self.seeds)} seeds ({values}); largest {self.largest:.3g} x {RMS_MARGIN:g} margin "
                f"= {self.suggested:.2g}")


@dataclass
class WorstRow:
    position: str
    ref: float
    out: float
    abs_diff: float
    eps: float
    ulp_distance: float | None
    subnormal: bool
    terms: float  # Σ|a·b| of the element
    condition: float  # Σ|a·b| / |ref| (inf at ref = 0)


@dataclass
class Explanation:
    case: Case
    device: str = "cpu"
    impl: str = TORCH_IMPL
    problem: Any = None
    skipped: str = ""
    kernel_failure: str = ""
    rows: list[Row] = field(default_factory=list)
    case_row: Row | None = None  # the case's own reference, when it is not plain
    search: ModelSearch | None = None
    ranges: list[RangeRow] = field(default_factory=list)
    probe: ProbeResult | None = None
    arithmetic: Measured | None = None  # the kernel's arithmetic as the probes found it (None: not looked up)
    violations: list[Any] = field(default_factory=list)  # requirements the measured arithmetic breaks (fail the case)
    accepted: list[tuple[Any, Any]] = field(default_factory=list)  # (violation, [[accept]] entry) excused
    rms_margin: RmsMargin | None = None  # reruns at more seeds, when an rms tolerance may be suggested
    worst: list[WorstRow] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    findings: list[Any] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def row(self, key: str) -> Row | None:
        return next((r for r in self.rows if r.key == key), None)

    @property
    def plain(self) -> Row:
        return self.row("plain")

    @property
    def verdict(self):
        """The case's verdict as `e2egen run` gives it (its own reference options)."""
        row = self.case_row or self.plain
        return row.verdict if row is not None else None

    @property
    def measured(self) -> Arithmetic | None:
        """The measured arithmetic when it can be relied on: measured (not assumed), no unexplained outcome."""
        m = self.arithmetic
        if m is None or not m.measured or m.arithmetic.unexplained:
            return None
        return m.arithmetic

    @property
    def passed(self) -> bool:
        """As `e2egen run` says: the case's tolerances hold and no requirement is broken."""
        if self.skipped:
            return True
        if self.kernel_failure:
            return False
        return bool(self.verdict and self.verdict.passed) and not self.violations

    @property
    def exit_status(self) -> int:
        return 0 if self.passed else 1


# -- helpers --------------------------------------------------------------------------------
class Judge:
    """Compares references with one kernel output: objective bound_ratio, and the case's verdict."""

    def __init__(self, case: Case, problem: runner.Problem, out: torch.Tensor, error_bound: SumOfBounds,
                 arithmetic: Arithmetic | None = None):
        self.case, self.problem = case, problem
        self.out = out.detach().to(_CPU)
        self.error_bound = error_bound  # the runner's bound of the primary output (float64, CPU)
        self.terms = error_bound.part(ProductSumError).magnitude  # Σ|a·b| per element
        self.dtype = problem.out_dtype
        # the case's bound as `e2egen run` evaluates it: following the measured arithmetic
        self.case_model = case.bound.with_arithmetic(arithmetic) if case.bound is not None and "bound_ratio" in case.tolerances else None

    def bound(self, ref: torch.Tensor, model: runner.BoundModel) -> torch.Tensor:
        return self.error_bound.evaluate(model, ref)

    def row(self, key: str, label: str, ref: torch.Tensor, ftz: bool = False) -> Row:
        ref = ref.to(_CPU)
        comparison = metrics.compare(ref, self.out, dtype=self.dtype, ftz=ftz, bound=self.bound(ref, OBJECTIVE_BOUND))
        judged = comparison
        if self.case_model is not None and self.case_model != OBJECTIVE_BOUND:
            judged = metrics.compare(ref, self.out, dtype=self.dtype, ftz=ftz, bound=self.bound(ref, self.case_model))
        return Row(key, label, comparison, judged.check(self.case.tolerances), miss=mismatch_rate(ref, self.out, self.dtype))

    def ratio_under(self, ref: torch.Tensor, model: runner.BoundModel) -> float:
        return metrics.compare(ref, self.out, dtype=self.dtype, bound=self.bound(ref, model)).bound_ratio


def mismatch_rate(ref: torch.Tensor, out: torch.Tensor, dtype: str) -> float:
    """Fraction of elements where out is not round_T(ref) (NaN matches NaN): 0 for a reference that
    reproduces the kernel bit for bit."""
    if ref.numel() == 0:
        return 0.0
    rounded = metrics.round_to(ref, dtype)
    out64 = out.to(torch.float64)
    same = (rounded == out64) | (torch.isnan(rounded) & torch.isnan(out64))
    return 1.0 - float(same.sum()) / ref.numel()


def _inputs64(problem: runner.Problem) -> dict[str, torch.Tensor]:
    """The case's inputs exactly as runner.run drew them (same seed, same rounding), in float64 on the CPU."""
    return reference_inputs(generate_inputs(problem), _CPU)


def _with_range(problem: runner.Problem, lo: float, hi: float) -> runner.Problem:
    """The same problem on another range of uniform reals (the what-if ranges are the seed's r0…r5)."""
    return replace(problem, input_range=(lo, hi), input_data="uniform")


def _with_seed(problem: runner.Problem, seed: int) -> runner.Problem:
    """The same problem, data kind included (integer data stays integer), with another seed."""
    return replace(problem, seed=seed)


def margin_seeds(case: Case, count: int = MARGIN_SEEDS) -> list[int]:
    """`count` more seeds for the case, derived from its seed and id (the same every time)."""
    return [derive_seed(case.seed, f"{case.id}#explain-margin-{i}") % 2 ** 31 for i in range(1, count + 1)]


def _nice_ceil(x: float) -> float:
    """x rounded up to two significant digits (0.000123 -> 0.00013), never below x."""
    if not math.isfinite(x) or x <= 0:
        return x
    scale = 10.0 ** (math.floor(math.log10(x)) - 1)
    value = float(f"{math.ceil(x / scale - 1e-9) * scale:.2g}")
    while value < x:
        value = float(f"{value + scale:.2g}")
    return value


def input_rounding_format(arithmetic: Arithmetic | None, dtype: str) -> str | None:
    """The format the probes found the kernel rounds its inputs to, when it is narrower than the case's
    dtype allows (bf16 for an f32 case; tf32 is a tf32 case's own); None otherwise."""
    if arithmetic is None or arithmetic.inputs == "exact":
        return None
    own = FORMAT_BITS.get(dtype)
    if own is None or FORMAT_BITS[arithmetic.inputs] >= own:
        return None
    return arithmetic.inputs


def round_inputs(inputs64: dict[str, torch.Tensor], fmt: str, rounding: str = "nearest") -> dict[str, torch.Tensor]:
    """The inputs as a kernel that rounds them to `fmt` sees them (float64)."""
    if rounding == "nearest":
        return {n: metrics.round_to(t, fmt) for n, t in inputs64.items()}
    bits = FORMAT_BITS[fmt]
    rounded = {}
    for n, t in inputs64.items():  # toward zero: keep `bits` significant bits of the mantissa
        mantissa, exponent = torch.frexp(t)
        rounded[n] = torch.ldexp(torch.trunc(torch.ldexp(mantissa, torch.full_like(exponent, bits))), exponent - bits)
    return rounded


def _nice_floor(x: float) -> float:
    """x rounded down to one significant digit (0.37 -> 0.3)."""
    if x <= 0:
        return x
    scale = 10 ** math.floor(math.log10(x))
    return math.floor(x / scale) * scale


def narrow_factor(max_abs_ref: float, out_dtype: str) -> float:
    """Scale for both inputs (the result scales by its square) that keeps every result below half the
    format's max; at most NARROW_FACTOR."""
    limit = metrics.get_format(out_dtype).max / 2
    if not math.isfinite(max_abs_ref) or max_abs_ref <= 0:
        return NARROW_FACTOR
    return min(NARROW_FACTOR, _nice_floor(math.sqrt(limit / max_abs_ref)))


def _range_label(lo: float, hi: float) -> str:
    return f"[{lo:g}, {hi:g}]"


def ulp_distance(ref: torch.Tensor, out: torch.Tensor, dtype: str) -> torch.Tensor:
    """Representable values of the format between round(ref) and out (-0 = +0); NaN where either is not finite."""
    from e2egen.metrics.formats import float_format
    from e2egen.metrics.rounding import ordered, rounded_pattern, split_float64

    fmt = float_format(dtype)
    out64 = out.to(torch.float64)
    finite = torch.isfinite(ref) & torch.isfinite(out64)
    safe_ref = torch.where(finite, ref, torch.zeros_like(ref))
    safe_out = torch.where(finite, out64, torch.zeros_like(out64))
    neg_r, biased_r, mant_r = split_float64(safe_ref)
    neg_o, biased_o, mant_o = split_float64(safe_out)
    a = ordered(neg_r, rounded_pattern(biased_r, mant_r, fmt))
    b = ordered(neg_o, rounded_pattern(biased_o, mant_o, fmt))
    distance = (a - b).abs().to(torch.float64)
    return torch.where(finite, distance, torch.full_like(distance, math.nan))


def worst_elements(problem: runner.Problem, ref: torch.Tensor, out: torch.Tensor, terms: torch.Tensor,
                   count: int = WORST_LISTED) -> list[WorstRow]:
    """The `count` elements with the largest |ref - out| / ulp(ref) (non-finite outputs first)."""
    dtype = problem.out_dtype
    fmt = metrics.get_format(dtype)
    flat_ref, flat_out = ref.reshape(-1), out.reshape(-1).to(torch.float64)
    diff = (flat_ref - flat_out).abs()
    eps = diff / metrics.ulp(flat_ref, dtype)
    key = torch.nan_to_num(eps, nan=math.inf, posinf=math.inf)
    top = torch.topk(key, min(count, key.numel())).indices
    distance = ulp_distance(flat_ref[top], flat_out[top], dtype)
    rows = []
    for j, index in enumerate(top.tolist()):
        r, o, t = float(flat_ref[index]), float(flat_out[index]), float(terms.reshape(-1)[index])
        e = float(eps[index])
        if e == 0 and rows:
            break
        rows.append(WorstRow(
            position=position_text(problem, index), ref=r, out=o, abs_diff=float(diff[index]), eps=e,
            ulp_distance=None if math.isnan(float(distance[j])) else float(distance[j]),
            subnormal=0 < abs(r) < fmt.min_normal, terms=t, condition=t / abs(r) if r != 0 else math.inf))
    return rows


def subnormal_stats(problem: runner.Problem, ref: torch.Tensor, out: torch.Tensor, inputs64) -> dict[str, int]:
    fmt = metrics.get_format(problem.out_dtype)
    in_fmt = metrics.get_format(problem.input_format)
    rounded = metrics.round_to(ref, problem.out_dtype)
    sub = (rounded != 0) & (rounded.abs() < fmt.min_normal)
    out64 = out.to(torch.float64)
    return {
        "subnormal_results": int(sub.sum()),
        "flushed_results": int((sub & (out64 == 0)).sum()),
        "subnormal_inputs": int(sum(int(((t != 0) & (t.abs() < in_fmt.min_normal)).sum()) for t in inputs64.values())),
        "elements": ref.numel(),
    }


def conditioning(problem: runner.Problem, ref: torch.Tensor, out: torch.Tensor, accumulation: ProductSumError,
                 comparison) -> dict[str, Any]:
    """Cancellation evidence: Σ|a·b| / |ref| at each metric's worst element, and max_eps_diff over the
    well-conditioned elements (those whose f32-accumulation error bound is below half an output ulp)."""
    dtype = problem.out_dtype
    fmt = metrics.get_format(dtype)
    flat_terms = accumulation.magnitude.reshape(-1)
    condition = {}
    for name, worst in comparison.worst.items():
        t = float(flat_terms[worst.index])
        condition[name] = t / abs(worst.ref) if worst.ref else math.inf
    flat_ref, flat_out = ref.reshape(-1), out.reshape(-1).to(torch.float64)
    ulps = metrics.ulp(flat_ref, dtype)
    ok = torch.isfinite(flat_ref) & torch.isfinite(flat_out) & (flat_ref.abs() <= fmt.max)
    well = ok & (accumulation.evaluate(OBJECTIVE_BOUND).reshape(-1) <= 0.5 * ulps)
    eps = ((flat_ref - flat_out).abs() / ulps)[well]
    return {"worst_condition": condition, "well_conditioned": int(well.sum()),
            "eps_well_conditioned": float(eps.max()) if eps.numel() else 0.0}


# -- the steps ------------------------------------------------------------------------------
def explain_case(case: Case, device: str | None = None, *, search: bool = True, probe: bool = True,
                 ranges: bool = True, arithmetic: bool = True, seeds: bool = True,
                 progress: Callable[[str], None] | None = None) -> Explanation:
    """Gather every piece of evidence for `case` and diagnose it (see causes.py).

    probe: the exact-arithmetic probe; arithmetic: the kernel's arithmetic from the probes (runner/arithmetic);
    seeds: rerun at MARGIN_SEEDS more seeds before suggesting an rms tolerance; progress: told the name of each
    of the STAGES as it starts (the whole takes seconds to minutes)."""
    from e2egen.diagnose.causes import diagnose, wants_rms_margin

    def stage(name: str) -> None:
        if progress is not None:
            progress(name)

    explanation = Explanation(case=case, impl=case.impl or TORCH_IMPL)
    try:
        dev = runner.select_device(device)
    except runner.Skip as skip:
        explanation.skipped = skip.reason
        return explanation
    explanation.device = dev.type
    problem = case.problem()
    explanation.problem = problem
    stage("kernel run")
    started = time.perf_counter()
    try:
        result = runner.run(problem, impl=case.impl, device=dev)
    except runner.Skip as skip:
        explanation.skipped = skip.reason
        return explanation
    except runner.KernelFailure as failure:
        explanation.kernel_failure = failure.reason
        explanation.findings = diagnose(explanation)
        return explanation
    explanation.device = result.device
    explanation.timings["kernel run"] = time.perf_counter() - started

    if arithmetic:
        stage("arithmetic (probes)")
        started = time.perf_counter()
        explanation.arithmetic = _measure(case, problem, dev)
        explanation.timings["arithmetic (probes)"] = time.perf_counter() - started
        _judge_requirements(explanation)
    measured = explanation.arithmetic.arithmetic if explanation.arithmetic is not None else None

    stage("reference variants")
    started = time.perf_counter()
    inputs64 = _inputs64(problem)
    judge = Judge(case, problem, result.out, product_sum_bound(problem, inputs64, measured), measured)
    terms = judge.terms
    _reference_rows(explanation, judge, problem, inputs64, result.ref, dev)
    explanation.timings["reference variants"] = time.perf_counter() - started

    plain_ref = result.ref.to(_CPU)
    explanation.stats = subnormal_stats(problem, plain_ref, judge.out, inputs64)
    explanation.stats["max_abs_ref"] = float(plain_ref[torch.isfinite(plain_ref)].abs().max()) if plain_ref.numel() else 0.0
    explanation.worst = worst_elements(problem, plain_ref, judge.out, terms)
    explanation.stats.update(conditioning(problem, plain_ref, judge.out, judge.error_bound.part(ProductSumError),
                                          explanation.plain.comparison))

    plain = explanation.plain
    anomalous = not plain.verdict.passed or plain.ratio > 1 or (explanation.verdict is not None and not explanation.verdict.passed)
    # f16/bf16 accumulator models can only explain errors beyond the f32-accumulation bound; f32 ones
    # (chunking / order of an f32 kernel) can hide below it.
    if search and anomalous and (plain.ratio > 1 or V.accumulator_format(problem.out_dtype) == "f32"):
        stage("accumulator models")
        started = time.perf_counter()
        explanation.search = search_models(judge, problem, inputs64, plain_ref)
        explanation.timings["accumulator models"] = time.perf_counter() - started
    if ranges:
        stage("other ranges")
        started = time.perf_counter()
        explanation.ranges = _range_rows(case, problem, dev, plain, explanation.stats["max_abs_ref"], measured)
        explanation.timings["other ranges"] = time.perf_counter() - started
    if probe:
        stage("probe")
        started = time.perf_counter()
        kernel = runner.resolve_impl(problem.op, problem.direction, case.impl)
        explanation.probe = run_probe(problem, kernel, dev, case.impl or TORCH_IMPL)
        explanation.timings["probe"] = time.perf_counter() - started
    if seeds and wants_rms_margin(explanation):
        stage("other seeds")
        started = time.perf_counter()
        explanation.rms_margin = rms_margin(explanation, dev)
        explanation.timings["other seeds"] = time.perf_counter() - started
    explanation.findings = diagnose(explanation)
    return explanation


def _measure(case: Case, problem: runner.Problem, dev: torch.device) -> Measured:
    """The kernel's arithmetic for the case's cell, as `e2egen run` looks it up (profile, or probed now)."""
    kernel = runner.resolve_impl(problem.op, problem.direction, case.impl)
    with tf32_mode(problem.dtype == "tf32"):
        return measured_arithmetic(problem, kernel, dev, case.impl or TORCH_IMPL)


def _judge_requirements(explanation: Explanation) -> None:
    explanation.violations, explanation.accepted = judge_case(explanation.case, explanation.arithmetic)


def case_reference(explanation: Explanation) -> runner.ReferenceOptions:
    """The case's reference as `e2egen run` applies it: ftz on where the probes found the kernel flushes."""
    own = explanation.case.reference
    m = explanation.arithmetic
    if m is not None and m.arithmetic.flushes and not own.ftz:
        from dataclasses import replace
        own = replace(own, ftz=True)
    return own


def rms_margin(explanation: Explanation, dev: torch.device) -> RmsMargin:
    """rms of the case's comparison at its seed and at margin_seeds(); suggest max x RMS_MARGIN."""
    case, problem = explanation.case, explanation.problem
    verdict_row = explanation.case_row or explanation.plain
    values = [(case.seed, float(verdict_row.comparison.rms))]
    notes = []
    reference = case_reference(explanation)
    for seed in margin_seeds(case):
        try:
            result = runner.run(_with_seed(problem, seed), impl=case.impl, device=dev, reference=reference, measure=False)
        except (runner.Skip, runner.KernelFailure) as stop:
            notes.append(f"seed {seed}: {getattr(stop, 'reason', stop)}")
            continue
        c = metrics.compare(result.ref.to(_CPU), result.out.detach().to(_CPU), dtype=problem.out_dtype, ftz=reference.ftz)
        values.append((seed, float(c.rms)))
    largest = max(r for _, r in values)
    return RmsMargin(values, _nice_ceil(largest * RMS_MARGIN), notes)


def _reference_rows(explanation: Explanation, judge: Judge, problem, inputs64, plain_ref, dev) -> None:
    low_acc = V.accumulator_format(problem.out_dtype)
    measured = explanation.measured
    for variant in V.reference_variants(problem):
        if variant.key == "plain":
            row = judge.row("plain", variant.label, plain_ref)
            if low_acc != "f32":
                row.low_acc_ratio = judge.ratio_under(plain_ref.to(_CPU), runner.BoundModel(acc=low_acc))
            if measured is not None:
                row.measured_ratio = judge.ratio_under(plain_ref.to(_CPU), OBJECTIVE_BOUND.with_arithmetic(measured))
        elif variant.key == "device":
            if dev.type == "cpu":
                row = Row(variant.key, variant.label, note="the kernel runs on the CPU: the device reference is the CPU reference")
            else:
                try:
                    runner.device.require_float64(dev)
                    on_device = {n: t.to(dev) for n, t in inputs64.items()}
                    ref = compute_reference(problem, on_device, variant.options).value
                    row = judge.row(variant.key, variant.label, ref, ftz=variant.compare_ftz)
                except runner.Skip as skip:
                    row = Row(variant.key, variant.label, note=skip.reason)
        else:
            ref = compute_reference(problem, inputs64, variant.options).value
            row = judge.row(variant.key, variant.label, ref, ftz=variant.compare_ftz)
        explanation.rows.append(row)
    fmt = input_rounding_format(measured, problem.dtype)
    if fmt is not None:
        rounded = round_inputs(inputs64, fmt, measured.inputs_rounding)
        ref = compute_reference(problem, rounded, runner.ReferenceOptions()).value
        how = "" if measured.inputs_rounding == "nearest" else " toward zero"
        explanation.rows.append(judge.row("inputs", f"inputs rounded to {fmt}{how}", ref))
    own = case_reference(explanation)
    if own != runner.ReferenceOptions():
        if own.device == "device" and dev.type != "cpu":
            ref = compute_reference(problem, {n: t.to(dev) for n, t in inputs64.items()}, own).value
        else:
            ref = compute_reference(problem, inputs64, own).value
        settings = ", ".join(f"{k} = {str(v).lower() if isinstance(v, bool) else v}" for k, v in own.changed().items())
        if own.ftz and not explanation.case.reference.ftz:
            settings += ": the probes found the kernel flushes"
        explanation.case_row = judge.row("case", f"case reference ({settings})", ref, ftz=own.ftz)


def search_models(judge: Judge, problem, inputs64, plain_ref) -> ModelSearch:
    """Rank the accumulator models on a sample of elements; compute the best in full when affordable."""
    started = time.perf_counter()
    form = V.lowered_form(problem, inputs64)
    taps = V.conv_taps(problem)
    indices = V.choose_sample(plain_ref, judge.out, problem.out_dtype, problem.seed, problem.reduction_size)
    sample = V.sample_products(form, indices)
    out_s = judge.out.reshape(-1)[indices]
    terms_s = sample.products.abs().sum(-1)

    def scores(values: torch.Tensor) -> tuple[float, float, float]:
        eps = V.sample_eps(values, out_s, problem.out_dtype)
        miss = mismatch_rate(values, out_s, problem.out_dtype)
        fmt = metrics.get_format(problem.out_dtype)
        out64 = out_s.to(torch.float64)
        ok = torch.isfinite(values) & torch.isfinite(out64) & (values.abs() <= fmt.max)
        if not bool(ok.any()):
            return eps, 0.0, miss
        bound = product_sum_parts(problem, terms_s[ok]).evaluate(OBJECTIVE_BOUND, values[ok])
        return eps, float(((values[ok] - out64[ok]).abs() / bound).max()), miss

    plain_eps, plain_ratio, plain_miss = scores(plain_ref.reshape(-1)[indices])
    ranked = []
    models = V.candidate_models(problem)
    for model in models:
        ranked.append((model, *scores(V.model_on_sample(sample, model, taps))))
    # Most elements reproduced bit for bit first (robust: a count, not one extreme element), then the bound.
    ranked.sort(key=lambda item: (item[3], item[2], item[1], item[0].partials != "running", item[0].order != "natural"))
    search = ModelSearch(tried=len(models), sample=int(indices.numel()), elements=plain_ref.numel(),
                         plain_eps=plain_eps, plain_ratio=plain_ratio, plain_miss=plain_miss, ranked=ranked)
    if ranked:
        best = ranked[0][0]
        if V.full_model_affordable(problem, best):
            ref = V.model_reference(form, best, taps)
            search.full = judge.row("model", f"model: {best.describe()}", ref)
    search.seconds = time.perf_counter() - started
    return search


def _range_rows(case: Case, problem, dev, plain: Row, max_abs_ref: float,
                measured: Arithmetic | None = None) -> list[RangeRow]:
    lo, hi = problem.input_range
    rows = [RangeRow("case", f"{case.range} {_range_label(lo, hi)} (the case's)", lo, hi, plain.comparison, plain.verdict)]
    away = RangeRow("away", f"r4 {_range_label(*AWAY_RANGE)} (away from zero)", *AWAY_RANGE)
    if AWAY_RANGE == (lo, hi):
        away.note = "the case's range already is r4"
    s = narrow_factor(max_abs_ref, problem.out_dtype)
    narrow = RangeRow("narrow", f"{_range_label(lo * s, hi * s)} (narrower: x{s:g})", lo * s, hi * s)
    for row in (away, narrow):
        if row.note:
            rows.append(row)
            continue
        ranged = _with_range(problem, row.lo, row.hi)
        try:
            result = runner.run(ranged, impl=case.impl, device=dev)
        except runner.Skip as skip:
            row.note = f"skipped: {skip.reason}"
        except runner.KernelFailure as failure:
            row.note = f"kernel failed: {failure.reason}"
        else:
            inputs64 = _inputs64(ranged)
            judged = Judge(case, ranged, result.out, product_sum_bound(ranged, inputs64, measured),
                           measured).row(row.role, row.label, result.ref)
            row.comparison, row.verdict = judged.comparison, judged.verdict
        rows.append(row)
    return rows
