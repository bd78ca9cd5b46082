"""generator.layers: the one precedence rule for layered tables, against a brute-force definition.

The brute force below is written from the rule as stated, not from the module:
every entry the catalogue sets, and every one of e2egen's defaults (the "default"
scope, below the catalogue: docs/concepts/default-verdict.md), is listed with its
(scope rank, key rank); among those that apply to a case, the one with the
largest pair sets the value. Scope: default 0 < catalogue 1 < suite 2 <
config 3; key: "" 0 < direction 1 < dtype 2 < dtype.direction 3. A key's kind
is known here from how the test drew it.
"""
from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from e2egen.generator import layers
from e2egen.generator.cases import _resolve, applicable_tolerances, expand, integer_output
from e2egen.runner.ops import OPS
from e2egen.generator.catalogue import Catalogue, Config, Layered, Suite, frozen
from e2egen.generator.errors import Location
from e2egen.generator.layers import Source, default_entries, existing_entries, resolve, resolve_with_sources, sources_for
from e2egen.generator.loader import load_catalogue, parse_catalogue

DTYPES = ("f32", "tf32", "f16", "bf16")
DIRECTIONS = ("fwd", "bwd_data", "bwd_weight")
# Two of the names are default tolerances: drawn tables override them (a catalogue's "" beats the default's "").
NAMES = ("a", "b", "c", "bound_ratio", "bias_z")
SUITES = {"s1": ("c1", "c2"), "s2": ("c1",)}  # config "c1" in both suites: scopes must tell them apart
SCOPE_RANK = {"default": 0, "catalogue": 1, "suite": 2, "config": 3}
KIND_RANK = {"all": 0, "direction": 1, "dtype": 2, "both": 3}
HERE = Location("test_layers.py")
# e2egen's defaults as docs/concepts/default-verdict.md states them (the default verdict), every case's: a "" entry of the default
# scope in tolerances; the other tables' defaults are their options' own, so they set no entry.
DEFAULT = ("default",)
DEFAULT_TOLERANCES = {"bound_ratio": 1.0, "bound_rms": 0.5, "bias_z": 6.0}
DEFAULT_TABLES = {("tolerances", DEFAULT): {"": ("all", DEFAULT_TOLERANCES)},
                  **{(table, DEFAULT): {} for table in ("reference", "bound", "require", "verifier")}}


def defaults_of(table: str) -> dict:
    """(Source, name) -> value for the default scope of `table`, from DEFAULT_TABLES."""
    return {(Source(DEFAULT, key), name): value for key, (_, values) in DEFAULT_TABLES[(table, DEFAULT)].items()
            for name, value in values.items()}


# -- random layered tables ----------------------------------------------------------
# A table is {key text: (kind, {name: value})}; the kind is how the key was drawn.
def _keys():
    return ([("", "all")] + [(d, "direction") for d in DIRECTIONS] + [(t, "dtype") for t in DTYPES]
            + [(f"{t}.{d}", "both") for t in DTYPES for d in DIRECTIONS])


ALL_KEYS = _keys()
settings_st = st.dictionaries(st.sampled_from(NAMES), st.integers(0, 3), max_size=len(NAMES))
table_st = st.lists(st.sampled_from(ALL_KEYS), unique=True, max_size=6).flatmap(
    lambda keys: st.tuples(*[settings_st for _ in keys]).map(
        lambda tables: {key: (kind, t) for (key, kind), t in zip(keys, tables)}))


def to_layered(table: dict) -> Layered:
    common = table.get("", (None, {}))[1]
    specific = {key: frozen(t) for key, (_, t) in table.items() if key}
    return Layered(frozen(common), frozen(specific))


# The scopes the test catalogue sets, least specific first (the default scope is e2egen's, not the catalogue's).
SCOPES = [("catalogue",)] + [("suite", s) for s in SUITES] + [("config", s, c) for s, cs in SUITES.items() for c in cs]


@st.composite
def catalogues(draw):
    """A catalogue with a random table at every scope for each of tolerances, reference, bound; and those tables."""
    tables = {(name, scope): draw(table_st) for name in layers.TABLES for scope in SCOPES}

    def layered(scope):
        return {name: to_layered(tables[(name, scope)]) for name in layers.TABLES}

    suites = tuple(
        Suite(name=s, op="gemm", dtypes=DTYPES, directions=DIRECTIONS, layouts=("nn",), ranges=("r0",), location=HERE,
              configs=tuple(Config(name=c, params=frozen(), location=HERE, **layered(("config", s, c))) for c in cs),
              **layered(("suite", s)))
        for s, cs in SUITES.items())
    catalogue = Catalogue(path="test.toml", seed=0, ranges=frozen({"r0": (-1.0, 1.0)}), suites=suites,
                          **layered(("catalogue",)))
    return catalogue, tables


