"""upper_matmul (runner/upper_matmul.py): |L| @ |R| for float64 magnitudes, never below the exact sum.

Brute force: Fraction sums of the exact products of the float64 operands. The result must be >= that for
every operand, on both paths (the f32 product where the left operand has F32_FROM_ROWS rows or more, else
float64), with operands that underflow f32, that f32 cannot hold, and with subnormals flushed; and no
looser than the widening says, so that a path that widens too much (or never takes f32) fails too.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from e2egen.metrics import fused_numba
from e2egen.metrics.backend import ENV_VAR
from e2egen.runner.magnitude import F32_MAX, F32_MIN_NORMAL, F32_UNIT_ROUNDOFF, F64_UNIT_ROUNDOFF, widening
from e2egen.runner.upper_matmul import (F32_FROM_ROWS, Magnitudes, UnwidenedProduct, _rounded_up_torch, rounded_up,
                                       upper_matmul, upper_product)

F32_SMALLEST = 2.0 ** -149


def exact_products(left: torch.Tensor, right: torch.Tensor) -> list[list[Fraction]]:
    rows, cols = left.shape[0], right.shape[1]
    a = [[Fraction(abs(v)) for v in row] for row in left.tolist()]
    b = [[Fraction(abs(v)) for v in row] for row in right.tolist()]
    return [[sum((a[i][t] * b[t][j] for t in range(len(b))), Fraction(0)) for j in range(cols)] for i in range(rows)]


def magnitudes_of(exponents: st.SearchStrategy[int]) -> st.SearchStrategy[float]:
    """float64 values of either sign with the given exponents and any 53-bit significand (zeros too)."""
    significand = st.integers(1 << 52, (1 << 53) - 1)
    value = st.builds(lambda s, e, neg: (-1.0 if neg else 1.0) * math.ldexp(s, e - 52), significand, exponents,
                      st.booleans())
    return st.one_of(value, st.just(0.0), st.just(-0.0))


@st.composite
def operands(draw, low: int, high: int, rows: int):
    k, cols = draw(st.integers(1, 24)), draw(st.integers(1, 3))
    values = magnitudes_of(st.integers(low, high))
    left = torch.tensor(draw(st.lists(values, min_size=rows * k, max_size=rows * k)), dtype=torch.float64)
    right = torch.tensor(draw(st.lists(values, min_size=k * cols, max_size=k * cols)), dtype=torch.float64)
    return left.reshape(rows, k), right.reshape(k, cols)


def check_bound(left: torch.Tensor, right: torch.Tensor, unit: float) -> None:
    """upper_matmul >= the exact sums, and at most (1 + u)^K · W above the operands rounded up to the
    path's format (+ the underflow allowance)."""
    k = left.shape[-1]
    bound = upper_matmul(left, right)
    exact = exact_products(left, right)
    width = (1 + unit) ** k * widening(k + 4, unit) * (1 + 2.0 ** -50)
    smallest = F32_MIN_NORMAL if unit == F32_UNIT_ROUNDOFF else 2.0 ** -1022
    for i, row in enumerate(exact):
        for j, value in enumerate(row):
            assert Fraction(float(bound[i, j])) >= value, (i, j, float(bound[i, j]), float(value))
            # rounding an operand up moves it by less than one f32 step: 2u relative
            rounded_up_terms = float(value) * (1 + 2 * unit) ** 2 if unit == F32_UNIT_ROUNDOFF else float(value)
            assert float(bound[i, j]) <= rounded_up_terms * width + 2 * k * 8 * smallest + 2 * k * F32_SMALLEST


@settings(max_examples=60, deadline=None)
@given(operands(-30, 30, F32_FROM_ROWS))
def test_the_f32_product_is_an_upper_bound_and_close(pair):
    check_bound(*pair, F32_UNIT_ROUNDOFF)


@settings(max_examples=40, deadline=None)
@given(operands(-30, 30, F32_FROM_ROWS - 1))
def test_the_float64_product_is_an_upper_bound_and_close(pair):
    check_bound(*pair, F64_UNIT_ROUNDOFF)


@settings(max_examples=60, deadline=None)
@given(operands(-160, -60, F32_FROM_ROWS))
def test_products_that_underflow_f32_stay_below_the_bound(pair):
    """Operands below f32's range (raised to its smallest normal) and products that underflow it."""
    left, right = pair
    bound = upper_matmul(left, right)
    for i, row in enumerate(exact_products(left, right)):
        for j, value in enumerate(row):
            assert Fraction(float(bound[i, j])) >= value


@pytest.fixture
def flushing():
    """FTZ and DAZ on for the test (torch.set_flush_denormal), off again after."""
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush subnormals")
    yield
    torch.set_flush_denormal(False)


@pytest.mark.parametrize("backend", ["numba", "torch"])
@pytest.mark.parametrize("small, partner", [(2.0 ** -100, 2.0 ** -40),  # normal operands, products flushed
                                            (1e-40, 1e30)])  # f32-subnormal operands, read as zero under DAZ
