"""Validation: every user error is one clear message with file:line, key path, value and choices."""
from __future__ import annotations

import pytest

from conftest import TINY_CONV, TINY_GEMM, catalogue_text, line_number, problems_of, run_cli
from e2egen.generator.loader import parse_catalogue


def test_valid_catalogue_loads():
    catalogue = parse_catalogue(catalogue_text(TINY_CONV, TINY_GEMM), "configs.toml")
    assert [s.name for s in catalogue.suites] == ["tiny", "mm"]
    assert catalogue.ranges["r4"] == (1.0, 5.0)
    assert catalogue.suites[1].directions == ("fwd",)  # defaults to the op's directions


def test_toml_syntax_error_names_line_and_column():
    text = catalogue_text(TINY_CONV).replace("k = 4", "k = = 4")
    [message] = problems_of(text)
    line = line_number(text, "k = = 4")
    assert message.startswith(f"configs.toml:{line}: invalid TOML") and f"line {line}, column" in message
    [message] = problems_of(catalogue_text(TINY_CONV) + "\nbroken = [1, 2\n")
    assert message.startswith(f"configs.toml:{len((catalogue_text(TINY_CONV) + chr(10) + 'broken = [1, 2').splitlines())}: invalid TOML")


def test_misspelled_config_key_gets_did_you_mean_and_line():
    text = catalogue_text(TINY_CONV.replace("kernel = 3", "kernal = 3"))
    messages = problems_of(text)
    assert any(f"configs.toml:{line_number(text, 'kernal')}:" in m and "'kernal'" in m and "did you mean 'kernel'" in m for m in messages), messages


def test_unknown_dtype_lists_valid_choices():
    text = catalogue_text(TINY_CONV.replace('dtypes = ["f32", "f16"]', 'dtypes = ["f32", "fp16"]'))
    [message] = problems_of(text)
    assert "suite[0].dtypes[1]" in message and "'fp16'" in message and "did you mean 'f16'" in message
    assert "bf16" in message and "tf32" in message and f":{line_number(text, 'fp16')}:" in message


def test_unknown_op_and_layout():
    assert any("unknown op 'conv4d'" in m for m in problems_of(catalogue_text(TINY_CONV.replace('op = "conv2d"', 'op = "conv4d"'))))
    messages = problems_of(catalogue_text(TINY_GEMM.replace('"nn", "tt"', '"nn", "nhwc"')))
    assert any("layout for gemm 'nhwc'" in m and "nt" in m for m in messages)


@pytest.mark.parametrize("bad, expect", [
    ("r0 = [1.0, -1.0]", "lo must be < hi"),
    ("r0 = [1.0, 1.0]", "lo must be < hi"),
    ("r0 = [-inf, 1.0]", "finite"),
    ("r0 = [nan, 1.0]", "finite"),
    ("r0 = [1.0]", "expected [lo, hi]"),
    ('r0 = ["a", 1.0]', "finite number"),
])
def test_bad_ranges(bad, expect):
    text = catalogue_text(TINY_CONV).replace("r0 = [-1.0, 1.0]", bad)
    messages = problems_of(text)
    assert any(expect in m and "ranges.r0" in m for m in messages), messages


def test_unknown_range_name_in_suite():
    messages = problems_of(catalogue_text(TINY_CONV.replace('ranges = ["r0"]', 'ranges = ["r9"]')))
    assert any("unknown range 'r9'" in m and "r0, r4" in m for m in messages)


@pytest.mark.parametrize("change, expect", [
    (("k = 4", "k = 0"), "k"),
    (("k = 4", "k = 4\ngroups = 3"), "groups"),
    (("hw = [6, 6]", "hw = [2, 2]\nstride = 1"), "output"),
    (("hw = [6, 6]", "hw = [6, 6, 6]"), "hw"),
    (("k = 4", "k = 4.5"), "k"),
])
def test_bad_shape_parameters(change, expect):
    text = catalogue_text(TINY_CONV.replace(*change).replace("pad = 1", "pad = 0" if "output" in expect else "pad = 1"))
    messages = problems_of(text)
    assert any("suite[0].config[0]" in m and expect in m for m in messages), messages


