"""Run one case end to end: inputs, kernel, reference, compare, verdict.

Besides its metrics, a case judges the kernel's measured arithmetic against
its requirements (the catalogue's `require`): a requirement broken fails the
case unless an `[[accept]]` entry covers the device, impl and cell.

Everything a case can do wrong ends here as an Outcome (passed, failed or
skipped, with the reason and a repro command), never as an exception, so a
sweep goes on after a crashing kernel: a kernel that raises (SystemExit
included) fails its case, one that declines (KernelDeclined) skips it, one
that runs past the time limit fails with "timed out after N s". Only a real
Ctrl-C (KeyboardInterrupt from a SIGINT) goes through.

Time limits: `execute(case, timeout=S)` limits the case itself (SIGALRM, in
the main thread), as `e2egen run --timeout` does. Under pytest the limit is
pytest-timeout's (generator.plugin gives every case its limit as a
`timeout` marker); `timed_out` turns its expiry into the same Outcome.
"""
from __future__ import annotations

import signal
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Literal, Mapping, get_args

from e2egen.generator.cases import DEFAULT_TIMEOUT, Case
from e2egen.runner.arithmetic.requirements import UNEXPLAINED, UNEXPLAINED_FINDING, Acceptance, Violation, ViolationKey
from e2egen.runner.errors import CaseTimedOut, exception_text, format_seconds
from e2egen.runner.safe_text import clipped, safe_text

if TYPE_CHECKING:  # torch: `e2egen gen` and collecting a suite never load it
    import torch

    from e2egen.metrics.comparison import FloatComparison, IntegerComparison
    from e2egen.metrics.verdict import Verdict
    from e2egen.runner.arithmetic.lookup import Measured
    from e2egen.runner.problem import Problem
    from e2egen.runner.run import RunResult

    Comparison = FloatComparison | IntegerComparison

# How a case ended; a nightly record's status is the same set.
CaseStatus = Literal["passed", "failed", "skipped"]
CASE_STATUSES: tuple[CaseStatus, ...] = get_args(CaseStatus)


# The most characters of each text an Outcome keeps (runner.safe_text.clipped): a reason is one line of a table
# or a terminal; a report holds tables and a traceback.
_TEXT_LIMITS = {"reason": 2_000, "report": 200_000, "repro": 8_000, "device": 200}


@dataclass(frozen=True)
class Outcome:
    """What running one case gave: built whole once the case has ended (dataclasses.replace for a variant)."""

    case: Case
    status: CaseStatus
    reason: str
    device: str
    repro: str
    report: str = ""
    comparison: Comparison | None = None  # of the primary output, when the kernel ran
    verdict: Verdict | None = None  # of the primary output, when compared
    timings: Mapping[str, float] = field(default_factory=dict)
    outputs: Mapping[str, tuple[Comparison, Verdict]] = field(default_factory=dict)  # every output, the primary first
    arithmetic: Measured | None = None  # the kernel's arithmetic the case was judged by
    broken: tuple[ViolationKey, ...] = ()  # requirements the measured arithmetic broke (unexcused)
    accepted: tuple[tuple[ViolationKey, Acceptance], ...] = ()  # (requirement key, the entry that excuses it)
    loosened: tuple[str, ...] = ()  # what the case's policy loosens (generator.defaults)

    def __post_init__(self):
        # Where a kernel's text enters every report, record and store: an exception message holding lone
        # surrogates (an undecodable file name) is made encodable here, once (runner.safe_text).
        for name in ("reason", "report", "repro", "device"):
            object.__setattr__(self, name, clipped(safe_text(getattr(self, name)), _TEXT_LIMITS[name]))

    @property
    def failure_kind(self) -> str:
        """What failed, as the first line of a report says it ("" when nothing did)."""
        if self.status != "failed":
            return ""
        numerics = self.verdict is not None and any(not v.passed for _, v in self.outputs.values())
        if self.broken and numerics:
            return "requirement broken by the measured arithmetic, and numerics outside the bound"
        if self.broken:
            return "requirement broken by the measured arithmetic (numerics within the bound)"
        if numerics:
            return "numerics outside the bound"
        if self.reason.startswith("timed out"):
            return "timed out"
        if self.reason.startswith("kernel failed"):
            return "the kernel failed"
        return "error while running the case"

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def repro_command(case: Case, device: str | None, catalogue: str | None = None) -> str:
    """The command that reruns exactly this case, from any working directory: it names the catalogue by its
    absolute path. The command is this interpreter's e2egen, as
    e2egen.invocation names it, so that the line works as printed where no environment is activated."""
    from e2egen.invocation import e2egen_command

    parts = [e2egen_command(), "run", _quote(case.id), "--seed", str(case.seed)]
    if device:
        parts += ["--device", device]
    catalogue_path = catalogue_argument(catalogue)
    if catalogue_path:
        parts += ["--catalogue", _quote(catalogue_path)]
    return " ".join(parts)


