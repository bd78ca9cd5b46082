"""A kernel matrix: correct and planted kernels of some ops, each judged on a set of geometries, ranges, formats and
seeds by e2egen's default verdict (`e2egen.judge`, as a generated case judges) and, on the very same output, by
torch.testing.assert_close with the dtype's default tolerances. The evidence studies of new ops and directions
(reduction_backward_evidence.py, channel_norm_evidence.py) are configurations of it.

A correct kernel must never fail. A planted bug counts where it is one (`bug_dtypes`: an f32 running sum is a
correct f32 kernel; `bug_where`: an unsaturated conversion where nothing saturates is the correct one) and, beside every run, whether its output lies more than an ulp of its format from the exact
result somewhere ("beyond an ulp"): there a verdict can see it at all.
"""
from __future__ import annotations

import platform
from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch

from e2egen import metrics
from e2egen.api import judge
from e2egen.runner import run
from e2egen.runner.dtypes import storage_dtype

DTYPES = ("f32", "f16", "bf16")
REQUIREMENT_NAMED = "(require."  # in a reason: the requirement a kernel's measured arithmetic breaks, named


@dataclass(frozen=True)
class Matrix:
    """What a study runs: per op its kernels (module path + name; "torch" is the op's default), the geometries
    (name -> (shape keys, layout)) and ranges, with a direction."""

    title: str
    command: str
    direction: str
    module: str  # "package.module:" the kernels are named in
    correct: Mapping[str, tuple[str, ...]]  # op -> correct kernels besides torch's
    wrong: Mapping[str, tuple[str, ...]]  # op -> planted bugs
    cases: Mapping[str, Mapping[str, tuple[dict, str]]]  # op -> case name -> (shape keys, layout)
    ranges: Mapping[str, tuple[float, float]]
    ranges_of: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # op -> the ranges it runs on (default all)
    dtypes: tuple[str, ...] = DTYPES
    bug_dtypes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    bug_where: Mapping[str, Callable[[str, str], bool]] = field(default_factory=dict)  # kernel -> (case, range) it is one in
    within_correct_error: Mapping[str, str] = field(default_factory=dict)  # kernel -> a case it may pass, and why
    # (op, correct kernel) -> where it fails as a documented finding about it (case, range, dtype): counted apart
    findings: Mapping[tuple[str, str], Callable[[str, str, str], bool]] = field(default_factory=dict)
    closing: str = ""  # why the bugs left uncaught cannot be seen


@dataclass
class Tally:
    runs: int = 0
    failed: int = 0  # by e2egen's default verdict
    peer_failed: int = 0  # by assert_close
    visible: int = 0  # runs whose output is more than an ulp from the exact result somewhere
    caught_visible: int = 0
    peer_caught_visible: int = 0
    misses: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # a correct kernel's failed runs, with their reasons
    finding_runs: int = 0  # runs where the kernel's failure is a documented finding (Matrix.findings)
    finding_failed: int = 0
    declined: list[str] = field(default_factory=list)  # runs the kernel declined (KernelDeclined): not judged


def _beyond_an_ulp(out: torch.Tensor, ref: torch.Tensor, dtype: str) -> bool:
    """Some element more than an ulp of `dtype` from the exact result, or not a number where it is one."""
    out64 = out.double()
    return bool(((out64 - ref).abs() > metrics.ulp(ref, dtype)).any() or (~torch.isfinite(out64) & torch.isfinite(ref)).any())


def _peer_fails(out: torch.Tensor, ref: torch.Tensor, dtype: str) -> bool:
    stored = out if out.dtype == storage_dtype(dtype) else out.to(storage_dtype(dtype))
    try:
        torch.testing.assert_close(stored, ref.to(stored.dtype))
    except AssertionError:
        return True
    return False


def evaluate(matrix: Matrix, seeds: int) -> dict[tuple[str, str], Tally]:
    """(op, kernel) -> its tally over every case, range, dtype and seed."""
    tallies: dict[tuple[str, str], Tally] = {}
    for op, cases in matrix.cases.items():
        for name in ("torch", *matrix.correct.get(op, ()), *matrix.wrong.get(op, ())):
            tally = tallies.setdefault((op, name), Tally())
            impl = None if name == "torch" else matrix.module + name
            for case, (shape, layout) in cases.items():
                for range_name, data_range in matrix.ranges.items():
                    if range_name not in matrix.ranges_of.get(op, matrix.ranges):
                        continue
                    if not matrix.bug_where.get(name, lambda *_: True)(case, range_name):
                        continue
                    for dtype in matrix.bug_dtypes.get(name, matrix.dtypes):
                        for seed in range(1, seeds + 1):
                            outcome = judge(impl, op, shape, dtype, direction=matrix.direction, layout=layout,
                                            data_range=data_range, seed=seed)
                            if outcome.status == "skipped":
                                tally.declined.append(f"{case} {range_name} {dtype} seed {seed}: {outcome.reason}")
                                continue
                            result = run(outcome.case.problem(), impl=impl, device="cpu").primary
                            visible = _beyond_an_ulp(result.out, result.ref, dtype)
                            peer = _peer_fails(result.out, result.ref, dtype)
                            if matrix.findings.get((op, name), lambda *_: False)(case, range_name, dtype):
                                tally.finding_runs += 1
                                tally.finding_failed += not outcome.passed
                                continue
                            tally.runs += 1
                            tally.failed += not outcome.passed
                            tally.peer_failed += peer
                            tally.visible += visible
                            tally.caught_visible += visible and not outcome.passed
                            tally.peer_caught_visible += visible and peer
                            if visible and outcome.passed:
                                tally.misses.append(f"{case} {range_name} {dtype} seed {seed}")
                            if not outcome.passed and is_correct(matrix, op, name):
                                tally.failures.append(f"{case} {range_name} {dtype} seed {seed}: {outcome.reason}")
    return tallies