def test_flushed_subnormals_stay_below_the_bound(small, partner, backend, flushing, monkeypatch):
    """With FTZ and DAZ on, an f32 product of small values flushes its terms to zero, and subnormal operands
    read as zero; the raised operands and the absolute allowance keep the bound above the exact sum, on the
    numba and the torch rounding alike."""
    monkeypatch.setenv(ENV_VAR, backend)
    left = torch.full((F32_FROM_ROWS, 16), small, dtype=torch.float64)
    right = torch.full((16, 2), partner, dtype=torch.float64)
    bound = upper_matmul(left, right)
    exact = Fraction(small) * Fraction(partner) * 16
    assert all(Fraction(value) >= exact for value in bound.flatten().tolist())


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_the_rounding_passes_raise_subnormals_with_daz_on(backend, flushing, monkeypatch):
    monkeypatch.setenv(ENV_VAR, backend)
    values = torch.tensor([1e-40, 2.0 ** -149, 0.0, 1.0, 2.0 ** -1060], dtype=torch.float64)
    up, _ = rounded_up(values)
    assert up[:4].view(torch.int32).tolist() == [0x00800000, 0x00800000, 0, 0x3F800000]
    # a float64 subnormal reads as zero under DAZ: its terms (below 2^-1022 · f32max each) lie far inside
    # the absolute allowance
    assert up[4].view(torch.int32).item() in (0, 0x00800000)


def test_the_f32_path_is_the_rounded_up_product_widened():
    generator = torch.Generator().manual_seed(3)
    left = torch.rand(2, F32_FROM_ROWS, 40, dtype=torch.float64, generator=generator) - 0.5
    right = torch.rand(2, 40, 5, dtype=torch.float64, generator=generator) - 0.5
    summed = torch.matmul(rounded_up(left)[0], rounded_up(right)[0]).to(torch.float64)
    expected = summed.add_(40 * 2.0 ** -123).mul_(widening(44))
    assert torch.equal(upper_matmul(left, right), expected)
    assert not torch.equal(expected, torch.matmul(left.abs(), right.abs()))


@pytest.mark.parametrize("value", [3.0e38, math.inf, math.nan])
def test_operands_f32_cannot_hold_take_float64(value):
    left = torch.ones(F32_FROM_ROWS, 4, dtype=torch.float64)
    left[0, 0] = value
    right = torch.ones(4, 2, dtype=torch.float64)
    bound = upper_matmul(left, right)
    expected = torch.matmul(left, right).add_(4 * 8 * 2.0 ** -1022).mul_(widening(8, F64_UNIT_ROUNDOFF))
    assert torch.allclose(bound, expected, rtol=0, atol=0, equal_nan=True)  # the same bits (NaN stays NaN)


def test_sums_that_could_overflow_f32_take_float64():
    left = torch.full((F32_FROM_ROWS, 4), F32_MAX / 4, dtype=torch.float64)
    right = torch.ones(4, 1, dtype=torch.float64)
    assert torch.isfinite(upper_matmul(left, right)).all()


def test_a_reduced_f32_matmul_precision_takes_float64():
    left = torch.rand(F32_FROM_ROWS, 8, dtype=torch.float64)
    right = torch.rand(8, 3, dtype=torch.float64)
    expected = torch.matmul(left, right).add_(8 * 8 * 2.0 ** -1022).mul_(widening(12, F64_UNIT_ROUNDOFF))
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        assert torch.equal(upper_matmul(left, right), expected)
    finally:
        torch.set_float32_matmul_precision(before)


def test_a_shared_operand_is_rounded_once_and_serves_every_product():
    right = Magnitudes(torch.rand(16, 4, dtype=torch.float64))
    first = right.rounded_up
    for rows in (F32_FROM_ROWS, 2 * F32_FROM_ROWS):
        left = torch.rand(rows, 16, dtype=torch.float64)
        assert torch.equal(upper_matmul(left, right), upper_matmul(left, right.values))
    assert right.rounded_up is first


# -- the rounding pass ------------------------------------------------------------------------------------

def awkward_values() -> list[float]:
    values = [0.0, -0.0, 1.0, -1.0, F32_MIN_NORMAL, F32_SMALLEST, F32_SMALLEST / 2, 2.0 ** -1074, 2.0 ** -1022,
              F32_MAX, math.nextafter(F32_MAX, math.inf), F32_MAX * (1 + 2.0 ** -25), 1e300, math.inf, -math.inf,
              math.nan, 1 / 3, -2 / 3, 0.1]
    for f32 in (1.0, F32_MIN_NORMAL, 2.0 ** -140, 1.5, 1e20):  # an f32 value and its float64 neighbours
        values += [f32, math.nextafter(f32, 0.0), math.nextafter(f32, math.inf)]
    values.append(math.nextafter(F32_MIN_NORMAL, 0.0))
    return values