def explain_command(repro: str) -> str:
    """The command that reruns a case under reference variants (`e2egen explain`): its repro with `run` for
    `explain`; "" for a repro that is no `e2egen run` line (a Python API call)."""
    return repro.replace(" run ", " explain ", 1) if " run " in repro else ""


def catalogue_argument(catalogue: str | None) -> str | None:
    """The catalogue as a repro names it: its absolute path (even configs.toml: the line must work anywhere)."""
    if not catalogue:
        return None
    path = Path(catalogue)
    try:
        return str(path.resolve())
    except OSError:  # no working directory any more: keep what was given
        return str(path)


def _quote(text: str) -> str:
    from e2egen.invocation import shell_quote  # the one quoting rule of printed commands

    return shell_quote(text)


def execute(case: Case, device: str | None = None, catalogue: str | None = None,
            timeout: float | None = None, warm_kernel: bool = True, repro: str | None = None) -> Outcome:
    """Run `case` on `device` (None: CUDA when present, else CPU; E2E_DEVICE overrides).

    warm_kernel: the recorded kernel time is a warm call (runner.run); False: its first call, no repeat.

    timeout: seconds the case may take (inputs, probes, kernel, reference, compare), enforced here with
    SIGALRM (main thread only); None: no limit here (under pytest, pytest-timeout's applies).

    repro: the line that reruns the case where no catalogue names it (e2egen.api: the Python call); None:
    the `e2egen run` command (repro_command).
    """
    from e2egen import runner

    try:
        torch_device = runner.select_device(device)
    except runner.Skip as skip:
        return Outcome(case, "skipped", skip.reason, str(device), repro or repro_command(case, device, catalogue))
    device_name = torch_device.type
    repro = repro or repro_command(case, device_name, catalogue)
    timings: dict[str, float] = {}  # filled as the case goes: a time-out reports what had been timed
    try:
        with time_limit(timeout):
            return _run_case(case, torch_device, repro, timings, warm_kernel)
    except CaseTimedOut as expired:
        return timed_out(case, device_name, catalogue, expired.seconds, timings, repro)


def _run_case(case: Case, torch_device: torch.device, repro: str, timings: dict[str, float],
              warm_kernel: bool = True) -> Outcome:
    """What running `case` gives; `timings` gets each stage's time as it ends. What the kernel changed in the
    process's global state (put back after each call: runner.isolation) is named in the report."""
    from e2egen.runner import isolation

    isolation.start_case()  # the run's initial state, and no notes left from the last case
    outcome = _run_case_itself(case, torch_device, repro, timings, warm_kernel)
    note = isolation.describe_changes(isolation.changes_noted())
    if not note:
        return outcome
    return replace(outcome, report=note + ("\n" + outcome.report if outcome.report else ""),
                   reason=outcome.reason + (f"; {note}" if outcome.reason else "") if outcome.status == "failed"
                   else outcome.reason)


