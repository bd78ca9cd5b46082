"""The failures a report leads with: new ones first, then those still failing, each with its reason in one line.

The one-line reason is built from what the record holds, not from the free text alone: the verdict's failed
metrics (`failures`: metric, value, tolerance, ratio) with the worst element's position from `comparison`, the
requirements the measured arithmetic broke (their `require.KEY = "…"` in the reason, the measured findings
from `arithmetic`), and the phase the case ended in. The free text (generator.execute builds it: a verdict
summary, "kernel failed: …", "error while running the case: Name: …", "timed out after …", probe findings
that no arithmetic explains, up to thousands of characters) is kept whole for the details.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from e2egen.generator.execute import explain_command
from e2egen.nightly.records import CaseRecord
from e2egen.nightly.report.compare_runs import RunComparison
from e2egen.runner.arithmetic.requirements import UNEXPLAINED_FINDING

ONE_LINE = 160  # characters of a one-line reason; the rest is in the details

# Where a case ended outside its test body, as the first words of its reason (records.Phase).
PHASE_WORDS = {
    "setup": "failed in pytest's setup",
    "teardown": "failed in pytest's teardown",
    "collect": "its test module did not import",
    "crash": "the worker process crashed",
    "not-run": "never finished: the pytest process died first",
}
_REQUIREMENT = re.compile(r'the case requires (?:rounding to )?(\S+?)(?: kept)? \(require\.(\w+) = "([^"]*)"\)')
_NAN = re.compile(r"the kernel returned NaN(?: in (\S+))? where the reference is a number \((\d+) elements?, first at (\([^)]*\))\)")
_RAISED = re.compile(r"error while running the case: ([A-Za-z_][\w.]*(?:\([^)]*\))?): (.*)")


@dataclass(frozen=True)
class FailureItem:
    record: CaseRecord
    new: bool  # not failing in the run compared against (or no such run: False)
    before: str  # the case's status in that run, in words

    @property
    def summary(self) -> str:
        return one_line_reason(self.record)

    @property
    def explain(self) -> str:
        """The command that reruns the case under reference variants and names the likely cause."""
        return explain_command(self.record.repro)


@dataclass(frozen=True)
class FailureList:
    items: tuple[FailureItem, ...]  # new first, then still failing; at most `limit`
    total: int
    new: int  # of the total
    compared: bool  # whether there was a run to tell new from still failing

    @property
    def left_out(self) -> int:
        return self.total - len(self.items)

    @property
    def left_out_new(self) -> int:
        return self.new - sum(item.new for item in self.items)


def failure_list(failures: Sequence[CaseRecord], comparison: RunComparison | None, limit: int) -> FailureList:
    """`failures` (worst first) as the report lists them: new ones first, then still failing, at most `limit`."""
    if comparison is None:
        items = [FailureItem(r, False, "no earlier run") for r in failures]
    else:
        before = {c.case_id: c.before for c in comparison.new_failures}
        new = [FailureItem(r, True, before[r.case_id].status if before[r.case_id] else "not run (a new case)")
               for r in failures if r.case_id in before]
        still = [FailureItem(r, False, "failed") for r in failures if r.case_id not in before]
        items = new + still
    return FailureList(tuple(items[:limit]), len(items), sum(i.new for i in items), comparison is not None)


def one_line_reason(record: CaseRecord) -> str:
    """Why the case failed, in words and one line: what broke, by how much, where."""
    reason = " ".join(record.reason.split())
    if record.phase in PHASE_WORDS:
        reason = reason.removeprefix("crashed: ")  # the recorder's word for a crash, which PHASE_WORDS says already
        return clip(f"{PHASE_WORDS[record.phase]}: {reason}" if reason else PHASE_WORDS[record.phase])
    parts = []
    if UNEXPLAINED_FINDING in reason:
        parts.append("the arithmetic probes got results no rounding explains (a kernel bug)")
    parts += [_requirement_words(key, needed, required, record.arithmetic)
              for needed, key, required in _REQUIREMENT.findall(reason)]
    nan = _NAN.search(reason)
    if nan:
        output, count, first = nan.groups()
        parts.append(f"returned NaN{f' in {output}' if output else ''} where the reference is a number "
                     f"({_count(int(count), 'element')}, first at {first})")
    failed = sorted((f for f in record.failures if not (nan and f.get("metric") == "nan_mismatch")),  # said above
                    key=lambda f: -_number(f.get("ratio")))
    if failed:
        parts.append(_metric_words(failed[0], record))
        if len(failed) > 1:
            parts.append(f"{_count(len(failed) - 1, 'more metric')} over tolerance")
    if parts:
        return clip("; ".join(parts))
    raised = _RAISED.match(reason)
    if raised:
        return clip(f"raised {raised.group(1)}: {raised.group(2)}")
    if reason.startswith("error while judging the arithmetic: "):
        return clip("e2egen could not judge the measured arithmetic: " + reason.split(": ", 1)[1])
    return clip(reason) if reason else "failed without a recorded reason"


def _metric_words(failure: Mapping[str, Any], record: CaseRecord) -> str:
    """One failed metric in words: "bound exceeded 3.2× at element (4, 17)", "3 elements NaN …"."""
    metric = str(failure.get("metric", "?"))
    value, tolerance, ratio = (_number(failure.get(k)) for k in ("value", "tolerance", "ratio"))
    where = _position(record, metric)
    at = f" at element {where}" if where else ""
    first = f", first at {where}" if where else ""
    dtype = record.parts.dtype
    counts = {
        "nan_mismatch": f"{_count(int(value), 'element')} NaN where the reference is a number, or the reverse{first}",
        "inf_mismatch": f"{_count(int(value), 'element')} infinite where the rounded reference is finite, or of the "
                        f"wrong sign{first}",
        "overflow": f"{_count(int(value), 'exact result')} beyond {dtype}'s largest value{first}: narrow the input range",
        "mismatches": f"{_count(int(value), 'element')} differ from the exact result{first}",
    }
    if metric in counts:
        allowed = f" ({tolerance:g} allowed)" if tolerance > 0 else ""
        return counts[metric] + allowed
    if metric == "bound_ratio":  # the value itself says how far past its bound the worst element is
        return f"bound exceeded {_times(value)}{at}" + (f" (tolerance {tolerance:g}×)" if tolerance != 1 else "")
    if metric in ("bound_rms", "bias_z", "rounding_rms"):  # aggregates: no element is to blame
        return f"{metric} {_times(ratio)} its tolerance ({value:.3g} > {tolerance:g})"
    return f"{metric} {_times(ratio)} its tolerance ({value:.3g} > {tolerance:g}){at}"


def _requirement_words(key: str, needed: str, required: str, arithmetic: Mapping[str, Any] | None) -> str:
    """A broken requirement as "accumulates in f16 where the catalogue requires f32"."""
    findings = (arithmetic or {}).get("findings") if isinstance(arithmetic, Mapping) else None
    measured = _measured(key, findings) if isinstance(findings, Mapping) else None
    wanted = {"rounding": "rounding to nearest", "subnormals": "subnormals kept"}.get(key, needed)
    if measured is None:
        return f"breaks require.{key} = \"{required}\" (the catalogue requires {wanted})"
    return f"{measured} where the catalogue requires {wanted}"


def _measured(key: str, findings: Mapping[str, Any]) -> str | None:
    try:
        from e2egen.runner.arithmetic.model import Arithmetic  # torch-free

        arithmetic = Arithmetic.from_table(findings)
    except (ValueError, TypeError):  # findings of another e2egen version: the reason's words stand
        return None
    return {
        "acc": f"accumulates in {arithmetic.acc_name}",
        "inputs": arithmetic.describe_inputs(),
        "rounding": f"rounds {arithmetic.rounding}",
        "compute": f"computes in {arithmetic.compute}",
        "subnormals": "flushes subnormals",
    }.get(key)


def _position(record: CaseRecord, metric: str) -> str:
    worst = ((record.comparison or {}).get("worst") or {}).get(metric)
    position = worst.get("position") if isinstance(worst, Mapping) else None
    if not isinstance(position, (list, tuple)) or not position:
        return ""
    return "(" + ", ".join(str(i) for i in position) + ")"


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def _times(ratio: float) -> str:
    if math.isinf(ratio):
        return "∞×"
    return f"{ratio:.2g}×" if ratio < 10 else f"{ratio:,.0f}×"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def clip(text: str, limit: int = ONE_LINE) -> str:
    """One line of at most `limit` characters, cut at a word with "…"."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"
