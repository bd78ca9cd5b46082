"""bound.PartialSums' running sums by runner/partial_passes.py's numba passes, one partial or two at a time,
bit for bit the torch ops they replace (abs, add, add, abs, add per partial, on the partials widened to
float64), special values, f32 partials and every thread count included."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from e2egen.metrics import fused_numba
from e2egen.runner.bound import PartialSums
from e2egen.runner.partial_passes import _applies, accumulate, start

pytestmark = pytest.mark.skipif(not fused_numba.AVAILABLE, reason="numba is not installed")

SPECIALS = [0.0, -0.0, 1.0, -1.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
            -1.7976931348623157e308, float("inf"), float("-inf"), float("nan"), 1e-300, 3.0, -7.5]


def torch_sums(partials: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The definition: torch's ops on the partials widened to float64 (exact), one at a time."""
    partials = [p.to(torch.float64) for p in partials]
    absolute, running, total = partials[0].abs(), partials[0].clone(), partials[0].abs()
    for part in partials[1:]:
        absolute.add_(part.abs())
        running.add_(part)
        total.add_(running.abs())
    return absolute, running, total


def numba_sums(partials: list[torch.Tensor], group: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The numba passes, `group` (1 or 2) partials per pass, as PartialSums.of calls them."""
    groups = [tuple(partials[i:i + group]) for i in range(0, len(partials), group)]
    assert all(_applies(parts) for parts in groups)  # the numba passes, not torch's ops
    sums = start(groups[0])
    for parts in groups[1:]:
        accumulate(parts, *sums)
    return sums


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, zeros' signs included; NaN where the other has NaN (its payload is nobody's business)."""
    nan = torch.isnan(a)
    return bool(torch.equal(nan, torch.isnan(b))
                and torch.equal(a[~nan].view(torch.int64), b[~nan].view(torch.int64)))


@pytest.mark.parametrize("group", [1, 2])
def test_every_pairing_of_special_values_matches_the_torch_ops(group: int) -> None:
    values = torch.tensor(SPECIALS, dtype=torch.float64)
    first, second = torch.meshgrid(values, values, indexing="ij")
    third = torch.roll(first.flatten(), 3).reshape(first.shape)
    partials = [first.contiguous(), second.contiguous(), third.contiguous()]
    for count in (1, 2, 3):
        for mine, theirs in zip(numba_sums(partials[:count], group), torch_sums(partials[:count])):
            assert same_bits(mine, theirs)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), count=st.integers(1, 6), length=st.integers(1, 300), group=st.sampled_from([1, 2]),
       width=st.sampled_from([32, 64]))
def test_random_partials_match_the_torch_ops(data, count: int, length: int, group: int, width: int) -> None:
    floats = st.floats(allow_nan=True, allow_infinity=True, width=width)
    partials = [torch.from_numpy(data.draw(arrays(f"float{width}", length, elements=floats))) for _ in range(count)]
    for mine, theirs in zip(numba_sums(partials, group), torch_sums(partials)):
        assert same_bits(mine, theirs)


@pytest.mark.parametrize("group", [1, 2])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_large_partials_split_over_threads_match_the_torch_ops(threads: int, group: int) -> None:
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        generator = torch.Generator().manual_seed(threads)
        partials = [torch.randn(3, 700_001, dtype=torch.float64, generator=generator) for _ in range(5)]
        for mine, theirs in zip(numba_sums(partials, group), torch_sums(partials)):
            assert same_bits(mine, theirs)
    finally:
        torch.set_num_threads(previous)


def test_what_the_passes_do_not_cover_is_left_to_torch() -> None:
    """Strided partials, other dtypes, a pair of two dtypes or shapes: torch's ops, the same sums."""
    generator = torch.Generator().manual_seed(3)
    contiguous = torch.randn(4, 6, dtype=torch.float64, generator=generator)
    other = torch.randn(4, 6, dtype=torch.float64, generator=generator)
    for parts in [(contiguous.mT.contiguous().mT,), (contiguous.half(),), (contiguous, other.float()),
                  (contiguous, other[:2])]:
        assert not _applies(parts)
    for parts in [(contiguous.mT.contiguous().mT,), (contiguous.half(),), (contiguous, other.float())]:
        sums = start(parts)
        accumulate(parts, *sums)
        for mine, theirs in zip(sums, torch_sums([*parts, *parts])):
            assert same_bits(mine, theirs)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_partial_sums_are_the_same_on_either_path(reverse: bool, layout: str) -> None:
    """PartialSums.of takes the numba pass for contiguous partials and torch's ops for others: the same sums."""
    generator = torch.Generator().manual_seed(7)
    partials = [torch.randn(5, 9, dtype=torch.float64, generator=generator) for _ in range(4)]
    given_partials = partials if layout == "contiguous" else [p.mT.contiguous().mT for p in partials]
    sums = PartialSums.of("taps", reverse, iter(given_partials))
    ordered = partials[::-1] if reverse else partials
    absolute, _, total = torch_sums(ordered)
    assert same_bits(sums.absolute.contiguous(), absolute)
    assert same_bits(sums.running.contiguous(), total)  # `running` holds Σ_t |S_t|