def test_missing_shape_parameter():
    messages = problems_of(catalogue_text(TINY_CONV.replace("c = 4\n", "")))
    assert any("config[0].c" in m and "missing" in m for m in messages)


def test_duplicate_names():
    messages = problems_of(catalogue_text(TINY_CONV, TINY_CONV))
    assert any("duplicate suite name 'tiny'" in m for m in messages)
    twice = TINY_CONV + TINY_CONV[TINY_CONV.index("[[suite.config]]"):]
    assert any("duplicate config name 'c4'" in m for m in problems_of(catalogue_text(twice)))


def test_exclude_with_unknown_axis_or_value():
    text = catalogue_text(TINY_CONV + 'exclude = [{ dtype = ["f16"] }]\n')
    assert any("unknown exclude axis 'dtype'" in m and "did you mean 'dtypes'" in m for m in problems_of(text))
    text = catalogue_text(TINY_CONV + 'exclude = [{ dtypes = ["bf16"] }]\n')
    assert any("exclude[0].dtypes[0]" in m and "'bf16'" in m for m in problems_of(text))


def test_unknown_metric_and_bad_tolerance():
    text = catalogue_text(TINY_CONV).replace("rms = 1e-3", "rmse = 1e-3")
    assert any("tolerances.f16.rmse" in m and "did you mean 'rms'" in m for m in problems_of(text))
    text = catalogue_text(TINY_CONV).replace("rms = 1e-3", "rms = -1.0")
    assert any("tolerances.f16.rms" in m and ">= 0" in m for m in problems_of(text))


def test_impl_that_does_not_import():
    text = catalogue_text(TINY_CONV.replace('op = "conv2d"', 'op = "conv2d"\nimpl = "no_such_pkg.kernels:conv"'))
    messages = problems_of(text)
    assert any("impl" in m and "no_such_pkg" in m for m in messages), messages


def test_all_problems_reported_together():
    text = catalogue_text(TINY_CONV.replace("kernel = 3", "kernal = 3").replace('"f16"]', '"f61"]'))
    assert len(problems_of(text)) >= 2


def test_bad_reference_and_bound_options():
    text = catalogue_text(TINY_CONV + 'reference = { device = "gpu", accumulate = -1 }\nbound = { acc = "f8", lambda = 0 }\n')
    messages = problems_of(text)
    assert any("reference.device" in m and "'gpu'" in m and "cpu, device" in m for m in messages)
    assert any("reference.accumulate" in m for m in messages)
    assert any("bound.acc" in m and "f16" in m for m in messages)
    assert any("bound.lambda" in m and "> 0" in m for m in messages)


def test_cli_exit_2_without_traceback(write_catalogue):
    path = write_catalogue(catalogue_text(TINY_CONV.replace('dtypes = ["f32", "f16"]', 'dtypes = ["f32", "fp16"]')))
    for command in (["validate", str(path)], ["gen", str(path), "--out", str(path.parent / "out")]):
        result = run_cli(*command)
        assert result.returncode == 2
        assert "Traceback" not in result.stderr
        assert "fp16" in result.stderr and "did you mean 'f16'" in result.stderr and str(path) in result.stderr


def test_cli_missing_catalogue_and_bad_argument(tmp_path):
    result = run_cli("validate", str(tmp_path / "nope.toml"))
    assert result.returncode == 2 and "cannot read" in result.stderr and "Traceback" not in result.stderr
    result = run_cli("run", "x", "--device", "tpu")
    assert result.returncode == 2 and "invalid choice" in result.stderr


def test_shipped_catalogue_is_valid():
    result = run_cli("validate", "configs.toml")
    assert result.returncode == 0, result.stderr


def test_one_typo_gives_one_message():
    """A misspelled parameter is not also reported missing; a bad axis name does not make valid exclude values unknown."""
    text = catalogue_text(TINY_CONV.replace("kernel = 3", "kernal = 3"))
    assert len(problems_of(text)) == 1
    text = catalogue_text(TINY_CONV.replace('dtypes = ["f32", "f16"]', 'dtypes = ["f32", "fp16"]')
                          + 'exclude = [{ dtypes = ["f16"], directions = ["bwd_data"] }]\n')
    [message] = problems_of(text)
    assert "'fp16'" in message