case_st = st.sampled_from([(s, c) for s, cs in SUITES.items() for c in cs]).flatmap(
    lambda sc: st.tuples(st.just(sc[0]), st.just(sc[1]), st.sampled_from(DTYPES), st.sampled_from(DIRECTIONS)))


def brute_force(tables: dict, table: str, suite: str, config: str, dtype: str, direction: str) -> dict:
    """name -> (value, scope, key) by enumeration: the largest (scope rank, key rank) among entries that apply,
    e2egen's defaults (DEFAULT_TABLES) among them, whatever `tables` holds."""
    applies_scope = {DEFAULT, ("catalogue",), ("suite", suite), ("config", suite, config)}
    applies_key = {"all": "", "direction": direction, "dtype": dtype, "both": f"{dtype}.{direction}"}
    best: dict[str, tuple] = {}
    for (name, scope), entries in {**DEFAULT_TABLES, **tables}.items():
        if name != table or scope not in applies_scope:
            continue
        for key, (kind, values) in entries.items():
            if applies_key[kind] != key:
                continue
            rank = (SCOPE_RANK[scope[0]], KIND_RANK[kind])
            for setting, value in values.items():
                if setting not in best or rank > best[setting][0]:
                    best[setting] = (rank, value, scope, key)
    return {setting: (value, scope, key) for setting, (_, value, scope, key) in best.items()}


def layered_of(catalogue: Catalogue, table: str, suite: str, config: str) -> list[Layered]:
    """The levels the generator resolves a case's `table` from (cases.expand), e2egen's default layer first."""
    s = next(x for x in catalogue.suites if x.name == suite)
    c = next(x for x in s.configs if x.name == config)
    return [layers.default_layer(table), getattr(catalogue, table), getattr(s, table), getattr(c, table)]


# -- properties ---------------------------------------------------------------------
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalogues(), st.sampled_from(layers.TABLES), case_st)
def test_resolver_agrees_with_brute_force(drawn, table, case):
    catalogue, tables = drawn
    suite, config, dtype, direction = case
    expected = brute_force(tables, table, suite, config, dtype, direction)
    got = resolve_with_sources(catalogue, suite, config, dtype, direction, table)
    assert {k: (v, s.scope, s.key) for k, (v, s) in got.items()} == expected
    assert resolve(catalogue, suite, config, dtype, direction, table) == {k: v for k, (v, _, _) in expected.items()}
    # The Source is the entry that set the value: one the catalogue makes, or one of e2egen's defaults.
    assert default_entries(table) == defaults_of(table)
    entries = {**defaults_of(table), **existing_entries(catalogue, table)}
    for name, (value, source) in got.items():
        assert entries[(source, name)] == value
        assert source.matches(_Case(suite, config, dtype, direction))
    # The generator's path (cases._resolve over Layered tables) gives the same values.
    assert _resolve((dtype, direction), *layered_of(catalogue, table, suite, config)) == \
        {k: v for k, (v, _, _) in expected.items()}
    # Calibrate's view: the most specific applicable source (by rank) that sets the name.
    for name in {n for (_, n) in entries}:
        setting = [p for p in sources_for(suite, config, dtype, direction) if (p, name) in entries]
        if name in expected:
            assert max(setting, key=lambda p: p.rank) == got[name][1]
        else:
            assert not setting


@settings(max_examples=100, deadline=None)
@given(catalogues(), st.sampled_from(layers.TABLES))
def test_existing_entries_lists_every_setting_once(drawn, table):
    catalogue, tables = drawn
    expected = {(Source(scope, key), name): value for (t, scope), entries in tables.items() if t == table
                for key, (_, values) in entries.items() for name, value in values.items()}
    assert existing_entries(catalogue, table) == expected  # what the catalogue sets: never e2egen's defaults
    for (source, _), _ in expected.items():
        kind = tables[(table, source.scope)][source.key][0]
        assert source.rank == SCOPE_RANK[source.scope[0]] * 4 + KIND_RANK[kind]
    # e2egen's defaults are listed apart, at the least specific rank there is.
    assert default_entries(table) == defaults_of(table)
    for (source, _), _ in defaults_of(table).items():
        kind = DEFAULT_TABLES[(table, DEFAULT)][source.key][0]
        assert source.rank == SCOPE_RANK["default"] * 4 + KIND_RANK[kind]
        assert source.rank < min((s.rank for s, _ in expected), default=4)


@given(table_st, st.sampled_from(DTYPES), st.sampled_from(DIRECTIONS))
def test_one_level_for_case_is_the_resolver_on_one_scope(table, dtype, direction):
    expected = brute_force({("t", ("catalogue",)): table}, "t", "s", "c", dtype, direction)
    assert to_layered(table).for_case(dtype, direction) == {k: v for k, (v, _, _) in expected.items()}