def _run_case_itself(case: Case, torch_device: torch.device, repro: str, timings: dict[str, float],
                     warm_kernel: bool = True) -> Outcome:
    from e2egen import runner

    def failed(reason: str, report: str) -> Outcome:
        return Outcome(case, "failed", reason, torch_device.type, repro, report=report)

    try:
        problem = case.problem()
        result = runner.run(
            problem, impl=case.impl, device=torch_device,
            reference=case.reference,
            bound=case.bound,
            measure=True,
            warm_kernel=warm_kernel,
        )
    except runner.Skip as skip:
        return Outcome(case, "skipped", skip.reason, torch_device.type, repro)
    except runner.KernelFailure as failure:
        reason = f"kernel failed: {failure.reason}"
        return failed(reason, reason)
    except (Exception, SystemExit) as err:  # a bug anywhere below (or a stray sys.exit) must not kill the sweep
        name = f"SystemExit({err.code!r})" if isinstance(err, SystemExit) else type(err).__name__
        reason = f"error while running the case: {name}: {exception_text(err)}"
        return failed(reason, reason + "\n" + traceback.format_exc())
    timings.update(result.timings)
    loosened = tuple(policy_loosened(case, problem))
    outcome = _judge_outputs(case, result, repro, timings, loosened)
    if result.arithmetic is not None:
        try:
            outcome = _judge_arithmetic(outcome, result.arithmetic)
        except Exception as err:  # a bug in judging must not kill the sweep either
            reason = f"error while judging the arithmetic: {type(err).__name__}: {err}"
            return replace(outcome, status="failed", reason=reason,
                           report=reason + "\n" + traceback.format_exc() + outcome.report)
    return _judge_with_verifier(outcome, result)


def _judge_with_verifier(outcome: Outcome, result: RunResult) -> Outcome:
    """e2egen's verdict (metrics and requirements) and, when the case names one, a second verifier's on the
    primary output (metrics.rocmlir_verifier): `verifier.decides` says which fails the case, both are
    reported, and where they differ the reason says why."""
    options = outcome.case.verifier
    if options.kind == "none":
        return outcome
    from e2egen.metrics.rocmlir_verifier import disagreement, verify

    output = result.primary
    verdict = verify(output.ref, output.out, output.dtype, options)
    e2egen_passed = outcome.status == "passed"
    bound_ratio = getattr(outcome.comparison, "bound_ratio", None)
    why = disagreement(verdict, e2egen_passed, bound_ratio)
    deciding = {"both": "both verdicts (either failing fails the case)", "verifier": "rocMLIR's verifier alone",
                "e2egen": "e2egen's verdict alone"}[options.decides]
    lines = [verdict.report(), f"decided by: {deciding} (verifier.decides = \"{options.decides}\")"]
    if why:
        lines.append(f"the verdicts differ: {why}")
    failed = ((options.decides != "e2egen" and not verdict.passed)
              or (options.decides != "verifier" and not e2egen_passed))
    reasons = []
    if not verdict.passed and options.decides != "e2egen":
        reasons.append(verdict.summary())
    if not e2egen_passed and options.decides != "verifier":
        reasons.append(outcome.reason)
    if failed and why:
        reasons.append(why)
    return replace(outcome, status="failed" if failed else "passed", reason="; ".join(reasons) if failed else "",
                   report="\n".join(lines) + ("\n" + outcome.report if outcome.report else ""))


