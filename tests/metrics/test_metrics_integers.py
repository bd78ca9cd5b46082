"""Exact comparison of i8 / i32 outputs."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from e2egen.metrics import IntegerComparison, compare


def test_equal_integers_pass_by_default():
    ref = torch.arange(-128, 128, dtype=torch.float64)
    c = compare(ref, ref.to(torch.int8), "i8")
    assert isinstance(c, IntegerComparison)
    assert (c.mismatches, c.max_abs_diff, c.overflow) == (0, 0.0, 0)
    assert c.check({}).passed


def test_any_mismatch_fails_an_empty_table():
    ref = torch.tensor([1, 2, 3, 4], dtype=torch.float64)
    out = torch.tensor([1, 2, 5, 2], dtype=torch.int32)
    c = compare(ref, out, "i32")
    assert (c.mismatches, c.max_abs_diff) == (2, 2.0)
    assert c.worst["max_abs_diff"].index == 2 and c.worst["mismatches"].index == 2
    v = c.check({})
    assert not v.passed and v.failures[0].metric == "mismatches"
    assert "2 elements differ from the exact result" in v.failures[0].reason


def test_naming_an_integer_metric_replaces_the_exact_default():
    ref = torch.tensor([1, 2, 3], dtype=torch.float64)
    out = torch.tensor([1, 3, 3], dtype=torch.int8)
    c = compare(ref, out, "i8")
    assert c.check({"max_abs_diff": 1}).passed
    assert not c.check({"max_abs_diff": 0.5}).passed
    assert c.check({"mismatches": 1}).passed and not c.check({"mismatches": 0}).passed


def test_out_of_range_nan_and_inf_references_are_counted():
    ref = torch.tensor([200.0, -129.0, math.nan, math.inf, 5.0], dtype=torch.float64)
    out = torch.tensor([127, -128, 0, 127, 5], dtype=torch.int8)
    c = compare(ref, out, "i8")
    assert (c.overflow, c.nan_mismatch, c.inf_mismatch, c.mismatches, c.max_abs_diff) == (2, 1, 1, 4, 0.0)
    v = c.check({"mismatches": 4})
    assert not v.passed and {f.metric for f in v.failures} == {"overflow", "nan_mismatch", "inf_mismatch"}
    assert "outside i8's range [-128, 127]" in str(v)
    assert c.check({"mismatches": 4, "overflow": 2, "nan_mismatch": 1, "inf_mismatch": 1}).passed


def test_large_i32_values_are_exact():
    ref = torch.tensor([2 ** 31 - 1, -2 ** 31, 2 ** 31], dtype=torch.float64)
    out = torch.tensor([2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1], dtype=torch.int32)
    c = compare(ref, out, "i32", chunk=2)
    assert (c.mismatches, c.overflow, c.max_abs_diff) == (1, 1, 0.0)
    assert c.worst["overflow"].index == 2


def test_float_keys_and_bounds_do_not_apply_to_integers():
    ref = torch.zeros(2, dtype=torch.float64)
    out = torch.zeros(2, dtype=torch.int8)
    with pytest.raises(ValueError, match="rms is a float metric; i8 outputs are compared exactly"):
        compare(ref, out, "i8").check({"rms": 0})
    with pytest.raises(ValueError, match="bound= applies to float outputs"):
        compare(ref, out, "i8", bound=torch.ones(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="dtype mismatch"):
        compare(ref, out, "i32")


def test_numpy_integer_outputs_and_json():
    import json
    ref = np.array([[1.0, 2.0], [3.0, 4.0]])
    out = np.array([[1, 2], [3, 5]], dtype=np.int32)
    c = compare(ref, out, torch.int32)
    assert c.worst["max_abs_diff"].position == (1, 1)
    assert json.loads(json.dumps(c.as_dict()))["mismatches"] == 1