def is_correct(matrix: Matrix, op: str, name: str) -> bool:
    return name == "torch" or name in matrix.correct.get(op, ())


def render(matrix: Matrix, tallies: dict[tuple[str, str], Tally], seeds: int, seconds: float) -> str:
    geometries = "; ".join(f"{op}: {', '.join(cases)}" for op, cases in matrix.cases.items())
    lines = [f"# {matrix.title}", "",
             f"`{matrix.command} --seeds {seeds}` ({seconds:.0f} s; torch {torch.__version__}, {platform.machine()}). "
             f"Every kernel runs on its op's geometries ({geometries}), the ranges {', '.join(matrix.ranges)}, "
             f"{', '.join(matrix.dtypes)}, seeds 1–{seeds}, each judged by e2egen's default verdict (`e2egen.judge`) and by "
             "`torch.testing.assert_close` with the dtype's tolerances on the same output. A planted bug that is one "
             "in some formats or data only runs there. \"Beyond an ulp\": runs whose output lies more than an ulp of its "
             "format from the exact result somewhere.", "",
             "| op | kernel | kind | runs | e2egen fails | assert_close fails | beyond an ulp | e2egen catches of those "
             "| assert_close catches of those |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    correct, bugs, visible = [0, 0, 0], [0, 0, 0], [0, 0, 0]
    for (op, name), tally in tallies.items():
        kind = "correct" if is_correct(matrix, op, name) else "wrong"
        lines.append(f"| {op} | `{name}` | {kind} | {tally.runs} | {tally.failed} | {tally.peer_failed} | {tally.visible} "
                     f"| {tally.caught_visible} | {tally.peer_caught_visible} |")
        if kind == "correct":
            correct = [correct[0] + tally.runs, correct[1] + tally.failed, correct[2] + tally.peer_failed]
        else:
            bugs = [bugs[0] + tally.runs, bugs[1] + tally.failed, bugs[2] + tally.peer_failed]
            visible = [visible[0] + tally.visible, visible[1] + tally.caught_visible,
                       visible[2] + tally.peer_caught_visible]
    found = [(op, name, tally) for (op, name), tally in tallies.items() if tally.finding_runs]
    # a correct kernel that breaks a default requirement (computes in f16 where f32 is required) is named so
    named = sum(REQUIREMENT_NAMED in failure for tally in tallies.values() for failure in tally.failures)
    lines += ["", f"Correct kernels: {correct[1] - named} false failures in {correct[0]} runs (assert_close: {correct[2]})"
              + (f"; {named} more fail a default requirement the kernel does not meet, which their reasons name "
                 "(below)" if named else "")
              + ("; apart from them, " + "; ".join(f"{op} `{name}` failed {t.finding_failed} of {t.finding_runs} runs "
                                                  "where that is a documented finding (below)" for op, name, t in found)
                 if found else "") + ".",
              f"Planted bugs: {bugs[1]} / {bugs[0]} runs caught (assert_close: {bugs[2]}); of the runs beyond an "
              f"ulp, {visible[1]} / {visible[0]} (assert_close: {visible[2]} / {visible[0]}).", ""]
    misses = [(op, name, miss) for (op, name), tally in tallies.items() if not is_correct(matrix, op, name)
              for miss in tally.misses]
    if misses:
        lines += ["Bugs beyond an ulp that passed:", ""] + [f"- {op} `{name}`: {miss}" for op, name, miss in misses] + [""]
    failures = [(op, name, failure) for (op, name), tally in tallies.items() for failure in tally.failures]
    if failures:
        lines += ["Correct kernels that failed, and why:", ""] + [f"- {op} `{name}`: {failure}"
                                                                  for op, name, failure in failures] + [""]
    declined = [(op, name, tally) for (op, name), tally in tallies.items() if tally.declined]
    if declined:
        lines += ["Runs a kernel declined (not judged, not counted above), and why:", ""] + [
            f"- {op} `{name}`: {len(tally.declined)} runs, e.g. {tally.declined[0]}" for op, name, tally in declined] + [""]
    if matrix.closing:
        lines += [matrix.closing, ""]
    return "\n".join(lines)
