"""What a case requires of a kernel's arithmetic (policy), kept apart from what was measured (the model).

`Requirements` (runner/options.py, with the other catalogue options) is the catalogue's layered `require` table; `violations` compares it with the measured
`Arithmetic` and names each cause; `Acceptance` is one accepted deviation of one device/kernel, with its
reason, instead of being spread over tolerance tables: a catalogue's `[[accept]]` entry, or one of the
deviations of torch's own kernels that e2egen ships (runner/arithmetic/torch_deviations.toml).
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Final, Literal, Mapping, Sequence

from e2egen.runner.options import ANY, EXACT, RequirementName, Requirements
from e2egen.runner.arithmetic.model import FORMAT_BITS, Arithmetic

UNEXPLAINED: Final = "exact"  # a violation's key for probe outcomes no arithmetic explains: a bug, never accepted
ViolationKey = Literal[RequirementName, Literal["exact"]]  # the requirement broken, or UNEXPLAINED


@dataclass(frozen=True)
class Violation:
    key: ViolationKey
    message: str
    measured_bits: int = 0  # the significand bits the kernel was measured to keep (inputs, acc, compute)


# How a probe outcome no arithmetic explains is named, before its values (reasons and reports count on it).
UNEXPLAINED_FINDING: Final = "the probes' crafted inputs came back wrong, which no rounding explains"


def violations(required: Requirements, arithmetic: Arithmetic, dtype: str) -> list[Violation]:
    """Each requirement the measured arithmetic breaks, with its cause in words. Outcomes of the probes
    that no arithmetic explains always count (key "exact": no [[accept]] entry can excuse a bug)."""
    found = [Violation(UNEXPLAINED, f"{UNEXPLAINED_FINDING} (a kernel bug): {text}")
             for text in arithmetic.unexplained]
    if required.inputs != ANY and arithmetic.inputs != EXACT:
        needed = dtype if required.inputs == EXACT else required.inputs
        if FORMAT_BITS[arithmetic.inputs] < FORMAT_BITS[needed]:
            found.append(Violation("inputs", f"{arithmetic.describe_inputs()}; the case requires {needed} "
                                             f"(require.inputs = \"{required.inputs}\")", FORMAT_BITS[arithmetic.inputs]))
    if required.inputs != ANY and arithmetic.intermediate not in ("", EXACT):
        needed = dtype if required.inputs == EXACT else required.inputs
        if FORMAT_BITS[arithmetic.intermediate] < FORMAT_BITS[needed]:
            found.append(Violation("inputs", f"{arithmetic.describe_intermediate()}; the case requires {needed} "
                                             f"(require.inputs = \"{required.inputs}\")",
                                   FORMAT_BITS[arithmetic.intermediate]))
    if required.acc != ANY and arithmetic.acc_bits < FORMAT_BITS[required.acc]:
        found.append(Violation("acc", f"partial sums pass through {arithmetic.acc_name} ({arithmetic.describe_accumulation()}); "
                                      f"the case requires {required.acc} (require.acc = \"{required.acc}\")", arithmetic.acc_bits))
    if required.rounding == "nearest" and arithmetic.rounding not in ("nearest-even", "nearest-away"):
        found.append(Violation("rounding", f"the kernel rounds {arithmetic.rounding}; the case requires rounding to "
                                           f"nearest (require.rounding = \"nearest\")"))
    if required.compute != ANY and arithmetic.compute and FORMAT_BITS[arithmetic.compute] < FORMAT_BITS[required.compute]:
        found.append(Violation("compute", f"the kernel computes its math in {arithmetic.compute}; the case requires "
                                          f"{required.compute} (require.compute = \"{required.compute}\")",
                                   FORMAT_BITS[arithmetic.compute]))
    if required.subnormals == "kept" and arithmetic.flushes:
        found.append(Violation("subnormals", f"the kernel flushes subnormals (inputs {arithmetic.subnormal_inputs}, "
                                             f"outputs {arithmetic.subnormal_outputs}); the case requires them kept "
                                             f"(require.subnormals = \"kept\")"))
    return found


@dataclass(frozen=True)
class Acceptance:
    """An accepted deviation: on devices and impls matching the globs, in cells matching `cells`, the named
    requirements may be broken, for `reason`.

    The deviations of torch's kernels that e2egen ships say more: `floor` (the narrowest format the measured
    arithmetic may fall to: a kernel that does worse still fails), `when` (the kernel paths it holds on:
    profile-key name -> accepted values, runner.kernel_paths), `arithmetic` (what was measured, in words)
    and `measured` (where); a catalogue's [[accept]] entry leaves them empty."""

    device: str
    reason: str
    requirements: tuple[str, ...]
    impl: str = "*"
    cells: str = "*"
    floor: str = ""
    when: tuple[tuple[str, tuple[str, ...]], ...] = ()
    arithmetic: str = ""
    measured: str = ""
    shipped: bool = False  # one of e2egen's own (torch_deviations.toml), not a catalogue's

    def covers(self, violation: Violation, device: str, impl: str, cell: str,
               versions: Mapping[str, str] | None = None) -> bool:
        if not (violation.key in self.requirements and fnmatch.fnmatchcase(device, self.device)
                and fnmatch.fnmatchcase(impl, self.impl) and fnmatch.fnmatchcase(cell, self.cells)):
            return False
        if self.floor and violation.measured_bits < FORMAT_BITS[self.floor]:
            return False
        paths = versions or {}
        return all(paths.get(name) in values for name, values in self.when)

    def describe(self) -> str:
        """Who accepts it and why, as a report says it."""
        if self.shipped:
            what = f"{self.arithmetic}; " if self.arithmetic else ""
            return f"{what}{self.reason} (e2egen's knowledge of torch's kernels: `e2egen accepted`; measured: {self.measured})"
        return f"{self.reason} ([[accept]] device={self.device} impl={self.impl} cells={self.cells})"

    def to_catalogue(self) -> dict[str, Any]:
        return {"device": self.device, "impl": self.impl, "cells": self.cells, "require": list(self.requirements),
                "reason": self.reason}

    @classmethod
    def from_catalogue(cls, table: Mapping[str, Any]) -> "Acceptance":
        return cls(device=table["device"], reason=table["reason"], requirements=tuple(table["require"]),
                   impl=table.get("impl", "*"), cells=table.get("cells", "*"))


def judge(required: Requirements, accepted: Sequence[Acceptance], arithmetic: Arithmetic, dtype: str, device: str,
          impl: str, cell: str, versions: Mapping[str, str] | None = None
          ) -> tuple[list[Violation], list[tuple[Violation, Acceptance]]]:
    """(violations that fail the case, violations accepted with the entry that accepts them)."""
    failing, excused = [], []
    for violation in violations(required, arithmetic, dtype):
        entry = next((a for a in accepted if a.covers(violation, device, impl, cell, versions)), None)
        if entry is None:
            failing.append(violation)
        else:
            excused.append((violation, entry))
    return failing, excused