@given(case_st)
def test_sources_are_listed_least_specific_first(case):
    suite, config, dtype, direction = case
    sources = sources_for(suite, config, dtype, direction)
    assert len(sources) == 16 and len(set(sources)) == 16  # 4 scopes x 4 keys
    assert [p.rank for p in sources] == list(range(16))
    assert [p.scope for p in sources[:4]] == [DEFAULT] * 4 and [p.scope for p in sources[4:8]] == [("catalogue",)] * 4
    assert all(p.matches(_Case(*case)) for p in sources)
    other_suite = "s2" if suite == "s1" else "s1"
    assert all(p.matches(_Case(other_suite, config, dtype, direction)) for p in sources
               if p.scope[0] in ("default", "catalogue") and layers.key_kind(p.key) == "")
    assert not any(p.matches(_Case(other_suite, config, dtype, direction)) for p in sources
                   if p.scope[0] not in ("default", "catalogue"))
    assert not any(p.matches(_Case(suite, config, "bf16" if dtype != "bf16" else "f16", direction)) for p in sources
                   if layers.key_kind(p.key) in ("dtype", "dtype.direction"))


class _Case:
    """Anything with suite, config, dtype and direction is a case for Source.matches."""

    def __init__(self, suite, config, dtype, direction):
        self.suite, self.config, self.dtype, self.direction = suite, config, dtype, direction


# -- examples -----------------------------------------------------------------------
def test_scope_dominates_key():
    text = """
seed = 1
[ranges]
r0 = [-1.0, 1.0]
[tolerances]
rms = 1.0
bias_z = 3.0
[tolerances.f16.bwd_data]
rms = 2.0
[[suite]]
name = "s"
op = "conv2d"
dtypes = ["f16"]
directions = ["bwd_data"]
layouts = ["nchw"]
ranges = ["r0"]
tolerances = { f16 = { bwd_data = { rms = 3.0 } } }
[[suite.config]]
name = "c"
n = 1
c = 4
k = 4
hw = [6, 6]
kernel = 3
tolerances = { rms = 4.0 }
"""
    catalogue = parse_catalogue(text, "t.toml")
    (case,) = expand(catalogue)
    # The config's "" beats the suite's f16.bwd_data; the catalogue's "" beats e2egen's default bias_z (6);
    # bound_ratio and bound_rms, which nothing in the catalogue sets, are e2egen's defaults.
    assert case.tolerances == {"rms": 4.0, "bias_z": 3.0, "bound_ratio": 1.0, "bound_rms": 0.5}
    resolved = resolve_with_sources(catalogue, "s", "c", "f16", "bwd_data", "tolerances")
    value, source = resolved["rms"]
    assert (value, source) == (4.0, Source(("config", "s", "c"), ""))
    assert source.label("rms") == "s/c: tolerances.rms"
    assert resolved["bias_z"] == (3.0, Source(("catalogue",), ""))
    assert resolved["bound_ratio"] == (1.0, Source(("default",), "")) and resolved["bound_rms"] == (0.5, Source(("default",), ""))
    assert resolved["bound_rms"][1].label("bound_rms") == "e2egen default: tolerances.bound_rms"
    assert Source(("default",), "").rank < Source(("catalogue",), "").rank
    assert Source(("suite", "s"), "f16.bwd_data").label() == "s: tolerances.f16.bwd_data"
    assert Source(("catalogue",), "f16").path("acc", "bound") == ["bound", "f16", "acc"]
    assert [layers.key_kind(k) for k in ("", "fwd", "f16", "f16.fwd")] == list(layers.KEY_KINDS)
    with pytest.raises(KeyError):
        resolve(catalogue, "s", "nope", "f16", "bwd_data", "tolerances")
    with pytest.raises(ValueError):
        resolve(catalogue, "s", "c", "f16", "bwd_data", "tolerance")


# Tolerance tables written in catalogue text (catalogue, suite, config), read by the loader and expanded.
# The default metrics among them: a catalogue's table overrides a default, or turns it off (false).
metric_st = st.sampled_from(("rms", "max_abs_diff", "rel_l2", "bound_ratio", "bound_rms", "bias_z"))
text_table_st = st.lists(st.sampled_from(ALL_KEYS), unique=True, max_size=5).flatmap(
    lambda keys: st.tuples(*[st.dictionaries(metric_st, st.sampled_from((0.5, 1.0, 2.0, False)), min_size=1)
                             for _ in keys]).map(lambda tables: {key: (kind, t) for (key, kind), t in zip(keys, tables)}))


