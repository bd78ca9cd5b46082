"""Input rounding: every path (numba one-pass, torch round-to-odd) equals metrics.round_to bit for bit,
and widening back to float64 is exact."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from e2egen import metrics
from e2egen.runner import narrowing
from e2egen.runner.inputs import _round_to_odd_f32, reference_inputs, round_to_storage, widen_to_float64

FORMATS = [(torch.float16, "f16"), (torch.bfloat16, "bf16")]
needs_numba = pytest.mark.skipif(not narrowing.AVAILABLE, reason="numba is not installed")


def torch_path(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return _round_to_odd_f32(values).to(dtype)


def numba_path(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return narrowing.narrow(values.contiguous(), dtype)


PATHS = [pytest.param(torch_path, id="torch"), pytest.param(numba_path, id="numba", marks=needs_numba)]


def assert_bit_identical(got: torch.Tensor, values: torch.Tensor, name: str) -> None:
    """got (f16/bf16) holds round_to(values): same value, same sign (so -0 stays -0), NaN where NaN."""
    expected = metrics.round_to(values, name)
    widened = got.to(torch.float64)  # torch's widening cast is exact
    nan = expected.isnan()
    assert torch.equal(widened.isnan(), nan)
    same = (widened == expected) & (torch.signbit(widened) == torch.signbit(expected))
    bad = (~same & ~nan).nonzero().flatten()
    assert bad.numel() == 0, f"{bad.numel()} wrong, first: {values[bad[0]].item()!r} -> {widened[bad[0]].item()!r}, expected {expected[bad[0]].item()!r}"


def edge_values(dtype: torch.dtype, generator: torch.Generator) -> torch.Tensor:
    """Ties and near-ties between neighbours across the whole range (subnormals, the top binade), the
    overflow threshold, zeros of both signs, infinities, NaN and float64 values far below the format."""
    patterns = torch.arange(0, 1 << 16, dtype=torch.int32).to(torch.uint16).view(dtype).to(torch.float64)
    finite = patterns[torch.isfinite(patterns)]
    low = finite.sort().values
    high = torch.nextafter(low.to(dtype), torch.full_like(low, float("inf")).to(dtype)).to(torch.float64)
    keep = torch.isfinite(high) & (high > low)
    low, high = low[keep], high[keep]
    middle = (low + high) / 2  # exact in float64: the formats have far fewer bits
    tiny = 2.0 ** -60
    near = torch.cat([middle, middle * (1 + tiny), middle * (1 - tiny), torch.nextafter(middle, high),
                      torch.nextafter(middle, low), low, high])
    largest = float(finite.max())
    ulp_of_largest = largest - float(finite[finite < largest].max())
    threshold = largest + ulp_of_largest / 2  # at or beyond it: ±inf
    specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), threshold,
                             torch.nextafter(torch.tensor(threshold), torch.tensor(0.0)).item(), 1e300, 5e-324,
                             -5e-324, 2.0 ** -1022, 2.0 ** -200], dtype=torch.float64)
    scaled = torch.randn(1 << 18, generator=generator, dtype=torch.float64) * torch.exp2(
        torch.randint(-160, 140, (1 << 18,), generator=generator).to(torch.float64))
    values = torch.cat([near, specials, scaled])
    return torch.cat([values, -values])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype,name", FORMATS)
def test_rounding_matches_round_to_on_ties_subnormals_overflow_and_signed_zeros(path, dtype, name):
    values = edge_values(dtype, torch.Generator().manual_seed(11))
    assert_bit_identical(path(values, dtype), values, name)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype,name", FORMATS)
def test_rounding_matches_round_to_on_a_large_random_sweep(path, dtype, name):
    generator = torch.Generator().manual_seed(12)
    uniform = torch.rand(1 << 22, generator=generator, dtype=torch.float64) * 8 - 4
    # Random float64 bit patterns: every exponent, every mantissa, NaNs and infinities included.
    raw = torch.randint(-(1 << 62), 1 << 62, (1 << 21,), generator=generator, dtype=torch.int64)
    raw = (raw << 1) | torch.randint(0, 2, raw.shape, generator=generator, dtype=torch.int64)
    values = torch.cat([uniform, raw.view(torch.float64)])
    assert_bit_identical(path(values, dtype), values, name)


@needs_numba
@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=64),
       st.sampled_from(FORMATS))
def test_one_pass_rounding_equals_round_to_on_any_float64(floats, fmt):
    dtype, name = fmt
    values = torch.tensor(floats, dtype=torch.float64)
    assert_bit_identical(narrowing.narrow(values, dtype), values, name)


@needs_numba
@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, (1 << 16) - 1), min_size=1, max_size=64), st.sampled_from(FORMATS))
def test_widening_is_exact_for_every_bit_pattern(patterns, fmt):
    dtype, _ = fmt
    narrow = torch.tensor(patterns, dtype=torch.int32).to(torch.uint16).view(dtype)
    widened, expected = narrowing.widen(narrow), narrow.to(torch.float64)
    assert torch.equal(widened.isnan(), expected.isnan())
    finite = ~expected.isnan()
    assert torch.equal(widened[finite], expected[finite])
    assert torch.equal(torch.signbit(widened[finite]), torch.signbit(expected[finite]))


@pytest.mark.parametrize("dtype,name", FORMATS)
def test_round_to_storage_keeps_shape_and_reference_inputs_widen_exactly(dtype, name):
    values = torch.rand(3, 5, 7, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 6 - 3
    narrow = round_to_storage(values, dtype)
    assert narrow.shape == values.shape and narrow.dtype == dtype and narrow.is_contiguous()
    assert_bit_identical(narrow.reshape(-1), values.reshape(-1), name)
    widened = reference_inputs({"x": narrow, "t": narrow.mT}, torch.device("cpu"))
    assert torch.equal(widened["x"], metrics.round_to(values, name))
    assert torch.equal(widened["t"], metrics.round_to(values, name).mT)  # a non-contiguous view takes torch's cast
    assert torch.equal(widen_to_float64(narrow), widened["x"])


@needs_numba
def test_narrowing_refuses_what_it_cannot_round():
    with pytest.raises(ValueError, match="contiguous CPU float64"):
        narrowing.narrow(torch.zeros(4, dtype=torch.float32), torch.float16)
    with pytest.raises(ValueError, match="not torch.float32"):
        narrowing.narrow(torch.zeros(4, dtype=torch.float64), torch.float32)
