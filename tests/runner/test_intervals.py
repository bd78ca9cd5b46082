"""Acceptance intervals (runner/intervals.py, runner/interval_bound.py) against brute force and real kernels."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from e2egen import metrics
from e2egen.runner import intervals as iv
from e2egen.runner.interval_bound import AcceptanceInterval, bound_for_output
from e2egen.runner.ops.math_functions import FUNCTIONS
from e2egen.runner.options import BoundModel

TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
BITS_DTYPES = {"f32": torch.int32, "f16": torch.int16, "bf16": torch.int16}


def successor(value: float, fmt: str) -> float:
    """The next value of the format above `value` (which the format holds), by its bits."""
    tensor = torch.tensor([value], dtype=TORCH_DTYPES[fmt])
    bits = tensor.view(BITS_DTYPES[fmt])
    if value == 0:
        bits = torch.ones_like(bits)
    elif value > 0:
        bits = bits + 1
    else:
        bits = bits - 1
    return float(bits.view(TORCH_DTYPES[fmt]).double())


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@pytest.mark.parametrize("fmt", ["f32", "f16", "bf16"])
@given(x=finite)
@settings(max_examples=300, deadline=None)
def test_round_down_is_the_largest_format_value_at_or_below(fmt, x):
    spec = metrics.get_format(fmt)
    down = float(iv.round_down(torch.tensor([x], dtype=torch.float64), fmt))
    up = float(iv.round_up(torch.tensor([x], dtype=torch.float64), fmt))
    assert down <= x <= up
    if x < -spec.max:
        assert down == -math.inf
        return
    if x > spec.max:
        assert down == spec.max and up == math.inf
        return
    assert float(metrics.round_to(torch.tensor([down], dtype=torch.float64), fmt)) == down  # the format holds it
    assert successor(down, fmt) > x or down == x
    assert (up == down) == (float(metrics.round_to(torch.tensor([x], dtype=torch.float64), fmt)) == x)


def _awkward_values(fmt: str) -> torch.Tensor:
    """Every value of f16/bf16 (300K random f32 bit patterns), their float64 neighbours, the midpoints to the
    next format value and theirs, zeros, infinities, NaN, float64's extremes and random magnitudes."""
    dtype = TORCH_DTYPES[fmt]
    if fmt == "f32":
        bits = torch.randint(-2**31, 2**31 - 1, (300_000,), generator=torch.Generator().manual_seed(3)).to(torch.int32)
    else:
        bits = torch.arange(-2**15, 2**15, dtype=torch.int32).to(torch.int16)
    held = bits.view(dtype)
    held = held[~torch.isnan(held)]
    values, following = held.double(), torch.nextafter(held, torch.full_like(held, math.inf)).double()
    midpoints = (values + following) / 2

    def around(v):
        return [v, torch.nextafter(v, torch.full_like(v, math.inf)), torch.nextafter(v, torch.full_like(v, -math.inf))]
    special = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1e300, -1e300, 1e-300, -1e-300, 5e-324, -5e-324],
                           dtype=torch.float64)
    generator = torch.Generator().manual_seed(4)
    spread = torch.randn(200_000, dtype=torch.float64, generator=generator) * 10.0 ** torch.randint(
        -60, 60, (200_000,), generator=generator).double()
    return torch.cat([*around(values), *around(midpoints), special, spread])


@pytest.mark.parametrize("fmt", ["f32", "f16", "bf16"])
def test_round_down_by_cast_equals_the_bit_pattern_rounding(fmt):
    """The fast path (torch's cast, one step down where it lands above) against the format-generic one."""
    x = _awkward_values(fmt)
    fast, by_pattern = iv.round_down(x, fmt), iv._round_down_by_pattern(x, fmt)
    same = (fast == by_pattern) | (torch.isnan(fast) & torch.isnan(by_pattern))
    assert bool(same.all()), x[~same][:5]
    assert not bool(torch.signbit(fast[fast == 0]).any())  # one zero: +0


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_torch_float32_kernels_land_inside_the_f32_interval(name):
    """Each primitive's allowance holds libm-quality f32 results (torch's own CPU kernels)."""
    function = FUNCTIONS[name]
    generator = torch.Generator().manual_seed(3)
    low, high = (0.01, 50.0) if function.domain == "x > 0" else (-12.0, 12.0)
    x = (torch.rand(20000, generator=generator, dtype=torch.float64) * (high - low) + low).float().double()
    arguments = [x]
    if len(function.inputs) == 2:
        y = (torch.rand(20000, generator=generator, dtype=torch.float64) * 4 + 0.5).float().double()
        arguments.append(y if name == "div" else y - 2.5)
    out = function.kernel(*(a.float() for a in arguments)).double()
    interval = iv.to_output(function.interval(*(iv.Interval.point(a) for a in arguments), iv.IntervalContext()), "f32")
    finite_out = torch.isfinite(out)
    inside = (out >= interval.lo) & (out <= interval.hi)
    assert inside[finite_out].all(), f"{name}: {int((~inside[finite_out]).sum())} f32 results outside"


