"""check(): which tolerance tables pass, which fail, and what the report says."""
from __future__ import annotations

import math

import pytest
import torch

from e2egen import metrics
from e2egen.metrics import compare


def f16_pair(ref_values, out_values):
    return torch.tensor(ref_values, dtype=torch.float64), torch.tensor(out_values, dtype=torch.float16)


def test_names_are_the_single_source_of_truth():
    assert metrics.METRIC_NAMES == ("max_abs_diff", "max_rel_diff", "max_rel_diff_old", "max_eps_diff",
                                    "max_ulp_diff", "rms", "rel_l2", "bound_ratio", "bound_rms", "bias_z",
                                    "rounding_rms")
    assert metrics.ALLOWANCE_NAMES == ("nan_mismatch", "inf_mismatch", "overflow")
    assert set(metrics.TOLERANCE_KEYS) == set(metrics.METRIC_NAMES) | set(metrics.ALLOWANCE_NAMES) | {"mismatches"}


def test_a_clean_result_passes_the_metrics_it_names():
    ref, out = f16_pair([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    v = compare(ref, out, "f16").check({"rms": 0, "max_eps_diff": 0})
    assert v.passed and not v.failures and v.summary.startswith("PASS")


def test_only_the_named_metrics_are_checked():
    ref, out = f16_pair([1.0, 2.0], [1.0, 2.5])
    c = compare(ref, out, "f16")
    assert c.check({"rms": 1.0}).passed
    v = c.check({"rms": 1.0, "max_abs_diff": 0.1})
    assert not v.passed and [f.metric for f in v.failures] == ["max_abs_diff"]
    failure = v.failures[0]
    assert (failure.value, failure.tolerance, failure.ratio) == (0.5, 0.1, 5.0)
    assert "#1" in failure.reason and "ref 2.0, out 2.5" in failure.reason


def test_nan_mismatch_fails_even_when_no_metric_is_named():
    ref, out = f16_pair([1.0, 2.0], [1.0, math.nan])
    v = compare(ref, out, "f16").check({})
    assert not v.passed and v.failures[0].metric == "nan_mismatch"
    assert "1 element disagrees on NaN" in v.failures[0].reason and "nan_mismatch 1 > 0" in v.summary


def test_a_nan_reference_with_a_number_out_is_a_nan_mismatch():
    ref, out = f16_pair([math.nan, math.nan], [math.nan, 1.0])
    c = compare(ref, out, "f16")
    assert c.nan_mismatch == 1 and c.worst["nan_mismatch"].index == 1


def test_inf_mismatch_fails_and_can_be_allowed():
    ref, out = f16_pair([1.0, 2.0, 3.0], [math.inf, 2.0, -math.inf])
    c = compare(ref, out, "f16")
    assert c.inf_mismatch == 2
    assert not c.check({"rms": 1}).passed
    v = c.check({"inf_mismatch": 2})
    assert v.passed


def test_overflow_fails_in_words_unless_allowed():
    ref, out = f16_pair([1.0, 7e4, -1e5, 7e4] + [0.5] * 9, [1.0, math.inf, -math.inf, math.inf] + [0.5] * 9)
    c = compare(ref, out, "f16")
    assert (c.overflow, c.inf_mismatch, c.compared) == (3, 0, 10)
    v = c.check({"rms": 1e-3})
    assert not v.passed
    reason = v.failures[0].reason
    assert "3 elements of the exact result exceed f16's largest value 65504: narrow the input range" in reason
    assert c.check({"rms": 1e-3, "overflow": 3}).passed
    assert not c.check({"overflow": 2}).passed


def test_overflow_allowed_but_wrongly_handled_still_fails():
    ref, out = f16_pair([7e4, 1.0], [65504.0, 1.0])  # 7e4 >= 2**16: only inf is acceptable
    v = compare(ref, out, "f16").check({"overflow": 1})
    assert not v.passed and [f.metric for f in v.failures] == ["inf_mismatch"]


def test_ftz_allowance_is_counted_in_the_report():
    sub = metrics.get_format("f16").min_subnormal
    ref, out = f16_pair([3 * sub, 5 * sub, 1.0], [0.0, 0.0, 1.0])
    c = compare(ref, out, "f16", ftz=True)
    v = c.check({"max_rel_diff": 0})
    assert v.passed and c.ftz_allowed == 2 and "ftz allowance used by 2" in str(v)
    assert not compare(ref, out, "f16").check({"max_rel_diff": 0}).passed


def test_bound_ratio_checks_against_the_bound_and_reports_it():
    ref = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    out = torch.tensor([1.0, 2.5, 3.0], dtype=torch.float32)
    bound = torch.tensor([0.0, 0.25, 1.0], dtype=torch.float64)
    c = compare(ref, out, "f32", bound=bound)
    assert c.bound_ratio == 2.0
    v = c.check({"bound_ratio": 1.0})
    assert not v.passed and "bound 0.25" in v.failures[0].reason
    assert c.check({"bound_ratio": 2.0}).passed


def test_bound_ratio_without_a_bound_is_an_error_that_says_so():
    ref, out = f16_pair([1.0], [1.0])
    with pytest.raises(ValueError, match=r"bound_ratio was not computed.*bound="):
        compare(ref, out, "f16").check({"bound_ratio": 1})


def test_unknown_tolerance_key_names_a_near_miss_and_the_choices():
    ref, out = f16_pair([1.0], [1.0])
    with pytest.raises(ValueError, match=r"unknown tolerance key 'max_eps'.*did you mean 'max_eps_diff'.*rms"):
        compare(ref, out, "f16").check({"max_eps": 1})


@pytest.mark.parametrize("tolerance", [-1, math.nan, "1e-3", True])
def test_bad_tolerance_values_are_errors(tolerance):
    ref, out = f16_pair([1.0], [1.0])
    with pytest.raises(ValueError, match="tolerance for rms must be a number >= 0"):
        compare(ref, out, "f16").check({"rms": tolerance})


def test_integer_key_on_a_float_comparison_is_an_error():
    ref, out = f16_pair([1.0], [1.0])
    with pytest.raises(ValueError, match="mismatches applies to integer outputs"):
        compare(ref, out, "f16").check({"mismatches": 0})


def test_all_zero_inputs_pass_tight_tolerances():
    ref, out = f16_pair([0.0] * 4, [0.0] * 4)
    v = compare(ref, out, "f16").check({name: 0 for name in metrics.METRIC_NAMES
                                             if name not in ("bound_ratio", "bound_rms")})
    assert v.passed


def test_infinite_metric_fails_any_tolerance():
    ref = torch.zeros(2, dtype=torch.float64)
    out = torch.tensor([0.0, 1.0], dtype=torch.float16)
    v = compare(ref, out, "f16").check({"rel_l2": 1e9})
    assert not v.passed and v.failures[0].ratio == math.inf


def test_report_lists_every_metric_with_tolerance_margin_and_worst_element():
    ref, out = f16_pair([1.0, 2.0, 4.0], [1.0, 2.0, 4.5])
    v = compare(ref, out, "f16").check({"max_rel_diff": 0.1, "rms": 1e-6})
    text = str(v)
    lines = text.splitlines()
    assert lines[0].startswith("FAIL: f16 output, shape (3,), 3 elements, 3 compared")
    without_bound = tuple(n for n in metrics.METRIC_NAMES if n not in ("bound_ratio", "bound_rms"))
    for name in without_bound + metrics.ALLOWANCE_NAMES:
        assert any(line.split()[0] == name for line in lines[2:]), name
    rel_line = next(line for line in lines if line.split()[0] == "max_rel_diff")
    assert "0.125" in rel_line and "0.1" in rel_line and "1.25" in rel_line and "#2 (2,)" in rel_line
    abs_line = next(line for line in lines if line.split()[0] == "max_abs_diff")
    assert " - " in abs_line  # computed, not checked
    assert "histogram" in text and "failures:" in text
    # rms = 0.5 / (sqrt(3) * 4.5)
    assert v.summary == "FAIL: max_rel_diff 0.125 > 0.1 (1.25x); rms 0.06415 > 1e-06 (6.42e+04x)"


def test_tolerances_must_be_a_mapping():
    ref, out = f16_pair([1.0], [1.0])
    with pytest.raises(ValueError, match="mapping"):
        compare(ref, out, "f16").check(["rms"])
