"""`e2egen explain` for ops whose bound is composed of named terms (attention): the case's verdict per
output and, at each output's worst elements, what each error source contributes to the bound, so a
failure says which step (Q·Kᵀ, exp, P rounding, P·V, the output rounding...) the kernel exceeds.

The measured arithmetic is held against the case's requirements as `e2egen run` does (a bound that
follows an f16 accumulator is wide, and the requirement is what fails such a kernel). The
reference-variant and accumulator-model analyses of explain.py are about one product sum; they do not
apply to a composed op and are not run here."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from e2egen import metrics, runner
from e2egen.generator.cases import Case
from e2egen.generator.execute import judge_case, tolerances_for
from e2egen.runner.kernels import TORCH_IMPL

WORST = 3  # elements shown per output
STAGES = ("kernel run and probes", "outputs compared")  # what explain_terms does, in order, as `progress` hears it


@dataclass
class TermShare:
    source: str
    value: float


@dataclass
class WorstElement:
    position: tuple[int, ...]
    ref: float
    out: float
    bound: float
    terms: list[TermShare]

    @property
    def ratio(self) -> float:
        return abs(self.out - self.ref) / self.bound if self.bound > 0 else (0.0 if self.out == self.ref else float("inf"))


@dataclass
class OutputExplanation:
    name: str
    verdict: object
    worst: list[WorstElement]


@dataclass
class TermsExplanation:
    case: Case
    impl: str
    device: str = "cpu"
    skipped: str = ""
    kernel_failure: str = ""
    outputs: list[OutputExplanation] = field(default_factory=list)
    arithmetic: str = ""
    broken: list[str] = field(default_factory=list)  # requirements the measured arithmetic breaks (fail the case)
    accepted: list[str] = field(default_factory=list)  # broken ones an [[accept]] entry excuses

    @property
    def passed(self) -> bool:
        return bool(self.skipped) or (not self.kernel_failure and not self.broken
                                      and all(o.verdict.passed for o in self.outputs))


def _source(part) -> str:
    return getattr(part, "source", None) or type(part).__name__


def explain_terms(case: Case, device: str | None = None,
                  progress: Callable[[str], None] | None = None) -> TermsExplanation:
    """progress: told the name of each of the STAGES as it starts."""
    explanation = TermsExplanation(case=case, impl=case.impl or TORCH_IMPL)
    problem = case.problem()
    if progress is not None:
        progress(STAGES[0])
    try:
        result = runner.run(problem, impl=case.impl, device=device, reference=case.reference, bound=case.bound
                            or runner.BoundModel(), measure=True)
    except runner.Skip as skip:
        explanation.skipped = skip.reason
        return explanation
    except runner.KernelFailure as failure:
        explanation.kernel_failure = failure.reason
        return explanation
    explanation.device = result.device
    measured = result.arithmetic
    if measured is not None:
        explanation.arithmetic = f"{measured.arithmetic.describe()} ({measured.origin})"
        failing, excused = judge_case(case, measured)  # held against the requirements as `e2egen run` does
        explanation.broken = [v.message for v in failing]
        explanation.accepted = [f"{v.message} — {entry.reason}" for v, entry in excused]
    if progress is not None:
        progress(STAGES[1])
    model = (case.bound or runner.BoundModel()).with_arithmetic(result.arithmetic.arithmetic if result.arithmetic else None)
    for name, output in result.outputs.items():
        comparison = metrics.compare(output.ref, output.out, dtype=output.dtype, ftz=result.reference.ftz,
                                     bound=output.bound)
        verdict = comparison.check(tolerances_for(case.tolerances, comparison))
        explanation.outputs.append(OutputExplanation(name, verdict, _worst(output, model)))
    return explanation


def _worst(output, model) -> list[WorstElement]:
    if output.bound is None or output.error_bound is None:
        return []
    ref, out, bound = output.ref.cpu(), output.out.detach().double().cpu(), output.bound.cpu()
    error = (out - ref).abs()
    error = torch.where(torch.isfinite(ref) | (out != ref), error, 0.0).nan_to_num(nan=float("inf"))
    ratio = torch.where(bound > 0, error / bound, torch.where(error > 0, float("inf"), 0.0)).flatten()
    parts = getattr(output.error_bound, "parts", ())
    terms = [(_source(part), part.evaluate(model, ref).cpu().flatten()) for part in parts]
    rows = []
    for flat in torch.topk(ratio, min(WORST, ratio.numel())).indices.tolist():
        position = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), ref.shape))
        rows.append(WorstElement(position, float(ref.flatten()[flat]), float(out.flatten()[flat]),
                                 float(bound.flatten()[flat]), [TermShare(s, float(t[flat])) for s, t in terms]))
    return rows


def render_terms(explanation: TermsExplanation) -> str:
    case = explanation.case
    lines = [f"case {case.id} ({explanation.impl} on {explanation.device})"]
    if explanation.skipped:
        return "\n".join(lines + [f"skipped: {explanation.skipped}"])
    if explanation.kernel_failure:
        return "\n".join(lines + [f"kernel failed: {explanation.kernel_failure}"])
    if explanation.arithmetic:
        lines.append(f"arithmetic: {explanation.arithmetic}")
    lines += [f"REQUIREMENT BROKEN: {message}" for message in explanation.broken]
    lines += [f"accepted deviation: {message}" for message in explanation.accepted]
    for output in explanation.outputs:
        lines += ["", f"output {output.name}: {'passed' if output.verdict.passed else 'FAILED: ' + output.verdict.summary}"]
        for element in output.worst:
            lines.append(f"  at {list(element.position)}: ref {element.ref:.9g}, out {element.out:.9g}, "
                         f"|error| / bound = {element.ratio:.3g} (bound {element.bound:.3g})")
            total = sum(t.value for t in element.terms) or 1.0
            for term in sorted(element.terms, key=lambda t: -t.value):
                lines.append(f"      {term.source:<28} {term.value:11.3g}  {100 * term.value / total:5.1f} %")
    lines += ["", "verdict: " + ("passed" if explanation.passed else "FAILED")]
    return "\n".join(lines)
