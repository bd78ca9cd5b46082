"""The numba passes of the interval primitives (runner/interval_passes.py) equal intervals.py's torch
definitions bit for bit: outward rounding and allowance widths, NaN, infinities, zeros' signs and values
past the format's largest included."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from e2egen.metrics import fused_numba
from e2egen.metrics.backend import ENV_VAR
from e2egen.metrics.formats import float_format
from e2egen.runner import intervals as iv
from e2egen.runner.interval_passes import fused_outward, fused_product, fused_sum, fused_width

pytestmark = pytest.mark.skipif(not fused_numba.AVAILABLE, reason="numba is not installed")

OUTWARD_FORMATS = ["f32", "f16", "bf16", "f8e5m2"]  # IEEE with infinities: the formats the pass covers
WIDTH_FORMATS = ["f32", "f16", "bf16", "f8e5m2", "f8e4m3fn"]
ALLOWANCES = [allowance for table in iv.ALLOWANCES.values() for allowance in table.values()] + [
    iv.Allowance(3, 2, absolute=1e-3), iv.Allowance(0.5, absolute=0.25, absolute_inside=(-1.0, 1.0))]


def same_bits(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Equal bit patterns (so -0.0 differs from +0.0), any NaN matching any NaN."""
    return bool(((got.view(torch.int64) == want.view(torch.int64)) | (got.isnan() & want.isnan())).all())


def awkward(fmt: str, count: int = 20_000, seed: int = 0) -> torch.Tensor:
    """Random float64 bit patterns, the format's values near 1, its max and its smallest subnormal with
    their float64 neighbours and the midpoints between them, zeros, infinities and NaN."""
    rng = np.random.default_rng(seed)
    spec = float_format(fmt)
    anchors = torch.tensor([1.0, spec.max, spec.min_normal, spec.min_subnormal, 2.0 ** spec.emax * 2], dtype=torch.float64)
    steps = torch.arange(-3, 4, dtype=torch.float64)
    near = (anchors[:, None] + steps * anchors[:, None] * 2.0 ** -(spec.mantissa_bits + 1)).reshape(-1)
    neighbours = torch.cat([near, torch.nextafter(near, torch.full_like(near, math.inf)),
                            torch.nextafter(near, torch.full_like(near, -math.inf))])
    specials = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324], dtype=torch.float64)
    bits = torch.from_numpy(rng.integers(-2 ** 63, 2 ** 63 - 1, size=count, dtype=np.int64)).view(torch.float64)
    scaled = torch.from_numpy(rng.standard_normal(count)) * torch.from_numpy(2.0 ** rng.integers(-160, 140, size=count))
    return torch.cat([neighbours, -neighbours, specials, bits, scaled])


@pytest.mark.parametrize("fmt", OUTWARD_FORMATS)
def test_outward_rounding_equals_the_torch_definition(fmt):
    x = awkward(fmt)
    fused = fused_outward(x, x.flip(0).contiguous(), fmt)
    assert fused is not None
    assert same_bits(fused[0], iv.round_down(x, fmt))
    assert same_bits(fused[1], iv.round_up(x.flip(0), fmt))


@pytest.mark.parametrize("fmt", OUTWARD_FORMATS)
@given(values=st.lists(st.floats(width=64), min_size=1, max_size=40))
@settings(max_examples=200, deadline=None)
def test_outward_rounding_of_any_float64(fmt, values):
    x = torch.tensor(values, dtype=torch.float64)
    lo, hi = fused_outward(x, x, fmt)
    assert same_bits(lo, iv.round_down(x, fmt)) and same_bits(hi, iv.round_up(x, fmt))


def test_outward_rounding_over_several_threads_keeps_every_element():
    x = awkward("f16", count=400_000, seed=3)  # several tasks of the thread pool
    lo, hi = fused_outward(x, x, "f16")
    assert same_bits(lo, iv.round_down(x, "f16")) and same_bits(hi, iv.round_up(x, "f16"))


