"""Layered settings: which catalogue entry a case's tolerance, reference, bound or require option comes from.

A catalogue sets tolerances, reference options, bound options and requirements in layered
tables (`Layered`), at three scopes: the catalogue, a suite, a config; below them all lie e2egen's own
defaults (the "default" scope: generator.defaults), which every catalogue gets unless it says otherwise. Within
a scope, each table has a key: "" (every case), a direction ("bwd_data"), a
dtype ("f16") or both ("f16.bwd_data"). The most specific entry wins:

    scope:  default < catalogue < suite < config
    key:    "" < direction < dtype < dtype.direction     (within one scope)

and the scope dominates: a config's "" beats a suite's "f16.bwd_data".

This module is the only place that order is written (`SCOPES`, `KEY_KINDS`);
the generator (`cases.expand`, `Layered.for_case`) and `nightly.calibrate`
both resolve through it. No torch: the dtype names come from
`e2egen.runner.dtypes`, which needs none.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Protocol, Sequence

from e2egen.runner.dtypes import DTYPES

if TYPE_CHECKING:
    from e2egen.generator.catalogue import Catalogue, Layered

TABLES = ("tolerances", "reference", "bound", "require", "verifier")
SCOPES = ("default", "catalogue", "suite", "config")  # least to most specific
KEY_KINDS = ("", "direction", "dtype", "dtype.direction")  # least to most specific, within a scope

Scope = tuple  # ("default",) | ("catalogue",) | ("suite", suite) | ("config", suite, config)


class CaseLike(Protocol):
    suite: str
    config: str
    dtype: str
    direction: str


def key_kind(key: str) -> str:
    """The kind of a table key, from its text: "", "direction", "dtype" or "dtype.direction"."""
    if not key:
        return ""
    if "." in key:
        return "dtype.direction"
    return "dtype" if key in DTYPES else "direction"


def case_keys(dtype: str, direction: str) -> tuple[str, ...]:
    """The keys that apply to a case within one scope, least to most specific (in `KEY_KINDS` order)."""
    by_kind = {"": "", "direction": direction, "dtype": dtype, "dtype.direction": f"{dtype}.{direction}"}
    return tuple(by_kind[kind] for kind in KEY_KINDS)


def case_scopes(suite: str, config: str) -> tuple[Scope, ...]:
    """The scopes that apply to a case of `suite`/`config`, least to most specific (in `SCOPES` order)."""
    by_scope = {"default": ("default",), "catalogue": ("catalogue",), "suite": ("suite", suite), "config": ("config", suite, config)}
    return tuple(by_scope[scope] for scope in SCOPES)


@dataclass(frozen=True, order=True)
class Source:
    """Where a setting lives: a scope (catalogue, a suite, a config) and a key ("", dir, dtype, dtype.dir).

    Ordered by (scope, key) as tuples, for stable listings; `rank` orders by specificity.
    """

    scope: Scope  # ("catalogue",) | ("suite", s) | ("config", s, c)
    key: str

    @property
    def rank(self) -> int:
        """Specificity: a higher rank wins over every lower one that applies to the same case."""
        return SCOPES.index(self.scope[0]) * len(KEY_KINDS) + KEY_KINDS.index(key_kind(self.key))

    def matches(self, case: CaseLike) -> bool:
        """Whether this source applies to a case (anything with suite, config, dtype and direction)."""
        return self.scope in case_scopes(case.suite, case.config) and self.key in case_keys(case.dtype, case.direction)

    def path(self, name: str, table: str = "tolerances") -> list[str]:
        """Keys from the scope's table to the value."""
        return [table, *(self.key.split(".") if self.key else []), name]

    def label(self, name: str | None = None, table: str = "tolerances") -> str:
        """`tolerances.f16.rms`, `g: tolerances.f16`, `g/a: tolerances.f32.fwd.rms`."""
        dotted = ".".join(self.path(name, table) if name else self.path("", table)[:-1])
        if self.scope[0] == "default":
            return f"e2egen default: {dotted}"
        if self.scope[0] == "catalogue":
            return dotted
        if self.scope[0] == "suite":
            return f"{self.scope[1]}: {dotted}"
        return f"{self.scope[1]}/{self.scope[2]}: {dotted}"


def sources_for(suite: str, config: str, dtype: str, direction: str) -> list[Source]:
    """Every source that applies to a case, least to most specific (so rank increases along the list)."""
    keys = case_keys(dtype, direction)
    return [Source(scope, key) for scope in case_scopes(suite, config) for key in keys]


