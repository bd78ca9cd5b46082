"""Edge data (runner/edge_data.py): the edges case each low-bit case gets, its data, its opt-outs, and that it
reaches the bugs the catalogue's ranges miss."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from e2egen.generator.cases import edge_data, expand
from e2egen.generator.codec import decode, encode
from e2egen.generator.errors import CatalogueError
from e2egen.generator.loader import load_catalogue, parse_catalogue
from e2egen.metrics.formats import get_format
from e2egen.runner import make_problem
from e2egen.runner.dtypes import FLOAT4, FLOAT8, FLOAT8_PAIRS, FLOAT_DTYPES, LOW_BIT, largest_finite
from e2egen.runner.edge_data import EDGES_RANGE

REPO = Path(__file__).resolve().parents[2]


DEFAULT_EXCLUDE = '[{ dtypes = ["i8"], ranges = ["small"] }, { dtypes = ["f8e4m3fn", "f16"], ranges = ["ints"] }]'


def gemm_catalogue(dtypes: str = '["f8e4m3fn", "i8", "f16"]', ranges: str = '["small", "ints"]', top: str = "",
                   suite: str = "", config: str = "", exclude: str = DEFAULT_EXCLUDE) -> str:
    return textwrap.dedent(f'''
        seed = 3
        {top}
        [ranges]
        small = [-1.0, 1.0]
        ints = {{ range = [-5, 4], data = "integers" }}
        full = {{ range = [-128, 127], data = "integers" }}

        [[suite]]
        name = "g"
        op = "gemm"
        dtypes = {dtypes}
        layouts = ["nt"]
        ranges = {ranges}
        exclude = {exclude}
        {suite}

        [[suite.config]]
        name = "m8"
        m = 8
        n = 8
        k = 64
        pr = true
        {config}
    ''')


def edges_of(text: str) -> list:
    return [case for case in expand(parse_catalogue(text, "c.toml")) if case.range == EDGES_RANGE]


def test_each_low_bit_case_gets_one_edges_case_with_its_formats_whole_range():
    edges = edges_of(gemm_catalogue())
    assert [case.id for case in edges] == ["g/gemm/m8/fwd/f8e4m3fn/nt/edges", "g/gemm/m8/fwd/i8/nt/edges"]
    fp8, i8 = edges
    assert (fp8.lo, fp8.hi, fp8.data) == (-448.0, 448.0, "uniform")
    assert (i8.lo, i8.hi, i8.data) == (-128.0, 127.0, "integers")
    assert all("edges" in case.markers and not case.pr for case in edges)  # nightly data: not in PR by `pr = true`
    assert edges_of(gemm_catalogue()) == edges  # same catalogue, same ids, seeds and data


def test_a_suite_range_that_draws_the_same_data_leaves_no_edges_case():
    assert edges_of(gemm_catalogue(dtypes='["i8"]', ranges='["ints", "full"]', exclude="[]")) == []
    excluded_there = '[{ ranges = ["full"] }]'  # the suite's full range is left out where it would draw it
    assert len(edges_of(gemm_catalogue(dtypes='["i8"]', ranges='["ints", "full"]', exclude=excluded_there))) == 1


@pytest.mark.parametrize("where", ["top", "suite", "exclude"])
def test_edges_cases_can_be_turned_off(where):
    text = {"top": gemm_catalogue(top="edges = false"), "suite": gemm_catalogue(suite="edges = false"),
            "exclude": gemm_catalogue(config='exclude = [{ ranges = ["edges"], dtypes = ["i8"] }]')}[where]
    assert [case.dtype for case in edges_of(text)] == ([] if where != "exclude" else ["f8e4m3fn"])


def test_a_suite_says_edges_where_the_top_level_turned_them_off():
    assert [case.dtype for case in edges_of(gemm_catalogue(top="edges = false", suite="edges = true"))] == ["f8e4m3fn", "i8"]


@pytest.mark.parametrize("top, ranges_line, message", [
    ('edges = "yes"', "", "c.toml:3: edges: expected true or false, got a string ('yes')"),
    ("", "edges = [-2.0, 2.0]", "'edges' is the range of e2egen's edge-data cases"),
])
def test_bad_edges_input_names_its_key(top, ranges_line, message):
    text = gemm_catalogue(top=top).replace("[ranges]\n", f"[ranges]\n{ranges_line}\n")
    with pytest.raises(CatalogueError) as info:
        parse_catalogue(text, "c.toml")
    assert message in str(info.value)


def test_no_edges_where_the_output_cannot_show_them():
    assert edge_data("gemm", {"m": 8, "n": 8, "k": 64, "out_dtype": "f8e4m3fn"}, "fwd", "f8e4m3fn") is None  # saturates
    assert edge_data("gemm", {"m": 8, "n": 8, "k": 64, "out_dtype": "f16"}, "fwd", "f8e4m3fn") is None  # overflows
    assert edge_data("gemm", {"m": 8, "n": 8, "k": 64, "out_dtype": "bf16"}, "fwd", "f8e4m3fn") is not None
    assert edge_data("gemm", {"m": 8, "n": 8, "k": 64}, "fwd", "f16") is None  # a wide format: the catalogue's ranges
    quantized = {"heads_q": 1, "seq_q": 8, "seq_k": 8, "head_dim_qk": 8, "quantized": True}
    assert edge_data("attention", quantized, "fwd", "i8") is None  # its f16 scores overflow first


def test_a_scaled_gemm_edges_case_draws_varied_block_scales():
    edge = edge_data("scaled_gemm", {"m": 8, "n": 8, "k": 64}, "fwd", "f8e4m3fn")
    assert edge is not None and dict(edge.params) == {"pattern": "varied"}
    assert edge_data("scaled_gemm", {"m": 8, "n": 8, "k": 64, "pattern": "varied"}, "fwd", "f8e4m3fn") is None
    assert edge_data("scaled_gemm", {"m": 8, "n": 8, "k": 64, "scaling": "tensor"}, "fwd", "f8e4m3fn") is None


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(LOW_BIT), k=st.integers(1, 1 << 18), out=st.sampled_from(["", "f32", "bf16", "f16"]),
       direction=st.sampled_from(["fwd", "bwd_data", "bwd_weight"]), op=st.sampled_from(["gemm", "conv2d"]))
def test_edge_data_is_a_valid_problem_whose_sums_the_output_holds(dtype, k, out, direction, op):
    """Whatever the op, dtype and size: the edges data makes a valid problem, reaches the format's largest value,
    and every sum of products of it is finite in the output."""
    if op == "conv2d" and dtype in FLOAT4:
        return
    int_out = dtype == "i8"
    params = ({"m": 4, "n": 4, "k": k} if op == "gemm" else {"n": 1, "c": k % 64 + 1, "k": 4, "hw": 5, "kernel": 3})
    if out and not int_out:
        params["out_dtype"] = out
    if op == "conv2d" and direction != "fwd" and dtype in (*FLOAT8, *FLOAT8_PAIRS) and out:
        return  # an fp8 convolution's backward writes f32 only
    direction = direction if op == "conv2d" else "fwd"
    edge = edge_data(op, params, direction, dtype)
    if edge is None:
        return
    problem = make_problem(op, direction, dtype, "nchw" if op == "conv2d" else "nt", params, (edge.lo, edge.hi), 0,
                           edge.data)
    largest = largest_finite(dtype)
    assert edge.hi == largest and edge.lo == (-largest - 1 if int_out else -largest)
    assert problem.reduction_size * largest * largest <= get_format(problem.out_dtype).max


def test_wide_formats_never_get_edges():
    for dtype in FLOAT_DTYPES:
        assert edge_data("gemm", {"m": 4, "n": 4, "k": 4}, "fwd", dtype) is None


def test_the_shipped_catalogue_edges_cases_round_trip_through_a_generated_module():
    cases = expand(load_catalogue(REPO / "configs.toml"))
    edges = [case for case in cases if case.range == EDGES_RANGE]
    assert edges and all(case.dtype in LOW_BIT for case in edges)
    by_suite: dict[str, list] = {}
    for case in cases:
        by_suite.setdefault(case.suite, []).append(case)
    for suite_cases in by_suite.values():
        assert decode(encode(suite_cases), None) == suite_cases
