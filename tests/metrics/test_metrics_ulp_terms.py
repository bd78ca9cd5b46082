"""add_ulps (the bound's output-rounding term in one pass) against metrics.ulp, the definition."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from e2egen import metrics
from e2egen.metrics import numba_kernels
from e2egen.metrics.ulp_terms import add_ulps, scaled_plus_ulps

FORMATS = ["f32", "f16", "bf16", "f8e4m3fn", "f8e5m2", "e8m0"]  # e8m0: max is a power of two (rounding.ulp_emax)
SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -2.0, 65504.0, 65520.0, 1e300, 5e-324, 2.0 ** -24, 2.0 ** -149,
           448.0, 3.0e38, 2.0 ** -126]


def expected(total, ref, dtype, count):
    return total + metrics.ulp(ref, dtype) * count


def same(a, b):  # bit for bit, NaN included
    return torch.equal(a.view(torch.int64), b.view(torch.int64)) or torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0))


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(SPECIAL), min_size=1, max_size=80),
       dtype=st.sampled_from(FORMATS), count=st.sampled_from([1.0, 0.5, 2.0, 3.25]))
def test_fused_term_equals_the_definition(values, dtype, count):
    ref = torch.tensor(values, dtype=torch.float64)
    total = torch.rand(ref.shape, dtype=torch.float64)
    assert same(add_ulps(total.clone(), ref, dtype, count), expected(total, ref, dtype, count))


def test_every_chunk_and_the_ragged_end_are_covered(monkeypatch):
    from e2egen.metrics import threads

    chunk = 1 << 12
    monkeypatch.setattr(threads, "LIGHT_TASK", chunk)  # the pass's tasks, small enough to cut this into several
    ref = torch.randn(3 * chunk + 17, dtype=torch.float64) * 1e3
    total = torch.zeros_like(ref)
    assert same(add_ulps(total, ref, "bf16", 1.0), metrics.ulp(ref, "bf16"))


def test_non_contiguous_and_shaped_tensors_take_the_definition_and_agree():
    ref = torch.randn(64, 48, dtype=torch.float64).t()
    total = torch.ones_like(ref)
    result = add_ulps(total, ref, "f16", 2.0)
    assert result is total and same(result, 1 + 2.0 * metrics.ulp(ref, "f16"))


def test_mismatched_tensors_are_refused():
    with pytest.raises(ValueError, match="float64 tensors of one shape"):
        add_ulps(torch.zeros(3), torch.zeros(3, dtype=torch.float64), "f16", 1.0)
    with pytest.raises(ValueError, match="float64 tensors of one shape"):
        add_ulps(torch.zeros(3, dtype=torch.float64), torch.zeros(4, dtype=torch.float64), "f16", 1.0)


def test_the_fused_and_the_fallback_paths_agree(monkeypatch):
    ref = torch.tensor(SPECIAL * 5000, dtype=torch.float64) * torch.rand(len(SPECIAL) * 5000, dtype=torch.float64)
    fused = add_ulps(torch.zeros_like(ref), ref, "f16", 1.5)
    monkeypatch.setattr(numba_kernels, "AVAILABLE", False)  # as where numba is not installed
    assert same(add_ulps(torch.zeros_like(ref), ref, "f16", 1.5), fused)


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(SPECIAL), min_size=1, max_size=80),
       dtype=st.sampled_from(FORMATS), scale=st.floats(0, 1e3), count=st.sampled_from([1.0, 0.5, 0.0]))
def test_scaled_terms_plus_ulps_in_one_pass_equal_the_two_steps(values, dtype, scale, count):
    ref = torch.tensor(values, dtype=torch.float64)
    terms = torch.rand(ref.shape, dtype=torch.float64) * 1e3
    result = scaled_plus_ulps(terms, scale, ref, dtype, count)
    assert result is not terms and same(result, (terms * scale) + metrics.ulp(ref, dtype) * count)


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(SPECIAL), min_size=1, max_size=80),
       dtype=st.sampled_from(FORMATS), scale=st.floats(0, 1e3), widening=st.floats(1.0, 1.01))
def test_f32_sums_widened_in_the_pass_equal_widening_first(values, dtype, scale, widening):
    """Σ|a·b| summed in f32 and widened inside the pass: the bits of widening it in float64 first
    (runner/magnitude.WidenedSum), in the fused pass and in the fallback."""
    ref = torch.tensor(values, dtype=torch.float64)
    summed = (torch.rand(ref.shape, dtype=torch.float64) * 1e3).float()
    widened_first = summed.to(torch.float64).mul_(widening)
    expected = scaled_plus_ulps(widened_first, scale, ref, dtype, 1.0)
    with pytest.MonkeyPatch.context() as patch:
        for fused in (True, False):
            patch.setattr(numba_kernels, "AVAILABLE", fused and numba_kernels.AVAILABLE)
            result = scaled_plus_ulps(summed, scale, ref, dtype, 1.0, widening=widening)
            assert result.dtype == torch.float64 and same(result, expected)
    assert same(summed.to(torch.float64).mul_(widening), widened_first)  # the terms themselves untouched


def test_the_torch_backend_takes_the_definition(monkeypatch):
    from e2egen.metrics import ulp_terms
    from e2egen.metrics.backend import ENV_VAR

    ref = torch.tensor(SPECIAL * 100, dtype=torch.float64)
    fused = scaled_plus_ulps(ref.abs(), 2.0, ref, "bf16", 1.0)
    monkeypatch.setenv(ENV_VAR, "torch")  # as on a device: the numba pass must not run

    def numba_pass(*args):
        raise AssertionError("the numba pass ran under E2E_METRICS_BACKEND=torch")

    monkeypatch.setattr(ulp_terms, "_run", numba_pass)
    assert same(scaled_plus_ulps(ref.abs(), 2.0, ref, "bf16", 1.0), fused)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(SPECIAL), min_size=1, max_size=80),
       dtype=st.sampled_from(FORMATS), stored=st.booleans(), f32_terms=st.booleans(), data=st.data())
def test_partial_sums_bound_equals_its_definition(values, dtype, stored, f32_terms, data):
    """partial_sums_plus_ulps: (unit·(running + absolute) + constant) + (terms·alpha + count·ulp_T(ref)), the
    same IEEE operations in the same order as torch's, bit for bit."""
    from e2egen.metrics.ulp_terms import partial_sums_plus_ulps

    ref = torch.tensor(values, dtype=torch.float64)
    generator = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1)))
    running, absolute, terms = (torch.rand(ref.shape, dtype=torch.float64, generator=generator) * 1e3 for _ in range(3))
    if f32_terms:
        terms = terms.float()
    unit, constant, alpha, count = 2.0 ** -10, 3e-30, 1.0009765625, data.draw(st.sampled_from([1.0, 0.5, 2.0]))
    result = partial_sums_plus_ulps(running, absolute if stored else None, unit, constant, terms, alpha, ref, dtype, count)
    accumulated = (running + absolute) if stored else running + 0.0
    definition = accumulated.mul(unit).add(constant).add(terms.double().mul(alpha).add(metrics.ulp(ref, dtype).mul(count)))
    assert result is not None and same(result, definition)


def test_the_partial_sums_bound_leaves_what_it_does_not_cover_to_its_caller():
    ref = torch.randn(4, 6, dtype=torch.float64)
    from e2egen.metrics.ulp_terms import partial_sums_plus_ulps

    assert partial_sums_plus_ulps(ref.mT, None, 1.0, 0.0, ref.mT, 1.0, ref.mT, "f16", 1.0) is None  # strided
    assert partial_sums_plus_ulps(ref.float(), None, 1.0, 0.0, ref, 1.0, ref, "f16", 1.0) is None  # f32 sums
    assert partial_sums_plus_ulps(ref[:2], None, 1.0, 0.0, ref, 1.0, ref, "f16", 1.0) is None  # shapes differ