def test_where_the_pass_does_not_apply_outward_is_the_torch_definition(monkeypatch):
    x = awkward("f8e4m3fn", count=2_000)
    assert fused_outward(x, x, "f8e4m3fn") is None  # no infinities: its overflow rules are the pattern path's
    strided = awkward("f32", count=2_000)[::2]
    assert fused_outward(strided, strided, "f32") is None
    assert fused_outward(x.float(), x.float(), "f32") is None
    with monkeypatch.context() as patch:
        patch.setenv(ENV_VAR, "torch")  # the metrics backend's choice: the torch definitions
        assert fused_outward(x, x, "f32") is None and fused_width(iv.ALLOWANCES["exp"]["f32"], x, x, "f32") is None
    for values, fmt in ((x, "f8e4m3fn"), (strided, "f32")):
        interval = iv.outward(values, values, fmt)
        assert same_bits(interval.lo, iv.round_down(values, fmt)) and same_bits(interval.hi, iv.round_up(values, fmt))


def torch_width(allowance: iv.Allowance, x: torch.Tensor, y: torch.Tensor, fmt: str) -> torch.Tensor:
    """Allowance.width as intervals.py writes it in torch's ops."""
    ulp_part = (allowance.ulps + allowance.ulps_per_abs_x * x.abs()) * iv._ulp(y, fmt)
    if allowance.absolute_inside is None:
        return ulp_part + allowance.absolute
    a, b = allowance.absolute_inside
    return torch.where((x >= a) & (x <= b), torch.full_like(ulp_part, allowance.absolute), ulp_part)


@pytest.mark.parametrize("fmt", WIDTH_FORMATS)
def test_allowance_width_equals_the_torch_definition(fmt):
    y = awkward(fmt, seed=1)
    x = y[torch.randperm(y.numel(), generator=torch.Generator().manual_seed(2))]
    x[:40] = torch.tensor([0.5, 2.0, 0.4999999999, 2.0000000001, -1.0, 1.0, math.nan, math.inf] * 5)
    for allowance in ALLOWANCES:
        fused = fused_width(allowance, x, y, fmt)
        assert fused is not None and same_bits(fused, torch_width(allowance, x, y, fmt)), allowance


@given(x=st.lists(st.floats(width=64), min_size=1, max_size=30), data=st.data())
@settings(max_examples=200, deadline=None)
def test_allowance_width_of_any_float64(x, data):
    y = data.draw(st.lists(st.floats(width=64), min_size=len(x), max_size=len(x)))
    fmt = data.draw(st.sampled_from(WIDTH_FORMATS))
    allowance = data.draw(st.sampled_from(ALLOWANCES))
    xs, ys = torch.tensor(x, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)
    assert same_bits(fused_width(allowance, xs, ys, fmt), torch_width(allowance, xs, ys, fmt))
    assert same_bits(allowance.width(xs, ys, fmt), torch_width(allowance, xs, ys, fmt))  # what intervals.py uses


def test_width_where_the_pass_does_not_apply_is_the_torch_definition():
    y = awkward("f32", count=2_000)
    x = y.flip(0)
    allowance = iv.ALLOWANCES["log"]["f32"]
    assert fused_width(allowance, x[::2], y[::2], "f32") is None
    assert fused_width(allowance, x[:10], y, "f32") is None  # shapes differ: broadcasting is torch's
    assert same_bits(allowance.width(x[::2], y[::2], "f32"), torch_width(allowance, x[::2], y[::2], "f32"))


BINARY = {"product": (iv.mul, fused_product), "sum": (iv.add, fused_sum)}  # op, its numba pass


