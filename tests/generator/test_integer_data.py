"""Integer input data (`[ranges] i5 = { range = [-5, 4], data = "integers" }`): drawn, carried and checked."""
from __future__ import annotations

import textwrap

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from e2egen.cli import main
from e2egen.generator.cases import expand
from e2egen.generator.codec import decode, encode
from e2egen.generator.errors import CatalogueError
from e2egen.generator.loader import parse_catalogue
from e2egen.runner import ProblemError, make_problem
from e2egen.runner.inputs import generate_inputs

CATALOGUE = """
[ranges]
r0 = [-1.0, 1.0]
i5 = {{ range = {range}, data = "{data}" }}

[tolerances]
rms = 1e-5

[[suite]]
name = "g"
op = "gemm"
dtypes = {dtypes}
layouts = ["nn", "tt"]
ranges = ["r0", "i5"]

[[suite.config]]
name = "m8"
m = 8
n = 8
k = 16
"""


def catalogue(range_="[-5, 4]", data="integers", dtypes='["f32", "f16"]'):
    return parse_catalogue(textwrap.dedent(CATALOGUE.format(range=range_, data=data, dtypes=dtypes)), "c.toml")


def test_cases_carry_the_data_kind_and_the_range_label_tells_them_apart():
    cases = expand(catalogue())
    kinds = {(c.key.range, c.data) for c in cases}
    assert kinds == {("r0", "uniform"), ("i5", "integers")}
    assert len({c.id for c in cases}) == len(cases)
    assert decode(encode(cases), None) == cases  # the generated module runs the same inputs


@settings(max_examples=25, deadline=None)
@given(lo=st.integers(-300, 300), width=st.integers(1, 40), seed=st.integers(0, 2**32))
def test_integer_draws_are_integers_in_range_whatever_the_layout(lo, width, seed):
    hi = lo + width
    drawn = {}
    for layout in ("nn", "tt"):
        problem = make_problem("gemm", "fwd", "bf16" if max(abs(lo), abs(hi)) <= 256 else "f32", layout,
                               {"m": 3, "n": 4, "k": 5}, (lo, hi), seed, input_data="integers")
        drawn[layout] = generate_inputs(problem)
    for name, values in drawn["nn"].items():
        exact = values.double()
        assert torch.equal(exact, exact.round()), "integers are exact in the input format"
        assert lo <= exact.min().item() and exact.max().item() <= hi
        assert torch.equal(values, drawn["tt"][name])


def test_every_integer_of_the_range_is_drawn():
    problem = make_problem("gemm", "fwd", "f32", "nn", {"m": 64, "n": 64, "k": 64}, (-5, 4), 1, input_data="integers")
    values = torch.cat([t.flatten() for t in generate_inputs(problem).values()])
    assert set(values.tolist()) == set(float(v) for v in range(-5, 5))


def test_f32_integer_gemm_is_exact():
    from e2egen import runner

    problem = make_problem("gemm", "fwd", "f32", "nn", {"m": 16, "n": 16, "k": 64}, (-5, 4), 3, input_data="integers")
    result = runner.run(problem)
    assert torch.equal(result.out.double().cpu(), result.ref.cpu())


@pytest.mark.parametrize("dtype, hi, ok", [("f16", 2048, True), ("f16", 2049, False), ("bf16", 256, True),
                                           ("bf16", 257, False), ("f32", 2**24, True), ("tf32", 2**24, True)])
def test_the_range_must_be_exact_in_the_input_format(dtype, hi, ok):
    make = lambda: make_problem("gemm", "fwd", dtype, "nn", {"m": 2, "n": 2, "k": 2}, (-hi, hi), 0, input_data="integers")
    if ok:
        make()
    else:
        with pytest.raises(ProblemError, match="not all exact"):
            make()


def test_unknown_data_kind_and_fractional_bounds_are_problems():
    with pytest.raises(ProblemError, match="unknown input_data 'gaussian'"):
        make_problem("gemm", "fwd", "f32", "nn", {"m": 2, "n": 2, "k": 2}, (-1, 1), 0, input_data="gaussian")
    with pytest.raises(ProblemError, match="integer bounds"):
        make_problem("gemm", "fwd", "f32", "nn", {"m": 2, "n": 2, "k": 2}, (-1.5, 1), 0, input_data="integers")


@pytest.mark.parametrize("range_, data, dtypes, message", [
    ("[-5, 4]", "gaussian", '["f32"]', "ranges.i5.data: unknown data 'gaussian'"),
    ("[-5.5, 4]", "integers", '["f32"]', "integer data needs integer bounds"),
    ("[-5000, 4]", "integers", '["f32", "f16"]', "range 'i5' with dtype f16: integers in [-5000, 4] are not all exact in f16"),
    ("[4, -5]", "integers", '["f32"]', "lo must be < hi"),
])
def test_catalogue_errors_name_the_key_and_the_value(tmp_path, capsys, range_, data, dtypes, message):
    path = tmp_path / "c.toml"
    path.write_text(textwrap.dedent(CATALOGUE.format(range=range_, data=data, dtypes=dtypes)))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err and "Traceback" not in err


def test_a_range_table_without_range_is_a_problem():
    text = textwrap.dedent(CATALOGUE.format(range="[-5, 4]", data="integers", dtypes='["f32"]'))
    text = text.replace('i5 = { range = [-5, 4], data = "integers" }', 'i5 = { data = "integers", lo = 1 }')
    with pytest.raises(CatalogueError) as err:
        parse_catalogue(text, "c.toml")
    assert "ranges.i5.range: missing" in str(err.value) and "ranges.i5.lo" in str(err.value)
