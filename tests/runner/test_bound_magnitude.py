"""Σ|a·b| summed in f32 and widened (runner/magnitude.py) is never below the exact sum.

Brute force: each product of two f32 values is exact in float64 (48 significant bits), and math.fsum sums
them correctly rounded, so `exact` below is Σ|a·b| to the last bit. The widened f32 sum must be >= it for
every input, including long reductions whose f32 sum drops every small term, and inputs near the ends of
f32's range (there the premises send the sum to float64).
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from e2egen.runner import make_problem
from e2egen.runner.magnitude import F32_UNIT_ROUNDOFF, F64_UNIT_ROUNDOFF, f32_premises, magnitude, magnitude_bound, widening


def gemm(m: int, n: int, k: int):
    return make_problem("gemm", "fwd", "f32", "nn", {"m": m, "n": n, "k": k}, (-1.0, 1.0), 1)


def highest(exact: torch.Tensor, k: int) -> torch.Tensor:
    """The most the widened f32 sum can be: every rounding up, (1 + u)^K, then the widening."""
    return exact * (1 + F32_UNIT_ROUNDOFF) ** k * widening(k) * (1 + 2.0 ** -50)


def exact_gemm_magnitude(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    rows, cols = a.shape[0], b.shape[1]
    out = torch.empty(rows, cols, dtype=torch.float64)
    for i in range(rows):
        for j in range(cols):
            out[i, j] = math.fsum((a[i].abs() * b[:, j].abs()).tolist())  # each product exact in float64
    return out


def f32_values(exponents: st.SearchStrategy[int]) -> st.SearchStrategy[float]:
    """f32 values of either sign with the given exponents and random 24-bit significands (zeros too)."""
    significand = st.integers(1 << 23, (1 << 24) - 1)
    value = st.builds(lambda s, e, neg: (-1.0 if neg else 1.0) * math.ldexp(s, e - 23), significand, exponents, st.booleans())
    return st.one_of(value, st.just(0.0))


@st.composite
def gemm_inputs(draw, low: int, high: int, max_k: int = 64):
    m, n, k = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, max_k))
    values = f32_values(st.integers(low, high))
    a = torch.tensor(draw(st.lists(values, min_size=m * k, max_size=m * k)), dtype=torch.float64).reshape(m, k)
    b = torch.tensor(draw(st.lists(values, min_size=k * n, max_size=k * n)), dtype=torch.float64).reshape(k, n)
    return a, b


@settings(max_examples=80, deadline=None)
@given(gemm_inputs(-20, 20))
def test_widened_f32_sum_is_an_upper_bound_and_close(inputs):
    a, b = inputs
    problem = gemm(a.shape[0], b.shape[1], a.shape[1])
    exact = exact_gemm_magnitude(a, b)
    assert f32_premises(problem, {"a": a, "b": b}) == ""  # the f32 path is the one under test
    bound = magnitude_bound(problem, {"a": a, "b": b})
    assert (bound >= exact).all()
    assert (bound <= highest(exact, a.shape[1])).all()


@settings(max_examples=60, deadline=None)
@given(gemm_inputs(-149, 127, max_k=16))
def test_any_f32_inputs_near_the_range_limits_stay_bounded(inputs):
    """Subnormal inputs, products that underflow or sums that overflow in f32: the premises catch them."""
    a, b = inputs
    exact = exact_gemm_magnitude(a, b)
    bound = magnitude_bound(gemm(a.shape[0], b.shape[1], a.shape[1]), {"a": a, "b": b})
    assert (bound >= exact).all() and torch.isfinite(bound).all()


@pytest.mark.parametrize("k", [1 << 12, 1 << 16])
def test_a_long_reduction_that_drops_every_small_term_in_f32(k):
    """2^24 followed by ones: f32 sums that return 2^24 (each 1 is a tie that rounds to even) miss K - 1."""
    a = torch.ones(2, k, dtype=torch.float64)
    a[0, 0] = 2.0 ** 24
    a[1, -1] = 2.0 ** 24  # the big term last too, for kernels that sum from the other end
    b = torch.ones(k, 1, dtype=torch.float64)
    bound = magnitude_bound(gemm(2, 1, k), {"a": a, "b": b})
    assert (bound >= 2.0 ** 24 + (k - 1)).all()
    assert bound.dtype == torch.float64 and bound.shape == (2, 1)


def test_random_long_reduction():
    g = torch.Generator().manual_seed(7)
    a = (torch.rand(3, 1 << 16, generator=g) * 2 - 1).to(torch.float64)
    b = torch.rand(1 << 16, 2, generator=g).to(torch.float64)
    exact = exact_gemm_magnitude(a, b)
    bound = magnitude_bound(gemm(3, 2, 1 << 16), {"a": a, "b": b})
    assert (bound >= exact).all() and (bound <= highest(exact, 1 << 16)).all()


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_convolutions_against_the_float64_sum(direction):
    params = {"n": 2, "c": 3, "k": 4, "hw": [7, 6], "kernel": 3, "stride": 2, "pad": 1, "dilation": [1, 2]}
    problem = make_problem("conv2d", direction, "bf16", "nchw", params, (-3.0, 2.0), 5)
    from e2egen.runner.inputs import generate_inputs

    tensors = {name: t.double() for name, t in generate_inputs(problem).items()}
    assert f32_premises(problem, tensors) == ""
    exact = magnitude(problem, tensors)  # float64: exact here (bf16 products, short sums)
    bound = magnitude_bound(problem, tensors)
    k = problem.reduction_size
    assert (bound >= exact).all() and (bound <= highest(exact, k)).all()


@pytest.mark.parametrize("a_value,b_value,reason", [
    (2.0 ** -70, 2.0 ** -70, "underflow"),  # a product of normals below f32's normal range
    (2.0 ** -140, 1.0, "subnormal"),  # an f32 subnormal input (a kernel flushing it would drop it)
    (2.0 ** -140, 2.0 ** 30, "subnormal"),  # the same, though its products are normal (found in review)
    (2.0 ** 64, 2.0 ** 63, "overflow"),
    (1.0 + 2.0 ** -30, 1.0, None),  # not an f32 value: no premise fails, the conversion check catches it
])
def test_inputs_the_f32_sum_cannot_take_go_to_float64(a_value, b_value, reason):
    a = torch.full((2, 4), a_value, dtype=torch.float64)
    b = torch.full((4, 2), b_value, dtype=torch.float64)
    problem = gemm(2, 2, 4)
    if reason:
        assert reason in f32_premises(problem, {"a": a, "b": b})
    float64 = magnitude(problem, {"a": a, "b": b}) * widening(4, F64_UNIT_ROUNDOFF)
    assert torch.equal(magnitude_bound(problem, {"a": a, "b": b}), float64)


def test_reduced_precision_matmul_settings_send_the_sum_to_float64():
    a, b = torch.rand(2, 8, dtype=torch.float64).float().double(), torch.rand(8, 2, dtype=torch.float64).float().double()
    problem = gemm(2, 2, 8)
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        assert "lower precision" in f32_premises(problem, {"a": a, "b": b})
        float64 = magnitude(problem, {"a": a, "b": b}) * widening(8, F64_UNIT_ROUNDOFF)
        assert torch.equal(magnitude_bound(problem, {"a": a, "b": b}), float64)
    finally:
        torch.set_float32_matmul_precision(before)
    assert f32_premises(problem, {"a": a, "b": b}) == ""


def test_a_reduction_too_long_for_f32_goes_to_float64():
    problem = gemm(1, 1, 1 << 21)
    assert "too long" in f32_premises(problem, {"a": torch.ones(1, 1 << 21, dtype=torch.float64),
                                                "b": torch.ones(1 << 21, 1, dtype=torch.float64)})


def test_widening_covers_k_plus_four_roundings():
    for k in (1, 17, 1 << 16, 1 << 20):
        assert widening(k) >= (1 - F32_UNIT_ROUNDOFF) ** -(k + 4)
        assert widening(k) <= (1 + 2.0 ** -50) / (1 - (k + 4) * F32_UNIT_ROUNDOFF)


@pytest.mark.parametrize("values", [
    [0.0, -1.5, 2.0 ** -126, 3.0],
    [0.0, 0.0],
    [1.0, math.nan],
    [1.0, 1e39],  # beyond f32
    [1.0, 1.0 + 2.0 ** -40],
    [-(2.0 ** -149), 2.0 ** 127],
])
def test_the_numba_scan_and_the_torch_scan_agree(values, monkeypatch):
    from e2egen.metrics import numba_kernels
    from e2egen.runner import magnitude as module

    t = torch.tensor(values * 40000, dtype=torch.float64).reshape(-1, 4)  # several scan chunks
    fused = module._narrowed(t)
    monkeypatch.setattr(numba_kernels, "AVAILABLE", False)  # as where numba is not installed
    plain = module._narrowed(t)
    assert fused[1:] == plain[1:] or (math.isnan(fused[2]) and fused[3] is plain[3] is False)
    assert torch.equal(fused[0].nan_to_num(7.0), plain[0].nan_to_num(7.0))


def test_the_torch_backend_scans_in_torch(monkeypatch):
    from e2egen.metrics.backend import ENV_VAR
    from e2egen.runner import magnitude as module

    t = torch.tensor([0.5, -1.5, 2.0 ** -126, 3.0] * 1000, dtype=torch.float64)
    fused = module._narrowed(t)
    monkeypatch.setenv(ENV_VAR, "torch")

    def numba_scan(*args):
        raise AssertionError("the numba scan ran under E2E_METRICS_BACKEND=torch")

    monkeypatch.setattr(module, "_narrow_chunk", numba_scan)
    plain = module._narrowed(t)
    assert fused[1:] == plain[1:] and torch.equal(fused[0], plain[0])