def torch_definition(op, a: iv.Interval, b: iv.Interval, fmt: str) -> iv.Interval:
    """op (intervals.mul or add) with the numba pass turned off: its torch definition."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_VAR, "torch")
        return op(a, b, iv.IntervalContext(compute=fmt))


def interval_from(ends: torch.Tensor, seed: int) -> iv.Interval:
    """An interval per element from awkward ends: both in order where they compare, NaN kept."""
    other = ends[torch.randperm(ends.numel(), generator=torch.Generator().manual_seed(seed))]
    return iv.Interval(torch.fmin(ends, other), torch.fmax(ends, other))


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("fmt", OUTWARD_FORMATS)
def test_interval_product_and_sum_equal_the_torch_definition(fmt, name):
    """Zeros times infinities, opposite infinities, NaN ends, the format's extremes and random bit patterns."""
    op, fused = BINARY[name]
    ends = awkward(fmt, count=20_000, seed=5)
    a, b = interval_from(ends, 1), interval_from(ends.flip(0).contiguous(), 2)
    got, want = op(a, b, iv.IntervalContext(compute=fmt)), torch_definition(op, a, b, fmt)
    assert fused(a.lo, a.hi, b.lo, b.hi, iv.F64_SLACK, fmt) is not None  # the pass ran above
    assert same_bits(got.lo, want.lo) and same_bits(got.hi, want.hi)


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("fmt", OUTWARD_FORMATS)
def test_interval_product_and_sum_of_every_pairing_of_special_ends(fmt, name):
    """Every corner meets 0·inf, inf - inf, NaN and the extremes: each end of a and of b runs over the
    specials."""
    op, _ = BINARY[name]
    spec = float_format(fmt)
    specials = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.5, 5e-324, spec.max, -spec.max * 4],
                            dtype=torch.float64)
    a_lo, a_hi, b_lo, b_hi = (end.reshape(-1) for end in torch.meshgrid(specials, specials, specials, specials,
                                                                       indexing="ij"))
    a, b = iv.Interval(a_lo, a_hi), iv.Interval(b_lo, b_hi)  # unordered ends too: the passes do not care
    got, want = op(a, b, iv.IntervalContext(compute=fmt)), torch_definition(op, a, b, fmt)
    assert same_bits(got.lo, want.lo) and same_bits(got.hi, want.hi)


@given(values=st.lists(st.tuples(*[st.floats(width=64)] * 4), min_size=1, max_size=30),
       fmt=st.sampled_from(OUTWARD_FORMATS), name=st.sampled_from(sorted(BINARY)))
@settings(max_examples=200, deadline=None)
def test_interval_product_and_sum_of_any_float64_ends(values, fmt, name):
    op, _ = BINARY[name]
    ends = torch.tensor(values, dtype=torch.float64)
    a = iv.Interval(torch.fmin(ends[:, 0], ends[:, 1]), torch.fmax(ends[:, 0], ends[:, 1]))
    b = iv.Interval(torch.fmin(ends[:, 2], ends[:, 3]), torch.fmax(ends[:, 2], ends[:, 3]))
    got, want = op(a, b, iv.IntervalContext(compute=fmt)), torch_definition(op, a, b, fmt)
    assert same_bits(got.lo, want.lo) and same_bits(got.hi, want.hi)


@pytest.mark.parametrize("name", BINARY)
def test_interval_product_and_sum_with_a_constant_and_strided_ends_over_several_threads(name):
    """A constant's ends broadcast from a scalar, a strided x, and enough elements for several tasks."""
    op, _ = BINARY[name]
    context = iv.IntervalContext(compute="f16")
    x = awkward("f16", count=400_000, seed=7)[::2]  # strided
    point = iv.Interval.point(x)
    half = iv.constant(0.5, x, context)
    got, want = op(half, point, context), torch_definition(op, half, point, "f16")
    assert same_bits(got.lo, want.lo) and same_bits(got.hi, want.hi)


@pytest.mark.parametrize("name", BINARY)
def test_where_the_product_and_sum_passes_do_not_apply_they_say_so(name):
    _, fused = BINARY[name]
    x = torch.linspace(-2, 2, 11, dtype=torch.float64)
    assert fused(x, x, x, x, iv.F64_SLACK, "f8e4m3fn") is None  # no infinities
    assert fused(x.float(), x.float(), x.float(), x.float(), iv.F64_SLACK, "f16") is None  # not float64