# -- resolving ----------------------------------------------------------------------
def _applied(layers: Iterable[tuple[Scope, "Layered"]], dtype: str, direction: str) -> Iterator[tuple[Scope, str, Mapping[str, Any]]]:
    """(scope, key, settings) for each table that applies to the case, least to most specific.

    `layers` are (scope, Layered) pairs, least specific scope first. The one place the precedence is applied.
    """
    keys = case_keys(dtype, direction)
    for scope, layered in layers:
        for key in keys:
            settings = layered.common if not key else layered.specific.get(key)
            if settings:
                yield scope, key, settings


def merge(levels: Sequence["Layered"], dtype: str, direction: str) -> dict[str, Any]:
    """The settings for one case from Layered tables given least specific scope first (e.g. catalogue, suite, config)."""
    merged: dict[str, Any] = {}
    for _, _, settings in _applied(((None, level) for level in levels), dtype, direction):  # scopes: unnamed here
        merged.update(settings)
    return merged


def layers_for(catalogue: "Catalogue", suite_name: str, config_name: str, table: str) -> list[tuple[Scope, "Layered"]]:
    """(scope, Layered) for one table of one suite's config, least specific scope first."""
    if table not in TABLES:
        raise ValueError(f"unknown layered table {table!r}; valid: {', '.join(TABLES)}")
    suite = next((s for s in catalogue.suites if s.name == suite_name), None)
    if suite is None:
        raise KeyError(f"no suite {suite_name!r} in {catalogue.path}")
    config = next((c for c in suite.configs if c.name == config_name), None)
    if config is None:
        raise KeyError(f"no config {config_name!r} in suite {suite_name!r} of {catalogue.path}")
    scopes = case_scopes(suite_name, config_name)
    return list(zip(scopes, (default_layer(table), getattr(catalogue, table), getattr(suite, table), getattr(config, table))))


def default_layer(table: str) -> "Layered":
    """e2egen's defaults for one table, as the least specific layer: the default tolerances; the other
    tables' defaults are their options dataclasses' own (runner.options), so their layer is empty."""
    from e2egen.generator.catalogue import EMPTY, Layered
    from e2egen.generator.defaults import DEFAULT_TOLERANCES

    return Layered(common=dict(DEFAULT_TOLERANCES)) if table == "tolerances" else EMPTY


def resolve_with_sources(catalogue: "Catalogue", suite_name: str, config_name: str, dtype: str, direction: str,
                         table: str) -> dict[str, tuple[Any, Source]]:
    """name -> (value, the Source that set it) for one case and one table (one of `TABLES`).

    Values are as the catalogue gives them: a tolerance of `false` (a metric removed) is returned as False.
    """
    resolved: dict[str, tuple[Any, Source]] = {}
    for scope, key, settings in _applied(layers_for(catalogue, suite_name, config_name, table), dtype, direction):
        source = Source(scope, key)
        for name, value in settings.items():
            resolved[name] = (value, source)
    return resolved


def resolve(catalogue: "Catalogue", suite_name: str, config_name: str, dtype: str, direction: str,
            table: str) -> dict[str, Any]:
    """name -> value for one case and one table: `resolve_with_sources` without the sources."""
    return {name: value for name, (value, _) in
            resolve_with_sources(catalogue, suite_name, config_name, dtype, direction, table).items()}


# -- what a catalogue sets ----------------------------------------------------------
def layer_entries(scope: Scope, layered: "Layered") -> dict[tuple[Source, str], Any]:
    """(Source, name) -> value for every setting of one Layered table at `scope`."""
    out = {(Source(scope, ""), name): value for name, value in layered.common.items()}
    for key, settings in layered.specific.items():
        for name, value in settings.items():
            out[(Source(scope, key), name)] = value
    return out


def default_entries(table: str) -> dict[tuple[Source, str], Any]:
    """(Source, name) -> value for e2egen's defaults of `table` (the "default" scope); a change to one of them
    is written into the catalogue's top-level table, where it overrides the default."""
    return layer_entries(("default",), default_layer(table))


def existing_entries(catalogue: "Catalogue", table: str) -> dict[tuple[Source, str], Any]:
    """(Source, name) -> value for every setting the catalogue makes in `table`, catalogue first, then suite by suite."""
    if table not in TABLES:
        raise ValueError(f"unknown layered table {table!r}; valid: {', '.join(TABLES)}")
    entries = layer_entries(("catalogue",), getattr(catalogue, table))
    for suite in catalogue.suites:
        entries.update(layer_entries(("suite", suite.name), getattr(suite, table)))
        for config in suite.configs:
            entries.update(layer_entries(("config", suite.name, config.name), getattr(config, table)))
    return entries
