"""The kernels' arithmetic a run recorded, one row per (impl, device, cell), and what changed since another run.

Each case record carries the arithmetic of its cell (records.arithmetic_record):
where the findings came from (a shipped or cached profile, probed during the
run, or assumed where nothing could be measured) and the findings themselves
(Arithmetic.to_table()). A cell whose findings differ from the previous run's
for the same impl, device and cell is flagged: a driver, library or kernel
update changed how the kernel computes, and the bound follows the new
findings, so a tolerance can loosen without any metric moving.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from e2egen.nightly.records import CaseRecord

Key = tuple[str, str, str]  # (impl, device, cell)
BOOKKEEPING = ("probed_with", "notes")  # not findings: a change in them is no change of arithmetic


@dataclass(frozen=True)
class CellArithmetic:
    """The arithmetic one run recorded for one (impl, device, cell)."""

    impl: str
    device: str
    cell: str
    findings: Mapping[str, Any]  # Arithmetic.to_table()
    origin: str
    versions: Mapping[str, str]
    cases: int  # the run's cases of this cell
    variants: int = 1  # distinct findings among them (more than 1: the cases disagree)

    @property
    def key(self) -> Key:
        return (self.impl, self.device, self.cell)

    @property
    def probed_now(self) -> bool:
        return self.origin.startswith("probed now")

    @property
    def measured(self) -> bool:
        return not self.origin.startswith("assumed")

    @property
    def words(self) -> str:
        return describe_findings(self.findings)

    @property
    def origin_words(self) -> str:
        """The origin as a report says it: "probed during this run; cached in …" for cells probed now."""
        if self.probed_now:
            rest = self.origin[len("probed now"):].lstrip(" ,;")
            text = "probed during this run; " + (rest or "cached")
        else:
            text = self.origin
        if self.variants > 1:
            text += f" ({self.variants} different findings among the run's {self.cases} cases of this cell)"
        return text


@dataclass(frozen=True)
class ArithmeticChange:
    """A cell whose findings differ from another run's for the same impl, device and cell."""

    now: CellArithmetic
    before: CellArithmetic
    against: str  # the other run's id
    differences: tuple[str, ...]  # "acc_bits 24 -> 11"

    @property
    def key(self) -> Key:
        return self.now.key

    @property
    def version_changes(self) -> tuple[str, ...]:
        old, new = self.before.versions, self.now.versions
        return tuple(f"{name} {old.get(name, '–')} -> {new.get(name, '–')}" for name in sorted(set(old) | set(new))
                     if old.get(name) != new.get(name))

    @property
    def text(self) -> str:
        """"profile changed since r1: acc_bits 24 -> 11, ..." with what else changed with it."""
        words = f"profile changed since {self.against}: {', '.join(self.differences)}"
        if self.before.measured != self.now.measured:
            words += f" (before: {self.before.origin}; now: {self.now.origin})"
        if self.version_changes:
            words += f"; versions: {', '.join(self.version_changes)}"
        return words


@dataclass(frozen=True)
class ArithmeticComparison:
    against: str
    changes: tuple[ArithmeticChange, ...]
    new: tuple[Key, ...]  # cells this run recorded and the other did not
    gone: tuple[Key, ...]

    def since(self, cell: CellArithmetic) -> str:
        """A row's word on the other run: changed (with the differences), new, or unchanged."""
        for change in self.changes:
            if change.key == cell.key:
                return change.text
        if cell.key in self.new:
            return f"new since {self.against}"
        return f"unchanged since {self.against}"


def describe_findings(findings: Mapping[str, Any]) -> str:
    """The findings in words (Arithmetic.describe()), or why they cannot be read.

    describe() ends with the first probe result no rounding explains, verbatim (a probe's output: up to
    thousands of characters); a report says how many there are, and shows them in the failures' details."""
    try:
        arithmetic = _arithmetic(findings)
        words = replace(arithmetic, unexplained=()).describe()
    except (ValueError, TypeError) as err:  # written by another e2egen version
        return f"(findings not readable here: {err})"
    count = len(arithmetic.unexplained)
    if count:
        words += (f"; UNEXPLAINED: {count} probe result{'s' if count != 1 else ''} no rounding explains "
                  "(a kernel bug; the probe output is in the details of the failures)")
    return words


