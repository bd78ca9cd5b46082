"""Run one case end to end: inputs, kernel, reference, compare, verdict.

Everything a case can do wrong ends here as an Outcome (passed, failed or
skipped, with the reason and a repro command), never as an exception, so a
sweep goes on after a crashing kernel.
"""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Any

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
    comparison: Any = None  # metrics Comparison, when the kernel ran
    verdict: Any = None  # metrics Verdict, when compared
    timings: dict[str, float] = field(default_factory=dict)

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
            reference=runner.ReferenceOptions(**case.reference),
            bound=_bound_model(case),
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
    comparison = metrics.compare(result.ref, result.out, dtype=result.out_dtype, ftz=bool(case.reference.get("ftz")), bound=result.bound)
    verdict = comparison.check(case.tolerances)
    outcome.timings["compare"] = time.perf_counter() - start
    outcome.comparison, outcome.verdict = comparison, verdict
    outcome.status = "passed" if verdict.passed else "failed"
    outcome.reason = "" if verdict.passed else verdict.summary
    outcome.report = str(verdict)
    return outcome


def _bound_model(case: Case):
    from e2egen import runner

    if case.bound is None:
        return None
    b = case.bound
    return runner.BoundModel(lam=b["lambda"], acc=b["acc"], strict=b["strict"], c_out=b["c_out"])


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