def inline(table: dict) -> str:
    """A TOML inline table for a layered tolerances table: {rms = 1.0, f16 = {rms = 2.0, fwd = {rms = 3.0}}}."""
    nested: dict = {}
    for key, (_, values) in table.items():
        node = nested
        for part in key.split(".") if key else []:
            node = node.setdefault(part, {})
        node.update(values)

    def text(node):
        items = [f"{k} = {text(v) if isinstance(v, dict) else str(v).lower()}" for k, v in node.items()]
        return "{ " + ", ".join(items) + " }"

    return text(nested)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(text_table_st, min_size=3, max_size=3))
def test_loaded_catalogue_expands_to_the_brute_force_tolerances(drawn):
    top, suite_table, config_table = drawn
    # Every case checks max_eps_diff (set only here), so no case is left without a metric even where the
    # tables turn every default off.
    top = {**top, "": ("all", {"max_eps_diff": 8, **top.get("", ("all", {}))[1]})}
    text = f"""
seed = 1
tolerances = {inline(top)}
[ranges]
r0 = [-1.0, 1.0]
[[suite]]
name = "s"
op = "conv2d"
dtypes = ["f32", "f16", "bf16"]
layouts = ["nchw"]
ranges = ["r0"]
tolerances = {inline(suite_table)}
[[suite.config]]
name = "c"
n = 1
c = 4
k = 4
hw = [6, 6]
kernel = 3
tolerances = {inline(config_table)}
"""
    tables = {("tolerances", ("catalogue",)): top, ("tolerances", ("suite", "s")): suite_table,
              ("tolerances", ("config", "s", "c")): config_table}
    catalogue = parse_catalogue(text, "t.toml")
    for case in expand(catalogue):
        expected = brute_force(tables, "tolerances", "s", "c", case.dtype, case.direction)
        assert case.tolerances == {k: v for k, (v, _, _) in sorted(expected.items()) if v is not False}
        got = resolve_with_sources(catalogue, "s", "c", case.dtype, case.direction, "tolerances")
        assert {k: (v, s.scope, s.key) for k, (v, s) in got.items()} == expected


# -- the shipped catalogue: calibrate and the generator agree -----------------------
def test_shipped_catalogue_calibrate_sources_agree_with_generator():
    from e2egen.nightly.calibrate import calibrate
    from e2egen.nightly.evidence import Evidence

    catalogue = load_catalogue(REPO / "configs.toml")
    cases = expand(catalogue)
    # What the catalogue sets, over e2egen's defaults (which govern a metric the catalogue does not set).
    entries = {**defaults_of("tolerances"), **existing_entries(catalogue, "tolerances")}
    # No evidence: calibrate changes nothing, but says which entry governs each (case, metric).
    result = calibrate(catalogue, cases, Evidence(runs=(), asked=1, cases={}))
    assert not result.changes
    seen = set()
    for state in result.states:
        case = state.case
        assert entries[(state.source, state.metric)] == case.tolerances[state.metric]
        assert state.source.matches(case)
        # Nothing more specific that applies to the case sets the metric.
        assert not [p for p in sources_for(case.suite, case.config, case.dtype, case.direction)
                    if p.rank > state.source.rank and (p, state.metric) in entries]
        assert result.effective[(case.id, state.metric)] == case.tolerances[state.metric]
        seen.add((case.id, state.metric))
    owned = {(case.id, metric) for case in cases for metric in case.tolerances  # not an integer output's own exactness
             if metric in resolve(catalogue, case.suite, case.config, case.dtype, case.direction, "tolerances")}
    assert seen == {(c.id, m) for c in cases for m, v in c.tolerances.items() if not isinstance(v, bool)
                    and m not in result.not_calibrated and (c.id, m) in owned}
    # The shipped catalogue leaves the default verdict to e2egen: every default metric governs some case from there.
    assert {state.metric for state in result.states if state.source == Source(DEFAULT, "")} == set(DEFAULT_TOLERANCES)
    # Every table: the resolver and the generator's _resolve give the same values for every case.
    for case in cases:
        for table in layers.TABLES:
            levels = layered_of(catalogue, table, case.suite, case.config)
            assert resolve(catalogue, case.suite, case.config, case.dtype, case.direction, table) == \
                _resolve((case.dtype, case.direction), *levels)
        tolerances = resolve(catalogue, case.suite, case.config, case.dtype, case.direction, "tolerances")
        problem = case.problem()  # what the op leaves out itself (applicable_tolerances): bias_z where a rounding
        spec, params = problem.spec, problem.params  # is shared, the model's metrics for integers and intervals
        kept = {k: v for k, v in sorted(tolerances.items()) if v is not False}
        assert case.tolerances == applicable_tolerances(kept, spec.shared_rounding(params, problem.direction), integer_output(problem),
                                                        spec.judged_by_intervals(params))


def test_layers_imports_no_torch():
    script = ("import sys, e2egen.generator.layers; "
              "assert not [m for m in sys.modules if m.split('.')[0] in ('torch', 'numba')]")
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
