"""The catalogue as frozen dataclasses: what configs.toml says, validated.

Each entity carries the Location it was read from, so later checks (and
people) can point at the line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

from e2egen.generator.errors import Location

if TYPE_CHECKING:
    from e2egen.runner.arithmetic.requirements import Acceptance

# A suite's axes (plural, as the catalogue lists their values) and each one's
# singular name, as it appears in a case id (CaseId) and on a case.
AXIS_OF_CASE = {"dtypes": "dtype", "directions": "direction", "layouts": "layout", "ranges": "range", "configs": "config"}
AXES = tuple(axis for axis in AXIS_OF_CASE if axis != "configs")


def module_slug(suite_name: str) -> str:
    """The suite's test module name: test_<slug>.py."""
    return re.sub(r"[^A-Za-z0-9_]", "_", suite_name)


def frozen(mapping: Mapping | None = None) -> Mapping:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class Layered:
    """Settings given at one catalogue level: for every case, and per axis value.

    `specific` is keyed by a direction ("bwd_data"), a dtype ("f16") or both
    ("f16.bwd_data"); naming more axes is more specific.
    """

    common: Mapping[str, Any] = field(default_factory=frozen)
    specific: Mapping[str, Mapping[str, Any]] = field(default_factory=frozen)

    def for_case(self, dtype: str, direction: str) -> dict[str, Any]:
        """This level's settings for one case; the most specific win (the order lives in generator.layers)."""
        from e2egen.generator.layers import merge

        return merge((self,), dtype, direction)


EMPTY = Layered()


@dataclass(frozen=True)
class Exclude:
    """Cases whose value on every named axis is among the listed ones."""

    axes: Mapping[str, frozenset[str]]

    def matches(self, case_axes: Mapping[str, str]) -> bool:
        return all(case_axes[AXIS_OF_CASE[axis]] in values for axis, values in self.axes.items())

    def to_toml(self) -> dict[str, list[str]]:
        return {axis: sorted(values) for axis, values in self.axes.items()}


@dataclass(frozen=True)
class Config:
    """One problem shape of a suite, with its own overrides."""

    name: str
    params: Mapping[str, Any]
    location: Location
    tolerances: Layered = EMPTY
    reference: Layered = EMPTY
    bound: Layered = EMPTY
    excludes: tuple[Exclude, ...] = ()
    markers: tuple[str, ...] = ()
    pr: bool | None = None
    require: Layered = EMPTY
    verifier: Layered = EMPTY
    timeout: float | None = None  # seconds a case may run; None: the suite's


@dataclass(frozen=True)
class Suite:
    """One op, its axes and its configs."""

    name: str
    op: str
    dtypes: tuple[str, ...]
    directions: tuple[str, ...]
    layouts: tuple[str, ...]
    ranges: tuple[str, ...]
    configs: tuple[Config, ...]
    location: Location
    tolerances: Layered = EMPTY
    reference: Layered = EMPTY
    bound: Layered = EMPTY
    excludes: tuple[Exclude, ...] = ()
    impl: str | None = None
    markers: tuple[str, ...] = ()
    pr: bool = False
    require: Layered = EMPTY
    verifier: Layered = EMPTY
    timeout: float | None = None  # seconds a case may run; None: the catalogue's
    edges: bool = True  # whether its low-bit cases get an edges case each (runner/edge_data.py; catalogue `edges`)


@dataclass(frozen=True)
class Catalogue:
    """A validated catalogue file and the PR selection it names."""

    path: str
    seed: int
    ranges: Mapping[str, tuple[float, float]]
    suites: tuple[Suite, ...]
    range_data: Mapping[str, str] = field(default_factory=frozen)  # range name -> data kind, where not "uniform"
    tolerances: Layered = EMPTY
    reference: Layered = EMPTY
    bound: Layered = EMPTY
    pr_selection_path: str | None = None
    pr_selection: Mapping[str, str] = field(default_factory=frozen)
    require: Layered = EMPTY
    verifier: Layered = EMPTY
    accepted: tuple["Acceptance", ...] = ()  # the [[accept]] entries, in catalogue order
    timeout: float | None = None  # seconds a case may run; None: cases.DEFAULT_TIMEOUT
