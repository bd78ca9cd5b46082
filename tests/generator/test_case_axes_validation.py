"""A suite's dtypes, layouts and ranges are judged for every case it makes, at validation, against what the op
declares once (Op.dtypes, dtype_params_problem, layout_params_problem, largest_input): a case that cannot run is
one message at the suite's entry that chose the value (file:line, the value, the valid choices), exit 2, never
a traceback, never accepted. Values the runner takes internally ("not given") are refused in a catalogue.
"""
from __future__ import annotations

import contextlib
import io
import itertools
import textwrap

import pytest

from conftest import REPO, catalogue_text, line_number, problems_of
from e2egen import cli, runner
from e2egen.generator.cases import expand
from e2egen.generator.errors import CatalogueError
from e2egen.generator.loader import load_catalogue, parse_catalogue


def suite(op: str, dtypes: str, config: str, layouts: str = "", ranges: str = '["r0"]', extra: str = "") -> str:
    layouts_line = f"layouts = {layouts}\n" if layouts else ""
    return (f'\n[[suite]]\nname = "s"\nop = "{op}"\ndtypes = {dtypes}\n{layouts_line}ranges = {ranges}\n{extra}'
            f'\n[[suite.config]]\nname = "c"\n' + textwrap.dedent(config))


ATTENTION = "seq_q = 8\nseq_k = 8\nhead_dim_qk = 16\n"
GEMM = "m = 8\nn = 8\nk = 8\n"
CONV = "n = 1\nc = 4\nk = 4\nhw = [6, 6]\nkernel = 3\n"
SCALED = "m = 8\nn = 8\nk = 64\n"

# (what, catalogue, the line holding the key at fault, needles of the message)
CASES = {
    "quantized attention in f16": (
        suite("attention", '["i8", "f16"]', ATTENTION + "quantized = true\n"),
        'dtypes = ["i8", "f16"]', ("suite[0].dtypes[1]", "f16", "config 'c'", "quantized", "valid: i8")),
    "an fp8 pair on attention": (
        suite("attention", '["f16", "f8e4m3fn_f8e5m2"]', ATTENTION),
        "dtypes = [", ("suite[0].dtypes[1]", "attention does not run in f8e4m3fn_f8e5m2", "fp8 pair", "valid for attention: f32", "f8e4m3fn,")),
    "fp8 on exp": (
        suite("exp", '["f16", "f8e4m3fn"]', "shape = [4, 8]\n", layouts='["contiguous"]'),
        "dtypes = [", ("suite[0].dtypes[1]", "exp does not run in f8e4m3fn", "valid for exp: f32, tf32, f16, bf16")),
    "fp4 on conv": (
        suite("conv2d", '["f16", "f4e2m1"]', CONV),
        "dtypes = [", ("suite[0].dtypes[1]", "conv2d does not run in f4e2m1", "fp4", "valid for conv2d: f32")),
    "i8 on softmax": (
        suite("softmax", '["f16", "i8"]', "shape = [4, 8]\n", layouts='["contiguous"]'),
        "dtypes = [", ("suite[0].dtypes[1]", "softmax does not run in i8", "valid for softmax: f32, tf32, f16, bf16")),
    "an fp8 range beyond the format": (
        suite("gemm", '["f16", "f8e4m3fn"]', GEMM, ranges='["big"]'),
        'ranges = ["big"]', ("suite[0].ranges[0]", "range 'big' with dtype f8e4m3fn", "[-1000, 1000]", "448")),
    "scaled gemm in f32": (
        suite("scaled_gemm", '["f8e4m3fn", "f32"]', SCALED),
        "dtypes = [", ("suite[0].dtypes[1]", "scaled_gemm does not run in f32", "valid for scaled_gemm: f8e4m3fn")),
    "scaled gemm block = 0": (
        suite("scaled_gemm", '["f8e4m3fn"]', SCALED + "block = 0\n"),
        "block = 0", ("suite[0].config[0].block", "got 0", ">= 1", "leave it out", "mx 32")),
    "channels_last on a 2-d element-wise problem": (
        suite("exp", '["f16"]', "shape = [4, 8]\n", layouts='["contiguous", "channels_last"]'),
        "layouts = [", ("suite[0].layouts[1]", "channels_last", "config 'c'", "rank >= 3", "[4, 8]")),
    "an empty out_dtype (the op's own 'not given')": (
        suite("gemm", '["f16"]', GEMM + 'out_dtype = ""\n'),
        'out_dtype = ""', ("suite[0].config[0].out_dtype", "empty out_dtype", "leave out_dtype out", "valid: f32, bf16, f16")),
    "div's y_range beyond f16": (
        suite("div", '["f32", "f16"]', "shape = [64]\ny_range = [1.0, 1e6]\n", layouts='["contiguous"]'),
        "dtypes = [", ("suite[0].dtypes[1]", "config 'c'", "input y's range [1, 1e+06]", "f16's largest finite value 65504")),
    "pow's y_range beyond f32": (
        suite("pow", '["f32"]', "shape = [64]\ny_range = [0.0, 1e39]\n", layouts='["contiguous"]'),
        "dtypes = [", ("suite[0].dtypes[0]", "input y's range [0, 1e+39]", "f32's largest finite value")),
    "an empty scale dtype on scaled gemm": (
        suite("scaled_gemm", '["f8e4m3fn"]', SCALED + 'scale_b_dtype = ""\n'),
        'scale_b_dtype = ""', ("suite[0].config[0].scale_b_dtype", "valid: e8m0, f32")),
}


