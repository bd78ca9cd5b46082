"""What a case requires of a kernel's arithmetic (policy), kept apart from what was measured (the model).

`Requirements` (runner/options.py, with the other catalogue options) is the catalogue's layered `require` table; `violations` compares it with the measured
`Arithmetic` and names each cause; `Acceptance` is one catalogue `[[accept]]` entry: a deviation of one
device/kernel that is accepted, with its reason, instead of being spread over tolerance tables.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..options import ANY, EXACT, Requirements
from .model import FORMAT_BITS, Arithmetic

@dataclass(frozen=True)
class Violation:
    key: str  # the requirement broken: inputs | acc | rounding | subnormals | compute
    message: str


def violations(required: Requirements, arithmetic: Arithmetic, dtype: str) -> list[Violation]:
    """Each requirement the measured arithmetic breaks, with its cause in words. Outcomes of the probes
    that no arithmetic explains always count (key "exact": no [[accept]] entry can excuse a bug)."""
    found = [Violation("exact", f"the probes' crafted sums came back wrong, which no rounding explains (a kernel bug): {text}")
             for text in arithmetic.unexplained]
    if required.inputs != ANY and arithmetic.inputs != EXACT:
        needed = dtype if required.inputs == EXACT else required.inputs
        if FORMAT_BITS[arithmetic.inputs] < FORMAT_BITS[needed]:
            found.append(Violation("inputs", f"{arithmetic.describe_inputs()}; the case requires {needed} "
                                             f"(require.inputs = \"{required.inputs}\")"))
    if required.inputs != ANY and arithmetic.intermediate not in ("", EXACT):
        needed = dtype if required.inputs == EXACT else required.inputs
        if FORMAT_BITS[arithmetic.intermediate] < FORMAT_BITS[needed]:
            found.append(Violation("inputs", f"{arithmetic.describe_intermediate()}; the case requires {needed} "
                                             f"(require.inputs = \"{required.inputs}\")"))
    if required.acc != ANY and arithmetic.acc_bits < FORMAT_BITS[required.acc]:
        found.append(Violation("acc", f"partial sums pass through {arithmetic.acc_name} ({arithmetic.describe_accumulation()}); "
                                      f"the case requires {required.acc} (require.acc = \"{required.acc}\")"))
    if required.rounding == "nearest" and arithmetic.rounding not in ("nearest-even", "nearest-away"):
        found.append(Violation("rounding", f"the kernel rounds {arithmetic.rounding}; the case requires rounding to "
                                           f"nearest (require.rounding = \"nearest\")"))
    if required.compute != ANY and arithmetic.compute and FORMAT_BITS[arithmetic.compute] < FORMAT_BITS[required.compute]:
        found.append(Violation("compute", f"the kernel computes its math in {arithmetic.compute}; the case requires "
                                          f"{required.compute} (require.compute = \"{required.compute}\")"))
    if required.subnormals == "kept" and arithmetic.flushes:
        found.append(Violation("subnormals", f"the kernel flushes subnormals (inputs {arithmetic.subnormal_inputs}, "
                                             f"outputs {arithmetic.subnormal_outputs}); the case requires them kept "
                                             f"(require.subnormals = \"kept\")"))
    return found


@dataclass(frozen=True)
class Acceptance:
    """A catalogue `[[accept]]` entry: on devices and impls matching the globs, in cells matching `cells`,
    the named requirements may be broken, for `reason`."""

    device: str
    reason: str
    requirements: tuple[str, ...]
    impl: str = "*"
    cells: str = "*"

    def covers(self, violation: Violation, device: str, impl: str, cell: str) -> bool:
        return (violation.key in self.requirements and fnmatch.fnmatchcase(device, self.device)
                and fnmatch.fnmatchcase(impl, self.impl) and fnmatch.fnmatchcase(cell, self.cells))

    def to_catalogue(self) -> dict[str, Any]:
        return {"device": self.device, "impl": self.impl, "cells": self.cells, "require": list(self.requirements),
                "reason": self.reason}

    @classmethod
    def from_catalogue(cls, table: Mapping[str, Any]) -> "Acceptance":
        return cls(device=table["device"], reason=table["reason"], requirements=tuple(table["require"]),
                   impl=table.get("impl", "*"), cells=table.get("cells", "*"))


def judge(required: Requirements, accepted: Sequence[Acceptance], arithmetic: Arithmetic, dtype: str, device: str,
          impl: str, cell: str) -> tuple[list[Violation], list[tuple[Violation, Acceptance]]]:
    """(violations that fail the case, violations accepted with the entry that accepts them)."""
    failing, excused = [], []
    for violation in violations(required, arithmetic, dtype):
        entry = next((a for a in accepted if a.covers(violation, device, impl, cell)), None)
        if entry is None:
            failing.append(violation)
        else:
            excused.append((violation, entry))
    return failing, excused