def _judge_outputs(case: Case, result: RunResult, repro: str, timings: dict[str, float],
                   loosened: tuple[str, ...]) -> Outcome:
    """The Outcome of a run by its outputs' metrics alone: each output compared and judged by the case's
    tolerances; the case passes when every output does. timings["compare"]: the comparisons' time."""
    from e2egen import metrics  # with torch: loaded when a case runs, so collecting a suite stays fast

    start = time.perf_counter()
    outputs: dict[str, tuple[Comparison, Verdict]] = {}
    for name, output in result.outputs.items():
        rounding = result.arithmetic.arithmetic.rounding if result.arithmetic is not None else "nearest-even"
        comparison = metrics.compare(output.ref, output.out, dtype=output.dtype, ftz=result.reference.ftz, bound=output.compare_bound,
                                     rounding=rounding)
        outputs[name] = (comparison, comparison.check(tolerances_for(case.tolerances, comparison)))
    timings["compare"] = time.perf_counter() - start
    comparison, verdict = outputs[result.primary.name]
    failed = [name for name, (_, v) in outputs.items() if not v.passed]
    if len(outputs) == 1:
        reason, report = (verdict.summary if failed else ""), str(verdict)
    else:  # each output judged alone; the case passes when every output does
        reason = "; ".join(f"{name}: {outputs[name][1].summary}" for name in failed)
        report = "\n".join(f"output {name}:\n{v}" for name, (_, v) in outputs.items())
    seen = [text for name in failed for text in _named_causes(result, name) if text]
    if seen:  # what the kernel did, before the metrics it broke
        reason = "; ".join(seen) + f"; {reason}"
    return Outcome(case, "failed" if failed else "passed", reason, result.device, repro, report=report,
                   comparison=comparison, verdict=verdict, timings=dict(timings), outputs=outputs,
                   arithmetic=result.arithmetic, loosened=loosened)


def _flushed_results(result: RunResult, name: str) -> str:
    """"the kernel returned 0 where the exact result is subnormal in T (N elements, first at (i, j)): it flushes
    subnormals ...", or "": a result that rounds to a nonzero subnormal of the output format came back 0. Not
    said when the reference flushes too (reference.ftz), since compare then accepts those zeros."""
    import torch

    from e2egen import metrics

    output = result.outputs[name]
    out, ref = output.out, output.ref
    if result.reference.ftz or not (out.is_floating_point() and ref.is_floating_point()) or out.shape != ref.shape:
        return ""
    fmt = metrics.get_format(output.dtype)
    ref = ref.to("cpu")
    subnormal = (ref.abs() < fmt.min_normal) & (ref.abs() > fmt.min_subnormal / 2)
    where = subnormal & (out.detach().to("cpu", torch.float64) == 0)
    count = int(where.sum())
    if not count:
        return ""
    first = tuple(int(i) for i in where.nonzero()[0].tolist())
    return (f"the kernel returned 0 where the exact result is subnormal in {output.dtype} ({count} element"
            f"{'s' if count > 1 else ''}, first at {first}): it flushes subnormals (reference.ftz = true accepts that)")


def _named_causes(result: RunResult, name: str) -> tuple[str, ...]:
    """The causes said before the metrics: an unsaturated fp8 output (which its NaNs then need not repeat), NaNs,
    flushed subnormals."""
    unsaturated = _unsaturated(result, name)
    return (unsaturated, "" if unsaturated else _unexpected_nans(result, name), _flushed_results(result, name))


def _unsaturated(result: RunResult, name: str) -> str:
    """"the kernel returned NaN or inf where its fp8 output saturates (N elements, first at (i, j)): ..." or "":
    the contract holds an fp8 output to ± its largest finite value (runner/dtypes.SATURATING_OUT_DTYPES)."""
    import torch

    from e2egen import metrics
    from e2egen.runner.dtypes import SATURATING_OUT_DTYPES

    output = result.outputs[name]
    if output.dtype not in SATURATING_OUT_DTYPES or output.out.shape != output.ref.shape:
        return ""
    largest = metrics.get_format(output.dtype).max
    ref = output.ref.to("cpu")
    where = (ref.abs() == largest) & ~torch.isfinite(output.out.detach().to("cpu", torch.float64))
    count = int(where.sum())
    if not count:
        return ""
    first = tuple(int(i) for i in where.nonzero()[0].tolist())
    return (f"the kernel returned NaN or inf where its {output.dtype} output saturates ({count} element"
            f"{'s' if count > 1 else ''}, first at {first}): it does not saturate to ±{largest:g}, as the contract's "
            f"satfinite conversion does")


