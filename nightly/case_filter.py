"""Which generated cases a pytest session may run, shared by the sweep plugin and the recorder.

A module of its own, not part of a plugin: pytest rewrites the asserts of
plugin modules only if they are not imported before it registers them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pytest


@dataclass(frozen=True)
class CaseFilter:
    """The case ids a session may run: all (selected None) or the selected ones, minus the deselected."""

    selected: frozenset[str] | None = None
    deselected: frozenset[str] = frozenset()

    def allows(self, case_id: str) -> bool:
        return case_id not in self.deselected and (self.selected is None or case_id in self.selected)


CASE_FILTER = pytest.StashKey[CaseFilter]()


def read_case_ids(path: str | Path) -> frozenset[str]:
    """Case ids from a file: one per line; blank lines and # comments ignored."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise pytest.UsageError(f"{path}: cannot read the case id list: {err.strerror}") from None
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))


def case_data(item: pytest.Item) -> Mapping[str, Any] | None:
    """The JSON form (Case.to_dict) of the generated case a test item runs, or None for other items."""
    from e2egen.generator.cases import Case

    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("case") if callspec is not None else None
    return case.to_dict() if isinstance(case, Case) else None