# The findings as a person names them (runner.arithmetic.model.Arithmetic's fields); a field not listed keeps its name.
FINDING_WORDS = {
    "inputs": "inputs rounded to", "inputs_rounding": "input rounding", "acc_bits": "accumulator significand bits",
    "acc_bits_exact": "accumulator width exact", "groups": "partial sums per", "group_size": "group size",
    "reversed": "summed in reverse", "partials": "partials", "inner_bits": "partial sums' significand bits",
    "rounding": "final rounding", "subnormal_inputs": "subnormal inputs", "subnormal_outputs": "subnormal outputs",
    "special_values": "special values", "intermediate": "intermediate rounded to",
    "intermediate_rounding": "intermediate rounding", "compute": "computes in",
    "unexplained": "probe results no rounding explains",
}
VALUE_LIMIT = 60  # characters of one finding's value in a change: a probe's free text can run to thousands


def changed_fields(before: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """Each finding that differs, in words: "accumulator significand bits: 24 → 11"; probe bookkeeping left out,
    long texts (a probe's findings no rounding explains) cut short: the full text is in the details."""
    return [f"{FINDING_WORDS.get(name, name)}: {_value_words(before.get(name))} → {_value_words(now.get(name))}"
            for name in sorted(set(before) | set(now), key=_field_order)
            if name not in BOOKKEEPING and before.get(name) != now.get(name)]


def _field_order(name: str) -> tuple[int, str]:
    order = list(FINDING_WORDS)
    return (order.index(name), "") if name in order else (len(order), name)


def _value_words(value: Any) -> str:
    if value is None or value == "" or value == [] or value == ():
        return "none"
    if isinstance(value, (list, tuple)):
        return f"{len(value)} finding{'s' if len(value) != 1 else ''}" if any(len(str(v)) > VALUE_LIMIT for v in value) \
            else "; ".join(str(v) for v in value)
    text = " ".join(str(value).split())
    return text if len(text) <= VALUE_LIMIT else text[:VALUE_LIMIT - 1] + "…"


def _arithmetic(findings: Mapping[str, Any]):
    from e2egen.runner.arithmetic.model import Arithmetic  # torch-free

    return Arithmetic.from_table(findings)


def findings_differences(before: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """"field old -> new" for each finding that differs (Arithmetic.differences); probe bookkeeping left out."""
    try:
        return _arithmetic(before).differences(_arithmetic(now))
    except (ValueError, TypeError):  # a table this e2egen cannot read: compare the raw values
        return [f"{name} {before.get(name)!r} -> {now.get(name)!r}" for name in sorted(set(before) | set(now))
                if name not in BOOKKEEPING and before.get(name) != now.get(name)]


def cell_arithmetic(records: Iterable[CaseRecord]) -> list[CellArithmetic]:
    """One row per (impl, device, cell) the records name, sorted; the findings of a cell probed during the run
    win, then measured ones, then assumed ones (the cases of a cell normally agree)."""
    by_key: dict[Key, list[Mapping[str, Any]]] = {}
    for record in records:
        data = getattr(record, "arithmetic", None)
        if not isinstance(data, Mapping) or not isinstance(data.get("findings"), Mapping):
            continue
        key = (str(data.get("impl", "")), str(data.get("device", "")), str(data.get("cell", "")))
        by_key.setdefault(key, []).append(data)
    out = []
    for key in sorted(by_key):
        entries = by_key[key]
        chosen = min(entries, key=_preference)
        variants = len({json.dumps(_findings_only(e["findings"]), sort_keys=True, default=str) for e in entries})
        out.append(CellArithmetic(*key, findings=dict(chosen["findings"]), origin=str(chosen.get("origin", "")),
                                  versions={str(k): str(v) for k, v in dict(chosen.get("versions") or {}).items()},
                                  cases=len(entries), variants=variants))
    return out


def _preference(entry: Mapping[str, Any]) -> int:
    origin = str(entry.get("origin", ""))
    return 0 if origin.startswith("probed now") else 2 if origin.startswith("assumed") else 1


def _findings_only(findings: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in findings.items() if k not in BOOKKEEPING}


def compare_arithmetic(now: Sequence[CellArithmetic], before: Sequence[CellArithmetic], *,
                       against: str) -> ArithmeticComparison | None:
    """The cells whose findings changed since run `against`; None when that run recorded no arithmetic."""
    if not before:
        return None
    previous = {c.key: c for c in before}
    current = {c.key: c for c in now}
    changes = []
    for key, cell in current.items():
        old = previous.get(key)
        if old is None:
            continue
        differences = findings_differences(old.findings, cell.findings)
        if differences:
            changes.append(ArithmeticChange(cell, old, against, tuple(differences)))
    return ArithmeticComparison(against=against, changes=tuple(changes),
                                new=tuple(sorted(set(current) - set(previous))),
                                gone=tuple(sorted(set(previous) - set(current))))