def _unexpected_nans(result: RunResult, name: str) -> str:
    """"the kernel returned NaN where the reference is a number (N elements, first at (i, j))", or "". Any NaN
    counts, whatever its payload or sign."""
    import torch

    output = result.outputs[name]
    out, ref = output.out, output.ref
    if not (out.is_floating_point() and ref.is_floating_point()) or out.shape != ref.shape:
        return ""
    where = torch.isnan(out.detach().to("cpu", torch.float64)) & ~torch.isnan(ref.to("cpu"))
    count = int(where.sum())
    if not count:
        return ""
    first = tuple(int(i) for i in where.nonzero()[0].tolist())
    what = "the kernel returned NaN" if len(result.outputs) == 1 else f"the kernel returned NaN in {name}"
    return f"{what} where the reference is a number ({count} element{'s' if count > 1 else ''}, first at {first})"


def timed_out(case: Case, device: str | None, catalogue: str | None, seconds: float,
              timings: Mapping[str, float] | None = None, repro: str | None = None) -> Outcome:
    """The Outcome of a case stopped at its time limit: failed, "timed out after N s", with its repro."""
    reason = f"timed out after {format_seconds(seconds)} s"
    report = (f"{reason}: the case (kernel, probes, reference and comparison together) did not finish within its "
              f"time limit (catalogue `timeout`, or --timeout; default {format_seconds(DEFAULT_TIMEOUT)} s)")
    return Outcome(case, "failed", reason, str(device), repro or repro_command(case, device, catalogue), report=report,
                   timings=dict(timings or {}))


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise CaseTimedOut(seconds) in this (main) thread when the block runs longer than `seconds`.

    A no-op for None, off the main thread, or without SIGALRM. Python code (and C code that returns to
    Python) is interrupted; the timer in place before is put back after the block.
    """
    if not seconds or not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise CaseTimedOut(seconds)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def judge_case(case: Case, measured: Measured | None) -> tuple[list[Violation], list[tuple[Violation, Acceptance]]]:
    """(requirements the measured arithmetic breaks that fail the case, those an accepted deviation excuses
    with the entry: the catalogue's [[accept]], else e2egen's knowledge of torch's kernels); nothing when the
    arithmetic was assumed, not measured."""
    from e2egen.runner.arithmetic.requirements import judge
    from e2egen.runner.arithmetic.torch_deviations import accepted_for

    if measured is None or not measured.measured:
        return [], []
    key = measured.device
    return judge(case.require, accepted_for(key.impl, case.accepted), measured.arithmetic, case.dtype, key.device,
                 key.impl, str(measured.cell), dict(key.versions))


def _judge_arithmetic(outcome: Outcome, measured: Measured) -> Outcome:
    """`outcome` failed for each requirement the measured arithmetic breaks that no accepted deviation covers;
    the report starts with the arithmetic, then each broken and each accepted requirement."""
    lines = [f"arithmetic: {measured.arithmetic.describe()} ({measured.origin})"]
    if not measured.measured:  # nothing was measured: there is nothing to hold against the requirements
        return replace(outcome, report="\n".join(lines + ([outcome.report] if outcome.report else [])))
    failing, excused = judge_case(outcome.case, measured)
    lines += [f"REQUIREMENT BROKEN: {v.message}" for v in failing]
    lines += [f"accepted deviation: {v.message} — {entry.describe()}" for v, entry in excused]
    judged = replace(
        outcome, report="\n".join(lines + ([outcome.report] if outcome.report else [])),
        accepted=tuple((v.key, entry) for v, entry in excused),
        loosened=outcome.loosened + tuple(f"[[accept]] cells = \"{entry.cells}\" excuses require.{v.key}"
                                          for v, entry in excused if not entry.shipped))
    if not failing:
        return judged
    broken = "arithmetic: " + "; ".join(_reason_parts(failing))
    return replace(judged, status="failed", broken=tuple(v.key for v in failing),
                   reason=broken + (f"; {outcome.reason}" if outcome.reason else ""))


def _reason_parts(failing: list[Violation]) -> list[str]:
    """The broken requirements as a reason line says them: the probes' unexplained outcomes, which can run to
    thousands of characters, as one phrase with their count (the report lists each); the others in full."""
    unexplained = sum(v.key == UNEXPLAINED for v in failing)
    parts = [v.message for v in failing if v.key != UNEXPLAINED]
    if unexplained:
        count = f"{unexplained} findings" if unexplained > 1 else "1 finding"
        parts.insert(0, f"{UNEXPLAINED_FINDING} (a kernel bug; {count} in the report)")
    return parts


def policy_loosened(case: Case, problem: Problem) -> list[str]:
    """What the case's catalogue loosens against e2egen's default policy (a default metric the op itself
    leaves out, as applicable_tolerances decides, is the op's choice, not the catalogue's)."""
    from e2egen.generator.cases import applicable_tolerances, integer_output
    from e2egen.generator.defaults import DEFAULT_TOLERANCES, loosened

    kept = applicable_tolerances(dict(DEFAULT_TOLERANCES), problem.spec.shared_rounding(problem.params, problem.direction),
                                 integer_output(problem), problem.spec.judged_by_intervals(problem.params))
    return loosened(case.tolerances, case.require, set(DEFAULT_TOLERANCES) - set(kept))


def tolerances_for(tolerances: Mapping[str, float], comparison: Comparison) -> dict[str, float]:
    """The case's tolerances that apply to one output: an integer output (i32 of an integer op) is judged by
    the integer metrics and allowances only, exact by default; a float output by all of them."""
    from e2egen import metrics

    if not comparison.is_integer:
        return dict(tolerances)
    return {k: v for k, v in tolerances.items() if k in metrics.INTEGER_METRIC_NAMES or k in metrics.ALLOWANCE_NAMES}


def describe(outcome: Outcome) -> str:
    """The text a person reads for one case: header (what failed, first), policy, report, repro, next steps."""
    case = outcome.case
    status = outcome.status.upper() + (f": {outcome.failure_kind}" if outcome.failure_kind else "")
    head = f"{case.id}  [{status}]  seed={case.seed} device={outcome.device}"
    lines = [head, f"catalogue: {case.location}" if case.location else ""]
    if outcome.loosened:
        lines.append("policy: loosened by the catalogue: " + "; ".join(outcome.loosened))
    if outcome.reason:
        lines.append(f"reason: {outcome.reason}")
    if outcome.report and outcome.report != outcome.reason:
        lines.append(outcome.report)
    if outcome.timings:
        lines.append("time: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in outcome.timings.items()))
    lines.append(f"repro: {outcome.repro}")
    lines += next_steps(outcome)
    return "\n".join(line for line in lines if line)


def next_steps(outcome: Outcome) -> list[str]:
    """What to do about a failed case: the command that explains it and, for a requirement its measured
    arithmetic broke, the [[accept]] entry that would accept the deviation (its reason left to fill)."""
    if outcome.status != "failed":
        return []
    steps = [f"next: {explain_command(outcome.repro)}   (reruns it under reference variants and names the likely cause)"]
    acceptable = [k for k in dict.fromkeys(outcome.broken) if k != UNEXPLAINED]
    if acceptable and outcome.arithmetic is not None:
        key = outcome.arithmetic.device
        steps += ["or, if this arithmetic is acceptable for this kernel, accept it in the catalogue:",
                  "  [[accept]]", f'  device = "{key.device}"', f'  impl = "{key.impl}"',
                  f'  cells = "{outcome.arithmetic.cell}"',
                  "  require = [" + ", ".join(f'"{k}"' for k in acceptable) + "]",
                  '  reason = ""  # required: why this arithmetic is acceptable']
    return steps
