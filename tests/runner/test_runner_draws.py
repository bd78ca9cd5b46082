"""The counter-based uniform draw (runner/draws.py): SplitMix64 by its sequential definition, numba equal
to numpy bit for bit, independent of the thread count and of the chunking, in range, and uniform."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from e2egen.runner import draws

MASK = (1 << 64) - 1


def splitmix64(state: int, count: int) -> list[int]:
    """SplitMix64 as Steele, Lea & Flood define it: state += γ, then the finaliser, one output per step."""
    outputs = []
    for _ in range(count):
        state = (state + draws.GAMMA) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        outputs.append(z ^ (z >> 31))
    return outputs


@pytest.mark.parametrize("use_numba", [True, False] if draws.AVAILABLE else [False])
def test_each_value_is_splitmix64s_output_scaled_to_the_range(use_numba):
    seed, stream, lo, hi = 12345, 2, -1.5, 4.0
    values = draws.uniform((257,), lo, hi, seed, stream, torch.float64, use_numba=use_numba)
    expected = [lo + (hi - lo) * ((z >> 11) * 2.0 ** -53) for z in splitmix64(draws.stream_key(seed, stream), 257)]
    assert values.tolist() == expected
    as_f32 = draws.uniform((257,), lo, hi, seed, stream, torch.float32, use_numba=use_numba)
    assert torch.equal(as_f32, torch.tensor(expected, dtype=torch.float64).to(torch.float32))  # one rounding to f32


@pytest.mark.skipif(not draws.AVAILABLE, reason="numba is not installed")
@settings(max_examples=30, deadline=None)
@given(size=st.integers(0, 5000), seed=st.integers(0, 2 ** 64 - 1), stream=st.integers(0, 40),
       lo=st.floats(-1e6, 1e6), width=st.floats(0, 1e6), f32=st.booleans())
def test_numba_and_numpy_draw_the_same_values(size, seed, stream, lo, width, f32):
    dtype = torch.float32 if f32 else torch.float64
    fast = draws.uniform((size,), lo, lo + width, seed, stream, dtype, use_numba=True)
    plain = draws.uniform((size,), lo, lo + width, seed, stream, dtype, use_numba=False)
    assert torch.equal(fast, plain)


@pytest.mark.skipif(not draws.AVAILABLE, reason="numba is not installed")
def test_the_values_do_not_depend_on_threads_or_chunks(monkeypatch):
    shape = (3, (1 << 20) + 7)  # more than one chunk, not a multiple of it
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = draws.uniform(shape, -1.0, 1.0, 99, 1, torch.float32)
        torch.set_num_threads(2)
        two = draws.uniform(shape, -1.0, 1.0, 99, 1, torch.float32)
    finally:
        torch.set_num_threads(before)
    monkeypatch.setattr(draws, "_CHUNK", 4099)
    assert torch.equal(one, two) and torch.equal(one, draws.uniform(shape, -1.0, 1.0, 99, 1, torch.float32))


def test_values_lie_in_the_range_and_are_uniform():
    lo, hi, count, bins = -3.0, 5.0, 1 << 20, 64
    for dtype in (torch.float32, torch.float64):
        values = draws.uniform((count,), lo, hi, 7, 0, dtype).double()
        assert float(values.min()) >= lo and float(values.max()) <= hi
        counts = torch.histc(values, bins=bins, min=lo, max=hi)
        expected = count / bins
        chi_square = float(((counts - expected) ** 2 / expected).sum())
        assert chi_square < 120  # 63 degrees of freedom: P(chi² > 120) < 1e-5 for a uniform draw


def test_streams_and_seeds_are_uncorrelated():
    base = draws.uniform((1 << 18,), 0.0, 1.0, 5, 0)
    for other in (draws.uniform((1 << 18,), 0.0, 1.0, 5, 1), draws.uniform((1 << 18,), 0.0, 1.0, 6, 0)):
        correlation = float(torch.corrcoef(torch.stack([base, other]))[0, 1])
        assert abs(correlation) < 0.01  # 2^18 independent pairs: the standard error is 0.002
        assert not torch.equal(base, other)
    lagged = float(torch.corrcoef(torch.stack([base[:-1], base[1:]]))[0, 1])
    assert abs(lagged) < 0.01


def test_an_empty_range_gives_its_one_value_and_bad_dtypes_are_refused():
    assert torch.equal(draws.uniform((5,), 2.5, 2.5, 1, 0), torch.full((5,), 2.5, dtype=torch.float64))
    assert draws.uniform((0, 3), 0.0, 1.0, 1, 0).shape == (0, 3)
    with pytest.raises(ValueError, match="f32 or float64"):
        draws.uniform((5,), 0.0, 1.0, 1, 0, torch.float16)


def test_stream_keys_are_distinct():
    keys = {draws.stream_key(seed, stream) for seed in range(200) for stream in range(8)}
    assert len(keys) == 1600 and all(0 <= k < 2 ** 64 for k in keys)
