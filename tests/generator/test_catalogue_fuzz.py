"""Issue 46, the class behind "malformed catalogues crash the loader": whatever value stands at whatever key of a
catalogue (the shipped one's suites, one of every op, plus each optional table), validation ends in either a
Catalogue or a CatalogueError whose every problem names a line; never another exception. The examples replace
one value, or one element of an array, with a value of another TOML type."""
from __future__ import annotations

import tomllib
from pathlib import Path

import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from e2egen.generator.errors import CatalogueError
from e2egen.generator.loader import parse_catalogue

ROOT = Path(__file__).resolve().parents[2]

EXTRA = """
[tolerances]
rms = 1e-3
[tolerances.f16]
bound_ratio = 2

[require]
acc = "f32"

[[accept]]
device = "cpu"
impl = "torch"
cells = "gemm/*"
require = ["acc"]
reason = "fuzzing"
"""


def _base() -> dict:
    """One suite of each op in configs.toml (with its first config), its ranges, and the optional tables."""
    shipped = tomllib.loads((ROOT / "configs.toml").read_text(encoding="utf-8"))
    suites, seen = [], set()
    for suite in shipped["suite"]:
        if suite["op"] not in seen:
            seen.add(suite["op"])
            suites.append({**suite, "config": suite["config"][:1],
                           "exclude": [{"dtypes": [suite["dtypes"][0]]}] if len(suite["dtypes"]) > 1 else []})
    base = {"seed": 1, "timeout": 60, "ranges": shipped["ranges"], **tomllib.loads(EXTRA), "suite": suites}
    for suite in base["suite"]:
        if not suite["exclude"]:
            del suite["exclude"]
    return base


BASE = _base()


def _paths(value, path=()):
    """Every key path in the document, array elements included."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, path + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, path + (i,))


PATHS = [p for p in _paths(BASE) if p]

scalars = st.one_of(st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                    st.text(max_size=8), st.sampled_from(["f16", "nn", "r0", "torch", "gemm", "", "../x"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.sampled_from(["m", "name", "x", "lo"]),
                                                                       inner, max_size=2)), max_leaves=4)


def _replaced(document, path, value):
    if len(path) == 1:
        copy = list(document) if isinstance(document, list) else dict(document)
        copy[path[0]] = value
        return copy
    copy = list(document) if isinstance(document, list) else dict(document)
    copy[path[0]] = _replaced(document[path[0]], path[1:], value)
    return copy


def test_the_base_catalogue_is_valid():
    assert parse_catalogue(tomlkit.dumps(BASE), "base.toml").suites


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=values)
def test_any_value_anywhere_is_a_catalogue_or_located_problems(path, value):
    try:
        text = tomlkit.dumps(_replaced(BASE, path, value))
    except Exception:  # a value tomlkit cannot write (a key that is not a string...) is not a catalogue
        return
    try:
        parse_catalogue(text, "fuzz.toml")
    except CatalogueError as err:
        assert err.problems
        for problem in err.problems:
            assert problem.location.path == "fuzz.toml" and problem.location.line is not None, str(problem)