def check_pass(values: torch.Tensor) -> None:
    up, largest = rounded_up(values)
    defined = _rounded_up_torch(values)
    assert torch.equal(up.view(torch.int32), defined.view(torch.int32))
    absolute = values.abs()
    finite = torch.isfinite(absolute) & (absolute <= F32_MAX)
    assert (up[finite].double() >= absolute[finite]).all()
    below = torch.nextafter(up, torch.tensor(0.0)).double()
    least = (below < absolute) | (up == F32_MIN_NORMAL) | (up == 0)
    assert least[finite].all()  # the least f32 >= |x|, or the smallest normal
    assert not ((up > 0) & (up < F32_MIN_NORMAL)).any()
    defined_largest = float(defined.max()) if defined.numel() else 0.0
    assert largest == defined_largest or (math.isnan(largest) and math.isnan(defined_largest))


def test_rounding_up_awkward_values():
    check_pass(torch.tensor(awkward_values(), dtype=torch.float64))
    check_pass(torch.tensor([v for v in awkward_values() if not math.isnan(v)], dtype=torch.float64))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=64))
def test_rounding_up_any_float64(values):
    check_pass(torch.tensor(values, dtype=torch.float64))


@pytest.mark.skipif(not fused_numba.AVAILABLE, reason="numba is not installed")
def test_rounding_up_random_bit_patterns_on_several_threads():
    patterns = np.random.default_rng(7).integers(-(2 ** 63), 2 ** 63 - 1, size=3 << 18, dtype=np.int64)
    values = torch.from_numpy(patterns.view(np.float64))
    values = values[~values.isnan()]
    check_pass(values)
    check_pass(values[: values.numel() // 2 * 2].reshape(-1, 2)[:, 0])  # strided: made contiguous first


def exact_conv2d(x: torch.Tensor, w: torch.Tensor, pad: int) -> list:
    """Fraction sums of |x|·|w| over each output's window (stride 1, zero padding)."""
    _, channels, height, width = x.shape
    filters, _, kh, kw = w.shape
    xs, ws = x.abs().tolist(), w.abs().tolist()
    out = []
    for f in range(filters):
        for i in range(height + 2 * pad - kh + 1):
            for j in range(width + 2 * pad - kw + 1):
                total = Fraction(0)
                for c in range(channels):
                    for a in range(kh):
                        for b in range(kw):
                            row, col = i + a - pad, j + b - pad
                            if 0 <= row < height and 0 <= col < width:
                                total += Fraction(xs[0][c][row][col]) * Fraction(ws[f][c][a][b])
                out.append(total)
    return out


@settings(max_examples=25, deadline=None)
@given(st.lists(magnitudes_of(st.integers(-140, 20)), min_size=2 * 5 * 5 + 3 * 2 * 3 * 3,
                max_size=2 * 5 * 5 + 3 * 2 * 3 * 3))
def test_a_convolution_of_magnitudes_is_an_upper_bound(values):
    """upper_product with a convolution (conv→gemm's first product): each output sums C·R·S products."""
    x = torch.tensor(values[:50], dtype=torch.float64).reshape(1, 2, 5, 5)
    w = torch.tensor(values[50:], dtype=torch.float64).reshape(3, 2, 3, 3)
    bound = upper_product(x, w, lambda a, b: torch.nn.functional.conv2d(a, b, padding=1), 2 * 3 * 3)
    # tiny operands raised to f32's smallest normal add up to that times the other operand per term
    raised = 18 * F32_MIN_NORMAL * float(x.abs().max() + w.abs().max()) * 1.01
    for got, value in zip(bound.flatten().tolist(), exact_conv2d(x, w, 1)):
        assert Fraction(got) >= value
        widest = (float(value) + raised) * (1 + 2 * F32_UNIT_ROUNDOFF) ** 20 * widening(22)
        assert got <= widest + 18 * 8 * F32_MIN_NORMAL * 2


# -- the widening pass ----------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(st.sampled_from([torch.float32, torch.float64]), st.integers(1, 300), st.floats(0.0, 1e-30),
       st.floats(1.0, 1.5), st.integers(0, 2 ** 32 - 1))
def test_the_widening_pass_is_torchs_two_roundings(dtype, size, allowance, factor, seed):
    values = torch.rand(size, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * 100
    values[0, 0], values[-1, -1] = math.inf, math.nan
    summed = values.to(dtype)
    widened = UnwidenedProduct(summed, allowance, factor).widened()
    expected = summed.to(torch.float64).add_(allowance).mul_(factor)
    assert torch.allclose(widened, expected, rtol=0, atol=0, equal_nan=True)  # the same bits


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 5), st.integers(1, 7), st.integers(0, 2 ** 32 - 1))
def test_stacked_rows_are_regrouped_by_term(blocks, terms, per_block, columns, seed):
    """Row (block, term, i) of the stacked product lands at (term, block, i), widened; the torch fallback
    (E2E_METRICS_BACKEND=torch) the same."""
    summed = torch.rand(blocks, terms * per_block, columns, generator=torch.Generator().manual_seed(seed))
    product = UnwidenedProduct(summed, 1e-30, 1.25)
    expected = product.widened().view(blocks, terms, per_block, columns).transpose(0, 1).reshape(terms, -1, columns)
    assert torch.equal(product.widened_by_term(terms, per_block), expected)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_VAR, "torch")
        assert torch.equal(product.widened_by_term(terms, per_block), expected)
