"""Run one case end to end: inputs, kernel, reference, compare, verdict.

Besides its metrics, a case judges the kernel's measured arithmetic against
its requirements (the catalogue's `require`): a requirement broken fails the
case unless an `[[accept]]` entry covers the device, impl and cell.

Everything a case can do wrong ends here as an Outcome (passed, failed or
skipped, with the reason and a repro command), never as an exception, so a
sweep goes on after a crashing kernel.
"""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Mapping

from e2egen.generator.cases import Case

DEFAULT_CATALOGUE = "configs.toml"


@dataclass
class Outcome:
    case: Case
    status: str  # "passed" | "failed" | "skipped"
    reason: str
    device: str
    repro: str
    report: str = ""
    comparison: Any = None  # metrics Comparison of the primary output, when the kernel ran
    verdict: Any = None  # metrics Verdict of the primary output, when compared
    timings: dict[str, float] = field(default_factory=dict)
    outputs: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # every output: (Comparison, Verdict)
    arithmetic: Any = None  # runner.arithmetic.lookup.Measured: the kernel's arithmetic the case was judged by

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def repro_command(case: Case, device: str | None, catalogue: str | None = None) -> str:
    parts = ["e2egen", "run", _quote(case.id), "--seed", str(case.seed)]
    if device:
        parts += ["--device", device]
    if catalogue and catalogue != DEFAULT_CATALOGUE:
        parts += ["--catalogue", _quote(catalogue)]
    return " ".join(parts)


def _quote(text: str) -> str:
    return text if all(ch.isalnum() or ch in "/._-+:" for ch in text) else f"'{text}'"


def execute(case: Case, device: str | None = None, catalogue: str | None = None) -> Outcome:
    """Run `case` on `device` (None: CUDA when present, else CPU; E2E_DEVICE overrides)."""
    from e2egen import metrics  # with torch: loaded when a case runs, so collecting a suite stays fast
    from e2egen import runner

    try:
        torch_device = runner.select_device(device)
    except runner.Skip as skip:
        return Outcome(case, "skipped", skip.reason, str(device), repro_command(case, device, catalogue))
    device_name = torch_device.type
    repro = repro_command(case, device_name, catalogue)
    outcome = Outcome(case, "failed", "", device_name, repro)
    try:
        problem = case.problem()
        result = runner.run(
            problem, impl=case.impl, device=torch_device,
            reference=case.reference,
            bound=case.bound,
            measure=True,
        )
    except runner.Skip as skip:
        outcome.status, outcome.reason = "skipped", skip.reason
        return outcome
    except runner.KernelFailure as failure:
        outcome.reason = f"kernel failed: {failure.reason}"
        outcome.report = outcome.reason
        return outcome
    except Exception as err:  # a bug anywhere below must not kill the sweep
        outcome.reason = f"error while running the case: {type(err).__name__}: {err}"
        outcome.report = outcome.reason + "\n" + traceback.format_exc()
        return outcome
    outcome.device = result.device
    outcome.timings = dict(result.timings)
    start = time.perf_counter()
    for name, output in result.outputs.items():
        rounding = result.arithmetic.arithmetic.rounding if result.arithmetic is not None else "nearest-even"
        comparison = metrics.compare(output.ref, output.out, dtype=output.dtype, ftz=result.reference.ftz, bound=output.bound,
                                     rounding=rounding)
        outcome.outputs[name] = (comparison, comparison.check(tolerances_for(case.tolerances, comparison)))
    outcome.timings["compare"] = time.perf_counter() - start
    outcome.comparison, outcome.verdict = outcome.outputs[result.primary.name]
    failed = [name for name, (_, verdict) in outcome.outputs.items() if not verdict.passed]
    outcome.status = "failed" if failed else "passed"
    if len(outcome.outputs) == 1:
        outcome.reason = outcome.verdict.summary if failed else ""
        outcome.report = str(outcome.verdict)
    else:  # each output judged alone; the case passes when every output does
        outcome.reason = "; ".join(f"{name}: {outcome.outputs[name][1].summary}" for name in failed)
        outcome.report = "\n".join(f"output {name}:\n{verdict}" for name, (_, verdict) in outcome.outputs.items())
    outcome.arithmetic = result.arithmetic
    if result.arithmetic is not None:
        try:
            _judge_arithmetic(outcome, result.arithmetic)
        except Exception as err:  # a bug in judging must not kill the sweep either
            outcome.status = "failed"
            outcome.reason = f"error while judging the arithmetic: {type(err).__name__}: {err}"
            outcome.report = outcome.reason + "\n" + traceback.format_exc() + outcome.report
    return outcome


def _judge_arithmetic(outcome: Outcome, measured: Any) -> None:
    """Fail the case for each requirement the measured arithmetic breaks that no [[accept]] entry covers;
    the report starts with the arithmetic, then each broken and each accepted requirement."""
    from e2egen.runner.arithmetic.requirements import judge

    case = outcome.case
    lines = [f"arithmetic: {measured.arithmetic.describe()} ({measured.origin})"]
    if not measured.measured:  # nothing was measured: there is nothing to hold against the requirements
        outcome.report = "\n".join(lines + ([outcome.report] if outcome.report else []))
        return
    failing, excused = judge(case.require, case.accepted, measured.arithmetic, case.dtype, measured.device.device,
                             measured.device.impl, str(measured.cell))
    lines += [f"REQUIREMENT BROKEN: {v.message}" for v in failing]
    lines += [f"accepted deviation: {v.message} — {entry.reason} ([[accept]] device={entry.device})"
              for v, entry in excused]
    outcome.report = "\n".join(lines + ([outcome.report] if outcome.report else []))
    if failing:
        broken = "arithmetic: " + "; ".join(v.message for v in failing)
        outcome.status = "failed"
        outcome.reason = broken + (f"; {outcome.reason}" if outcome.reason else "")


def tolerances_for(tolerances: Mapping[str, Any], comparison: Any) -> dict[str, Any]:
    """The case's tolerances that apply to one output: an integer output (i32 of an integer op) is judged by
    the integer metrics and allowances only, exact by default; a float output by all of them."""
    from e2egen import metrics

    if not comparison.is_integer:
        return dict(tolerances)
    return {k: v for k, v in tolerances.items() if k in metrics.INTEGER_METRIC_NAMES or k in metrics.ALLOWANCE_NAMES}


def describe(outcome: Outcome) -> str:
    """The text a person reads for one case: header, report, repro."""
    case = outcome.case
    head = f"{case.id}  [{outcome.status.upper()}]  seed={case.seed} device={outcome.device}"
    lines = [head, f"catalogue: {case.location}" if case.location else ""]
    if outcome.reason:
        lines.append(f"reason: {outcome.reason}")
    if outcome.report and outcome.report != outcome.reason:
        lines.append(outcome.report)
    if outcome.timings:
        lines.append("time: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in outcome.timings.items()))
    lines.append(f"repro: {outcome.repro}")
    return "\n".join(line for line in lines if line)