def test_an_allowance_is_as_wide_as_the_table_says():
    """exp's f32 interval reaches (3 + 2|x|) ulps of the exact result on each side (then rounds outward)."""
    x = torch.tensor([-4.0, 0.5, 3.0], dtype=torch.float64)
    exact = torch.exp(x)
    interval = iv.exp(iv.Interval.point(x), iv.IntervalContext())
    allowed = (3 + 2 * x.abs()) * metrics.ulp(exact, "f32")
    assert (interval.hi >= exact + allowed).all() and (interval.lo <= exact - allowed).all()
    assert (interval.hi <= exact + allowed + 2 * metrics.ulp(exact, "f32")).all()


def test_the_catalogue_override_replaces_every_inexact_primitive():
    x = torch.tensor([2.0], dtype=torch.float64)
    table = iv.rsqrt(iv.Interval.point(x), iv.IntervalContext())
    strict = iv.rsqrt(iv.Interval.point(x), iv.IntervalContext(ulps=0.0))
    assert float(strict.hi - strict.lo) < float(table.hi - table.lo)
    exact = float(torch.rsqrt(x))
    assert float(strict.lo) <= exact <= float(strict.hi)
    assert float(strict.hi) == successor(float(strict.lo), "f32")  # correctly rounded: the two neighbours


def test_division_by_an_interval_holding_zero_accepts_anything():
    result = iv.div(iv.Interval.point(torch.tensor([1.0], dtype=torch.float64)),
                    iv.Interval(torch.tensor([-1e-3], dtype=torch.float64), torch.tensor([1e-3], dtype=torch.float64)),
                    iv.IntervalContext())
    assert float(result.lo) == -math.inf and float(result.hi) == math.inf


@pytest.mark.parametrize("fmt", ["f16", "bf16"])
@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_the_sided_bound_is_exactly_interval_membership(fmt, data):
    """bound_ratio <= 1 with the output's side of the interval  <=>  lo <= out <= hi, for outputs the
    format holds (up to 4 values either side of the exact result)."""
    x = data.draw(st.floats(min_value=-6, max_value=6, allow_nan=False))
    x64 = metrics.round_to(torch.tensor([x], dtype=torch.float64), fmt)
    ref = torch.exp(x64)
    bound = AcceptanceInterval(FUNCTIONS["exp"], fmt, fmt, {"x": x64})
    interval = bound.interval(BoundModel())
    candidate = float(iv.round_down(ref, fmt))
    for _ in range(4):
        candidate = float(iv.round_down(torch.tensor([candidate - 1e-300 - abs(candidate) * 1e-12], dtype=torch.float64), fmt))
    for _ in range(9):
        out = torch.tensor([candidate], dtype=torch.float64)
        b = bound_for_output(bound, BoundModel(), ref, out)
        ratio = float((out - ref).abs() / b) if float(b) > 0 else (0.0 if float(out) == float(ref) else math.inf)
        member = float(interval.lo) <= candidate <= float(interval.hi)
        assert (ratio <= 1.0) == member, (candidate, float(ref), float(interval.lo), float(interval.hi))
        candidate = successor(candidate, fmt)


@pytest.mark.parametrize("name", ["silu", "gelu"])
def test_an_output_off_an_exact_zero_fails_bound_ratio(name):
    """At x = +0 the product x·(…) is +0 and its interval [+0, -0] (round_up gives -0 for a zero), so the side
    above has width -0: any nonzero output there must fail bound_ratio, in the element-wise suites' verdict
    (bound_rms off), as it fails membership."""
    x = torch.tensor([0.0, 1.0], dtype=torch.float64)
    function = FUNCTIONS[name]
    ref = function.exact(x)
    out = torch.tensor([2.0 ** -20, float(ref[1])], dtype=torch.float16)
    bound = AcceptanceInterval(function, "f16", "f16", {"x": x}).evaluate_for_output(BoundModel(), ref, out)
    comparison = metrics.compare(ref, out, "f16", bound=bound)
    assert comparison.bound_ratio == math.inf and comparison.worst["bound_ratio"].index == 0
    out[0] = 0.0
    assert metrics.compare(ref, out, "f16", bound=bound).bound_ratio <= 1
