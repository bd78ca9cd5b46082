"""Case filter expressions (`e2egen list --filter`, `e2egen nightly --filter`, `e2egen arithmetic --filter`,
a study's `cases.filter`).

An expression is space-separated terms, all of which must match: a glob on the
case id (`resnet50/*/f16/*`) or AXIS=V1,V2 with AXIS one of FILTER_AXES
(`op=gemm dtype=f16,bf16 pr=yes`). `case_filter` turns it into a predicate on
cases. A term that can only be a typo is a FilterError (a user error, exit 2)
with the catalogue's did-you-mean: an unknown axis, a `pr` value other than
those `e2egen list` prints, and, given the cases the filter will be applied
to, a value no case has on that axis (`dtype=fp16`: did you mean 'f16'?).
Globs are not checked: a glob that matches nothing is a question, not a typo.

(Not to be confused with e2egen.nightly.case_filter: which case ids a pytest session runs.)
"""
from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING, Callable, Iterable

from e2egen.errors import UserError
from e2egen.generator.case_id import PARTS
from e2egen.generator.errors import close_match, unknown

if TYPE_CHECKING:
    from e2egen.generator.cases import Case

FILTER_AXES = (*PARTS, "pr")  # every part of a case id, and whether the case is in the PR subset
# `e2egen list` prints pr=yes / pr=no; true / false are accepted too (the form the catalogue's `pr` key takes).
PR_VALUES = {"yes": True, "no": False, "true": True, "false": False}
MAX_LISTED = 20  # valid values named in a message; a big catalogue has hundreds of configs


class FilterError(UserError):
    """A bad filter expression; `key` is where it came from (default "--filter"), `value` the bad axis or value."""


def case_filter(expression: str, key: str = "--filter", cases: Iterable["Case"] | None = None) -> Callable[["Case"], bool]:
    """A predicate on cases from filter terms (all must match); `key` names the expression in messages.

    cases: the cases the predicate will be applied to; when given, an AXIS=V value that none of them has is a
    FilterError naming the values they do have.
    """
    axis_terms = [_axis_term(term, key) for term in expression.split() if "=" in term]
    globs = [term for term in expression.split() if "=" not in term]
    if cases is not None:
        _check_values(axis_terms, cases, key)
    tests = [lambda case, axis=axis, wanted=wanted: _axis_value(case, axis) in wanted
             for axis, wanted in axis_terms]
    tests += [lambda case, pattern=pattern: fnmatch.fnmatchcase(case.id, pattern) for pattern in globs]
    return lambda case: all(test(case) for test in tests)


def _axis_term(term: str, key: str) -> tuple[str, frozenset[str]]:
    """AXIS=V1,V2 as (axis, the values in the form _axis_value gives); FilterError for an unknown axis or pr value."""
    axis, _, text = term.partition("=")
    if axis not in FILTER_AXES:
        raise FilterError(unknown("axis", axis, FILTER_AXES), key=key, value=axis, choices=FILTER_AXES)
    values = [value for value in text.split(",") if value]
    if not values:
        raise FilterError(f"{term}: no value after '='; expected {axis}=V1,V2", key=key, value=term)
    if axis == "pr":
        for value in values:
            if value not in PR_VALUES:
                raise FilterError(unknown("pr value", value, PR_VALUES), key=key, value=value, choices=PR_VALUES)
        return axis, frozenset(_pr_text(PR_VALUES[value]) for value in values)
    return axis, frozenset(values)


def _check_values(axis_terms: list[tuple[str, frozenset[str]]], cases: Iterable["Case"], key: str) -> None:
    """FilterError for the first value of an axis term that no case has on that axis."""
    checked = [(axis, wanted) for axis, wanted in axis_terms if axis != "pr"]  # pr values are checked on parsing
    if not checked:
        return
    present: dict[str, set[str]] = {axis: set() for axis, _ in checked}
    for case in cases:
        for axis in present:
            present[axis].add(_axis_value(case, axis))
    for axis, wanted in checked:
        for value in sorted(wanted - present[axis]):
            choices = sorted(present[axis])
            raise FilterError(_unknown_value(axis, value, choices), key=key, value=value, choices=choices)


def _unknown_value(axis: str, value: str, choices: list[str]) -> str:
    if not choices:
        return f"no case to filter, so no {axis} {value!r}"
    if len(choices) <= MAX_LISTED:
        return unknown(axis, value, choices)
    return (f"unknown {axis} {value!r}{close_match(value, choices)} valid: {', '.join(choices[:MAX_LISTED])}, ... "
            f"({len(choices)} in all; `e2egen list` shows them)")


def _pr_text(in_pr: bool) -> str:
    return "yes" if in_pr else "no"


def _axis_value(case: "Case", axis: str) -> str:
    if axis == "pr":
        return _pr_text(case.pr)
    return str(getattr(case, axis))
