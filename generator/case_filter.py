"""Case filter expressions (`e2egen list --filter`, `e2egen nightly --filter`, a study's `cases.filter`).

An expression is space-separated terms, all of which must match: a glob on the
case id (`resnet50/*/f16/*`) or AXIS=V1,V2 with AXIS one of FILTER_AXES
(`op=gemm dtype=f16,bf16`). `case_filter` turns it into a predicate on cases;
an unknown axis is a FilterError naming the axis and the valid ones.

(Not to be confused with e2egen.nightly.case_filter: which case ids a pytest session runs.)
"""
from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING, Callable

from e2egen.errors import UserError
from e2egen.generator.case_id import PARTS

if TYPE_CHECKING:
    from e2egen.generator.cases import Case

FILTER_AXES = (*PARTS, "pr")  # every part of a case id, and whether the case is in the PR subset


class FilterError(UserError):
    """A bad filter expression; `key` is where it came from (default "--filter"), `value` the bad axis."""


def case_filter(expression: str, key: str = "--filter") -> Callable[["Case"], bool]:
    """A predicate on cases from filter terms (all must match); `key` names the expression in messages."""
    tests = []
    for term in expression.split():
        if "=" in term:
            axis, _, values = term.partition("=")
            if axis not in FILTER_AXES:
                raise FilterError(f"unknown axis {axis!r}; valid: {', '.join(FILTER_AXES)}", key=key, value=axis,
                                  choices=FILTER_AXES)
            wanted = set(values.split(","))
            tests.append(lambda case, axis=axis, wanted=wanted: _axis_value(case, axis) in wanted)
        else:
            tests.append(lambda case, pattern=term: fnmatch.fnmatchcase(case.id, pattern))
    return lambda case: all(test(case) for test in tests)


def _axis_value(case: "Case", axis: str) -> str:
    if axis == "pr":
        return "true" if case.pr else "false"
    return str(getattr(case, axis))