def main(*args: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            status = cli.main(list(args))
        except SystemExit as exit:
            status = exit.code
    return status, err.getvalue()


@pytest.mark.parametrize("what", CASES)
def test_a_case_that_cannot_run_is_one_message_at_the_key_that_chose_it(what):
    tail, at, needles = CASES[what]
    text = _with_ranges(tail)
    (problem,) = problems_of(text)
    assert problem.startswith(f"configs.toml:{line_number(text, at)}:"), problem
    for needle in needles:
        assert needle in problem, problem


@pytest.mark.parametrize("what", ["quantized attention in f16", "an fp8 pair on attention", "scaled gemm block = 0"])
def test_the_command_exits_2_with_the_file_and_line_and_no_traceback(tmp_path, what):
    tail, at, needles = CASES[what]
    text = _with_ranges(tail)
    path = tmp_path / "configs.toml"
    path.write_text(text, encoding="utf-8")
    status, err = main("validate", str(path))
    assert status == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"{path}:{line_number(text, at)}:" in err and needles[0] in err, err


def _with_ranges(tail: str) -> str:
    """The shared BASE catalogue (ranges r0, r4), with a range `big` beyond fp8's largest value added."""
    text = catalogue_text(tail)
    return text.replace("r4 = [1.0, 5.0]\n", "r4 = [1.0, 5.0]\nbig = [-1000.0, 1000.0]\n", 1)


def test_an_excluded_combination_is_not_judged():
    """Quantized attention in a suite that also runs f16: excluding f16 for that config is the way to say it."""
    tail = suite("attention", '["i8", "f16"]', ATTENTION + 'quantized = true\nexclude = [{ dtypes = ["f16"] }]\n')
    parse_catalogue(_with_ranges(tail), "configs.toml")


def test_the_message_names_the_dtypes_entry_not_the_config():
    """Op-specific dtype problems used to point at [[suite.config]]; the value at fault is the dtypes entry."""
    text = _with_ranges(suite("attention", '["f32", "i8",\n          "f16"]', ATTENTION + "quantized = true\n"))
    problems = problems_of(text)
    lines = line_number(text, "dtypes = ["), line_number(text, '"f16"]')
    assert [p.split(": ")[:2] for p in problems] == [[f"configs.toml:{lines[0]}", "suite[0].dtypes[0]"],
                                                     [f"configs.toml:{lines[1]}", "suite[0].dtypes[2]"]], problems


# -- the class: every op, every dtype and layout it might be given -----------------------------------------
def shipped_configs():
    """One config of every op, from the shipped catalogue (it has a suite of each)."""
    catalogue = load_catalogue(REPO / "configs.toml")
    seen = {}
    for s in catalogue.suites:
        seen.setdefault(s.op, s.configs[0])
    assert set(seen) == set(runner.OPS), set(runner.OPS) - set(seen)
    return sorted(seen.items())


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return repr(value)


@pytest.mark.parametrize("op,config", shipped_configs(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_dtype_an_op_does_not_declare_is_refused_at_its_dtypes_entry(op, config):
    spec = runner.OPS[op]
    params = "".join(f"{key} = {toml_value(value)}\n" for key, value in config.params.items())
    for dtype in runner.DTYPES:
        if dtype in spec.dtypes or dtype == spec.dtypes[0]:
            continue
        text = _with_ranges(suite(op, f'["{spec.dtypes[0]}", "{dtype}"]', params, layouts=f'["{spec.layouts[0]}"]'))
        problems = [p for p in problems_of(text) if "dtypes[1]" in p]
        assert len(problems) == 1 and f"{op} does not run in {dtype}" in problems[0], (dtype, problems)
        assert f"valid for {op}: {', '.join(spec.dtypes)}" in problems[0]


@pytest.mark.parametrize("op,config", shipped_configs(), ids=lambda x: x if isinstance(x, str) else "")
def test_a_catalogue_that_validates_expands_and_one_that_does_not_names_lines(op, config):
    """Whatever dtypes, layouts and ranges a suite lists for a real config of any op: either every case it makes
    is a problem the runner accepts (expand builds them all), or validation says which entries are at fault, each
    with a line. No case that cannot run gets past validation (where it once failed without a location)."""
    spec = runner.OPS[op]
    params = "".join(f"{key} = {toml_value(value)}\n" for key, value in config.params.items())
    dtypes = "[" + ", ".join(f'"{d}"' for d in spec.dtypes) + "]"
    layouts = "[" + ", ".join(f'"{l}"' for l in spec.layouts) + "]"
    text = _with_ranges(suite(op, dtypes, params, layouts=layouts, ranges='["r0", "big"]'))
    try:
        catalogue = parse_catalogue(text, "configs.toml")
    except CatalogueError as err:
        for problem in err.problems:
            assert problem.location.line is not None, str(problem)
            assert "dtypes" in problem.key or "layouts" in problem.key or "ranges" in problem.key, str(problem)
        return
    s = catalogue.suites[0]
    for direction, dtype, layout in itertools.product(s.directions, s.dtypes, s.layouts):
        for name in s.ranges:
            runner.make_problem(op, direction, dtype, layout, s.configs[0].params, catalogue.ranges[name], 0)
    expand(catalogue)


# -- values the runner takes internally ---------------------------------------------------------------------
# Optional integer parameters whose 0 is a real value a catalogue may write (no padding). Any other optional
# integer parameter defaulting to 0 uses 0 as "not given" and must declare a catalogue minimum, or a
# catalogue's `= 0` is silently taken as the default (scaled gemm's block = 0 was taken as 32).
ZERO_IS_A_VALUE = {"pad"}


@pytest.mark.parametrize("op", sorted(runner.OPS))
def test_every_zero_default_is_a_value_or_refused_in_a_catalogue(op):
    spec = runner.OPS[op]
    for key, default in spec.optional_params.items():
        if isinstance(default, int) and not isinstance(default, bool) and default == 0 and key not in ZERO_IS_A_VALUE:
            assert key in spec.catalogue_minimums, f"{op}.{key}: 0 is its 'not given'; declare Op.catalogue_minimums"


def test_suites_whose_module_names_collide_after_slugging_name_both():
    text = catalogue_text(suite("gemm", '["f32"]', GEMM).replace('name = "s"', 'name = "a-b"'),
                          suite("gemm", '["f32"]', GEMM).replace('name = "s"', 'name = "a_b"'))
    (problem,) = problems_of(text)
    assert "'a_b'" in problem and "'a-b'" in problem and "test_a_b.py" in problem, problem
    first_suite = line_number(text, 'name = "a-b"') - 1  # its [[suite]] line
    assert f"configs.toml:{first_suite})" in problem, problem


def test_one_bad_dtype_for_several_configs_is_one_message_naming_them():
    tail = suite("attention", '["i8", "f16"]', ATTENTION + "quantized = true\n")
    tail += '\n[[suite.config]]\nname = "d"\n' + ATTENTION + "quantized = true\n"
    (problem,) = problems_of(_with_ranges(tail))
    assert "suite[0].dtypes[1]" in problem and "configs 'c', 'd'" in problem, problem


def test_a_layout_the_suite_takes_by_default_is_named_at_the_config():
    """No `layouts` in the suite: every layout of exp, channels_last among them; the 2-d config is the place."""
    text = _with_ranges(suite("exp", '["f16"]', "shape = [4, 8]\n"))
    (problem,) = problems_of(text)
    config_line = line_number(text, "[[suite.config]]")
    assert problem.startswith(f"configs.toml:{config_line}: suite[0].config[0]:"), problem
    assert "channels_last" in problem and "lists no layouts" in problem, problem


def test_an_integer_range_inexact_in_a_dtype_is_named_once():
    text = _with_ranges(suite("gemm", '["f32", "f16"]', GEMM, ranges='["i5"]')).replace(
        "[ranges]\n", '[ranges]\ni5 = { range = [-5000, 4], data = "integers" }\n', 1)
    (problem,) = problems_of(text)
    assert "range 'i5' with dtype f16" in problem and "not all exact" in problem, problem
