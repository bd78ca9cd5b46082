"""rocmlir-gen's input data reproduced: its fixed pattern, all ones, one random side, float data set by an axis,
and the lit substitution %constrained_float_range_random_data; the loader's messages for the new range forms."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from e2egen import runner
from e2egen.generator.cases import expand
from e2egen.generator.errors import CatalogueError
from e2egen.generator.execute import execute
from e2egen.generator.loader import parse_catalogue
from e2egen.generator.rocmlir import convert, convert_file, read_rocmlir
from e2egen.runner.inputs import generate_inputs, widen_to_float64

ROCMLIR_E2E = Path("/work/shared/rocmlir-e2e")
FLOAT_PATTERN, INTEGER_PATTERN = (0.5, -1.0, 0.75), (1.0, -1.0, 2.0)


def inputs64(problem) -> dict[str, torch.Tensor]:
    return {name: widen_to_float64(tensor) for name, tensor in generate_inputs(problem).items()}


def filled_in_memory_order(stored_shape, to_logical, pattern) -> torch.Tensor:
    """rocmlir-gen's fill, written out: element i of the buffer (row-major over stored_shape) gets pattern[i % len],
    then the buffer is read back as the logical tensor (to_logical: a permutation of its dims)."""
    count = 1
    for size in stored_shape:
        count *= size
    buffer = torch.tensor([pattern[i % len(pattern)] for i in range(count)], dtype=torch.float64).reshape(stored_shape)
    return to_logical(buffer)


CONV = {"n": 2, "c": 3, "hw": [4, 5], "k": 4, "kernel": [3, 2]}


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_conv_pattern_is_rocmlir_gens_element_by_element(layout):
    problem = runner.make_problem("conv2d", "fwd", "f16", layout, CONV, (-4, 2), 0, "pattern")
    got = inputs64(problem)
    if layout == "nchw":  # -in_layout=nchw -fil_layout=kcyx: stored as the logical shape
        want_x = filled_in_memory_order((2, 3, 4, 5), lambda t: t, FLOAT_PATTERN)
        want_w = filled_in_memory_order((4, 3, 3, 2), lambda t: t, FLOAT_PATTERN)
    else:  # -in_layout=nhwc -fil_layout=kyxc
        want_x = filled_in_memory_order((2, 4, 5, 3), lambda t: t.permute(0, 3, 1, 2), FLOAT_PATTERN)
        want_w = filled_in_memory_order((4, 3, 2, 3), lambda t: t.permute(0, 3, 1, 2), FLOAT_PATTERN)
    assert torch.equal(got["x"], want_x) and torch.equal(got["w"], want_w)


@pytest.mark.parametrize("dtype, pattern", [("f32", FLOAT_PATTERN), ("i8", INTEGER_PATTERN)])
@pytest.mark.parametrize("layout", ["nn", "tn", "nt"])
def test_gemm_pattern_is_rocmlir_gens_element_by_element(dtype, pattern, layout):
    m, n, k = 3, 5, 4
    problem = runner.make_problem("gemm", "fwd", dtype, layout, {"m": m, "n": n, "k": k}, (-4, 2), 0, "pattern")
    got = inputs64(problem)
    # rocmlir-gen's A is (m, k), (k, m) with -transA; B (k, n), (n, k) with -transB
    want_a = (filled_in_memory_order((k, m), lambda t: t.T, pattern) if layout[0] == "t"
              else filled_in_memory_order((m, k), lambda t: t, pattern))
    want_b = (filled_in_memory_order((n, k), lambda t: t.T, pattern) if layout[1] == "t"
              else filled_in_memory_order((k, n), lambda t: t, pattern))
    assert torch.equal(got["a"].reshape(m, k), want_a) and torch.equal(got["b"].reshape(k, n), want_b)


def test_ones_fill_every_input():
    problem = runner.make_problem("conv2d", "bwd_data", "bf16", "nhwc", CONV, (0, 1), 0, "ones")
    assert all(torch.equal(t, torch.ones_like(t)) for t in inputs64(problem).values())


@pytest.mark.parametrize("data, others", [("integers", 1.0), ("uniform", float(torch.tensor(0.1, dtype=torch.float16)))])
def test_one_random_side_draws_that_input_only(data, others):
    problem = runner.make_problem("conv2d", "fwd", "f16", "nchw", CONV, (-5, 4), 7, f"{data} random=w")
    got = inputs64(problem)
    assert torch.all(got["x"] == others)  # rocmlir-gen's min = max = 1: 1, or 0.1 beside reals
    assert got["w"].unique().numel() > 2 and got["w"].min() >= -5 and got["w"].max() <= 4
    assert torch.equal(inputs64(problem)["w"], got["w"])  # same seed, same inputs
    other_seed = runner.make_problem("conv2d", "fwd", "f16", "nchw", CONV, (-5, 4), 8, f"{data} random=w")
    assert not torch.equal(inputs64(other_seed)["w"], got["w"])


def test_a_random_input_the_direction_lacks_is_refused():
    with pytest.raises(runner.ProblemError, match="random inputs w: expected some of x, dy"):
        runner.make_problem("conv2d", "bwd_weight", "f32", "nchw", CONV, (-5, 4), 0, "integers random=w")


# ---------------------------------------------------------------- the importer

HEADER = '''
directory = "t"
prefix = "rocmlir-gen"
suffix = "--arch %arch -pv {data} | rocmlir-driver -c"
[[axis]]
name = "data type"
values = ["f32", "f16"]
prefix = "-t "
[[suite]]
name = "s"
'''
SMALL_CONV = "-batchsize=1 -in_channels=3 -out_channels=4 -in_h=5 -in_w=5 -fil_h=3 -fil_w=3"


def convert_text(data: str, tests: str):
    conversion = convert(read_rocmlir(textwrap.dedent(HEADER.format(data=data)) + textwrap.dedent(tests), "t.toml"))
    catalogue = parse_catalogue(conversion.to_toml(), "t.e2e.toml")  # validates it, as `e2egen validate` does
    return conversion, expand(catalogue)


def not_imported(conversion) -> list[str]:
    return [line for line in conversion.report() if line.startswith("not imported")]


@pytest.mark.parametrize("data, tests, want", [
    ("", f'[[suite.test]]\nconfig = "{SMALL_CONV}"', {("pattern", "pattern")}),
    ("-rand none", f'[[suite.test]]\nconfig = "{SMALL_CONV}"', {("ones", "ones")}),
    ("%random_data", f'[[suite.test]]\nconfig = "-rand_side input {SMALL_CONV}"',
     {("int-5to4-random-x", "integers random=x")}),
    ("%random_data -rand_type float", f'[[suite.test]]\nconfig = "-rand_side filter {SMALL_CONV}"',
     {("real0to1-random-w", "uniform random=w")}),
    # reals fail rocMLIR's f32 default relDiff 1e-6 near zero: thresholds as its catalogues with this data set them
    ("%constrained_float_range_random_data -relDiff_threshold 0.3 -absDiff_threshold 0.3",
     f'[[suite.test]]\nconfig = "{SMALL_CONV}"', {("real-1to1", "uniform")}),
])
def test_each_data_kind_imports_and_its_cases_pass_with_torch(data, tests, want):
    conversion, cases = convert_text(data, tests)
    assert {(c.key.range, c.data) for c in cases} == want
    assert not any("-rand" in line or "pattern" in line for line in not_imported(conversion))
    for case in cases:  # fwd f32 and f16, one layout
        outcome = execute(case, device="cpu")
        assert outcome.status == "passed", outcome.reason


def test_constrained_float_substitution_is_read_from_the_catalogues_comment():
    conversion, _ = convert_text("%constrained_float_range_random_data", f'[[suite.test]]\nconfig = "{SMALL_CONV}"')
    report = "\n".join(conversion.report())
    assert 'as GemmElementwiseGemmF16SplitK.toml\'s own comment says ("symmetric [-1, 1] random data")' in report
    assert "CMake value for it is not in the sources read" in report


@pytest.mark.skipif(not ROCMLIR_E2E.is_dir(), reason="rocMLIR's catalogues are not here")
@pytest.mark.parametrize("name", ["conv2d_host_validation_f16_fwd.toml", "conv2d_host_validation_f16_bwd.toml"])
def test_an_axis_setting_rand_type_float_gives_float_data(name):
    conversion = convert_file(ROCMLIR_E2E / name)
    cases = expand(parse_catalogue(conversion.to_toml(), "t.e2e.toml"))
    assert {(c.key.range, c.data, c.lo, c.hi) for c in cases} == {("real0to1", "uniform", 0.0, 1.0)}
    assert not any("rand type" in line for line in conversion.report())  # neither merged nor dropped


@pytest.mark.skipif(not ROCMLIR_E2E.is_dir(), reason="rocMLIR's catalogues are not here")
def test_rand_side_configs_of_a_shipped_catalogue_draw_one_input():
    conversion = convert_file(ROCMLIR_E2E / "conv2d_regression_fwd.toml")
    cases = expand(parse_catalogue(conversion.to_toml(), "t.e2e.toml"))
    assert {c.data for c in cases} == {"uniform", "uniform random=w", "uniform random=x"}
    assert not any("rand_side" in line for line in not_imported(conversion))


# ---------------------------------------------------------------- the loader

RANGE_CATALOGUE = '''
[ranges]
r = {value}

[[suite]]
name = "s"
op = "gemm"
dtypes = ["f32"]
layouts = ["nn"]
ranges = ["r"]

[[suite.config]]
name = "c"
m = 4
n = 4
k = 4
'''


@pytest.mark.parametrize("value, message", [
    ('{ range = [-4, 2], data = "patern" }',
     "ranges.r.data: unknown data 'patern'; did you mean 'pattern'? valid: integers, ones, pattern, uniform"),
    ('{ range = [-4, 2], data = "pattern", random = ["a"] }',
     "ranges.r.random: random inputs need data 'uniform' or 'integers', not 'pattern'"),
    ('{ range = [-5, 4], data = "integers", random = "a" }',
     "ranges.r.random: expected a non-empty list of distinct input names"),
    ('{ range = [-5, 4], data = "integers", random = ["a", "a"] }',
     "ranges.r.random: expected a non-empty list of distinct input names"),
    ('{ range = [2, 3], data = "ones" }', "ones data in f32 takes values 1..1, outside [2, 3]: widen the range"),
    ('{ range = [0, 1], data = "pattern" }', "pattern data in f32 takes values -1..0.75, outside [0, 1]: widen the range"),
    ('{ range = [-5, 4], data = "integers", random = ["w"] }', "random inputs w: expected some of a, b"),
])
def test_loader_names_the_key_the_bad_value_and_the_choices(value, message):
    with pytest.raises(CatalogueError) as caught:
        parse_catalogue(RANGE_CATALOGUE.format(value=value), "bad.toml")
    assert message in str(caught.value)


def test_loader_carries_pattern_and_random_inputs_to_the_cases():
    for value, data in (('{ range = [-4, 2], data = "pattern" }', "pattern"),
                        ('{ range = [-5, 4], data = "integers", random = ["b"] }', "integers random=b")):
        (case,) = expand(parse_catalogue(RANGE_CATALOGUE.format(value=value), "ok.toml"))
        assert case.data == data and case.problem().input_data == data
