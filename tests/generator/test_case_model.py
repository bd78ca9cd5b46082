"""The typed values a case carries: options, ids, and the codec of generated modules."""
from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import REPO, TINY_CONV, TINY_GEMM, catalogue_text
from e2egen.generator import codec
from e2egen.generator.case_id import PARTS, CaseId
from e2egen.generator.cases import Case, expand
from e2egen.generator.errors import CatalogueError
from e2egen.generator.loader import load_catalogue, parse_catalogue
from e2egen.runner.errors import ProblemError
from e2egen.runner.options import ACCUMULATORS, REFERENCE_DEVICES, BoundModel, ReferenceOptions

# -- options ----------------------------------------------------------------------------
reference_tables = st.fixed_dictionaries({}, optional={
    "device": st.sampled_from(REFERENCE_DEVICES), "ftz": st.booleans(),
    "accumulate": st.integers(0, 1 << 20), "round_output": st.booleans()})
bound_tables = st.fixed_dictionaries({}, optional={
    "lambda": st.floats(1e-3, 1e3), "acc": st.sampled_from(ACCUMULATORS), "strict": st.booleans(),
    "c_out": st.floats(0, 10)})


@given(reference_tables)
def test_reference_options_round_trip_through_their_catalogue_table(table):
    options = ReferenceOptions.from_catalogue(table)
    assert ReferenceOptions.from_catalogue(options.to_catalogue()) == options
    assert {**ReferenceOptions.defaults(), **table} == options.to_catalogue()
    assert options.changed() == {k: v for k, v in table.items() if ReferenceOptions.defaults()[k] != v}


@given(bound_tables)
def test_bound_model_round_trips_and_renames_lambda_in_one_place(table):
    model = BoundModel.from_catalogue(table)
    assert BoundModel.from_catalogue(model.to_catalogue()) == model
    assert model.lam == table.get("lambda", 5.0)  # the catalogue's `lambda` is the attribute `lam`
    assert json.loads(json.dumps(model.to_catalogue())) == model.to_catalogue()


@pytest.mark.parametrize("make, key, text", [
    (lambda: BoundModel(lam=0), "bound.lambda", "expected a positive number"),
    (lambda: BoundModel(acc="f8"), "bound.acc", "unknown accumulator type 'f8'"),
    (lambda: BoundModel(c_out=-1), "bound.c_out", "expected a number >= 0"),
    (lambda: BoundModel(strict=1), "bound.strict", "expected true or false"),
    (lambda: ReferenceOptions(device="gpu"), "reference.device", "unknown reference device 'gpu'"),
    (lambda: ReferenceOptions(accumulate=-4), "reference.accumulate", "expected 0 (off)"),
    (lambda: ReferenceOptions.from_catalogue({"ftzz": True}), "reference.ftzz", "did you mean 'ftz'"),
])
def test_invalid_options_name_the_key_and_the_valid_choices(make, key, text):
    with pytest.raises(ProblemError) as info:
        make()
    assert info.value.key == key and text in str(info.value)


def test_the_catalogue_validates_options_by_their_dataclass():
    text = catalogue_text(TINY_CONV + 'bound = { acc = "f8", lambda = 0 }\nreference = { accumulate = 1.5 }\n')
    with pytest.raises(CatalogueError) as info:
        parse_catalogue(text, "configs.toml")
    lines = [str(p) for p in info.value.problems]
    assert any("bound.acc" in line and "unknown accumulator type 'f8'" in line and "f32" in line for line in lines)
    assert any("bound.lambda" in line and "> 0" in line for line in lines)
    assert any("reference.accumulate" in line and "integer" in line for line in lines)


def test_cases_carry_typed_options():
    text = catalogue_text(TINY_CONV + 'reference = { ftz = true }\n').replace("rms = 1e-3", "rms = 1e-3\nbound_ratio = 1.0")
    cases = expand(parse_catalogue(text, "configs.toml"))
    f16 = next(c for c in cases if c.dtype == "f16")
    assert f16.reference == ReferenceOptions(ftz=True) and f16.bound == BoundModel()
    with pytest.raises(TypeError):
        dataclasses.replace(f16, reference={"ftz": True})


# -- case ids ---------------------------------------------------------------------------
names = st.text(st.characters(blacklist_characters="/", blacklist_categories=("Cs",)), min_size=1, max_size=12)


@given(st.tuples(*[names] * len(PARTS)))
def test_case_ids_format_and_parse_back(parts):
    key = CaseId(*parts)
    assert CaseId.parse(str(key)) == key
    assert str(key).split("/") == list(parts)


@pytest.mark.parametrize("text", ["a/b/c", "a/b/c/d/e/f/g/h", "", "a//c/d/e/f/g"])
def test_malformed_ids_are_refused_with_the_expected_form(text):
    with pytest.raises(ValueError, match="case id|non-empty"):
        CaseId.parse(text)


def test_a_case_id_is_its_parts():
    case = expand(parse_catalogue(catalogue_text(TINY_GEMM), "configs.toml"))[0]
    assert case.key == CaseId.parse(case.id)
    assert case.axes == {"config": case.config, "dtype": case.dtype, "direction": case.direction,
                         "layout": case.layout, "range": case.range}
    with pytest.raises(ValueError, match="does not match"):
        Case.from_dict({**case.to_dict(), "id": "x/gemm/m8/fwd/f32/nn/r0"})


# -- the codec of generated modules --------------------------------------------------
def _by_suite(cases):
    suites: dict[str, list[Case]] = {}
    for case in cases:
        suites.setdefault(case.suite, []).append(case)
    return suites


def test_codec_round_trips_every_case_of_the_shipped_catalogue():
    cases = expand(load_catalogue(REPO / "configs.toml"))
    for suite_cases in _by_suite(cases).values():
        tables = codec.encode(suite_cases)
        # What the module holds must survive being written as Python literals and read back.
        tables = eval(repr(tables))  # noqa: S307 - our own literals
        assert codec.decode(tables, suite_cases[0].impl) == suite_cases


def test_codec_keeps_markers_named_like_axis_values_where_expansion_keeps_them():
    text = catalogue_text(TINY_CONV.replace('ranges = ["r0"]', 'ranges = ["r0"]\nmarkers = ["f16", "mine"]'))
    cases = expand(parse_catalogue(text, "configs.toml"))
    decoded = codec.decode(codec.encode(cases), None)
    assert [c.markers for c in decoded] == [c.markers for c in cases]
    assert all(c.markers.count("f16") == 1 for c in cases if c.dtype == "f16")
    assert all("f16" in c.markers for c in cases if c.dtype == "f32")
