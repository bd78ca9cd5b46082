"""The numba passes of the interval primitives (runner/interval_passes.py) equal intervals.py's torch
definitions bit for bit: outward rounding, allowance widths, products, sums, quotients, monotone functions
and the bound for an output, NaN, infinities, zeros' signs and values past the format's largest
included."""
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
from e2egen.runner.interval_bound import AcceptanceInterval, interval_context
from e2egen.runner.interval_passes import (fused_monotone, fused_output_side, fused_outward, fused_product,
                                           fused_quotient, fused_sum, fused_width)
from e2egen.runner.ops.math_functions import FUNCTIONS
from e2egen.runner.options import BoundModel

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


COMPUTE_FORMATS = list(iv.COMPUTE_FORMATS)  # where the primitives have allowances (div, monotone)


def _quotient_pass(a_lo, a_hi, b_lo, b_hi, fmt):
    return fused_quotient(a_lo, a_hi, b_lo, b_hi, iv.IntervalContext(compute=fmt).allowance("div"), iv.F64_SLACK, fmt)


# op, its numba pass, the formats it is tested in
BINARY = {"product": (iv.mul, lambda *ends, fmt: fused_product(*ends, iv.F64_SLACK, fmt), OUTWARD_FORMATS),
          "sum": (iv.add, lambda *ends, fmt: fused_sum(*ends, iv.F64_SLACK, fmt), OUTWARD_FORMATS),
          "quotient": (iv.div, _quotient_pass, COMPUTE_FORMATS)}
BINARY_CASES = [(name, fmt) for name, (_, _, formats) in BINARY.items() for fmt in formats]


def torch_definition(op, a: iv.Interval, b: iv.Interval, fmt: str) -> iv.Interval:
    """op (intervals.mul or add) with the numba pass turned off: its torch definition."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_VAR, "torch")
        return op(a, b, iv.IntervalContext(compute=fmt))


def interval_from(ends: torch.Tensor, seed: int) -> iv.Interval:
    """An interval per element from awkward ends: both in order where they compare, NaN kept."""
    other = ends[torch.randperm(ends.numel(), generator=torch.Generator().manual_seed(seed))]
    return iv.Interval(torch.fmin(ends, other), torch.fmax(ends, other))


@pytest.mark.parametrize("name, fmt", BINARY_CASES)
def test_interval_products_sums_and_quotients_equal_the_torch_definition(name, fmt):
    """Zeros times (or over) infinities, opposite infinities, NaN ends, the format's extremes and random bit
    patterns."""
    op, fused, _ = BINARY[name]
    ends = awkward(fmt, count=20_000, seed=5)
    a, b = interval_from(ends, 1), interval_from(ends.flip(0).contiguous(), 2)
    got, want = op(a, b, iv.IntervalContext(compute=fmt)), torch_definition(op, a, b, fmt)
    assert fused(a.lo, a.hi, b.lo, b.hi, fmt=fmt) is not None  # the pass ran above
    assert same_bits(got.lo, want.lo) and same_bits(got.hi, want.hi)


@pytest.mark.parametrize("name, fmt", BINARY_CASES)
def test_interval_products_sums_and_quotients_of_every_pairing_of_special_ends(name, fmt):
    """Every corner meets 0·inf, inf - inf, 0/0, inf/inf, NaN and the extremes: each end of a and of b runs
    over the specials."""
    op, _, _ = BINARY[name]
    spec = float_format(fmt)
    specials = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.5, 5e-324, spec.max, -spec.max * 4],
                            dtype=torch.float64)
    a_lo, a_hi, b_lo, b_hi = (end.reshape(-1) for end in torch.meshgrid(specials, specials, specials, specials,
                                                                       indexing="ij"))
    a, b = iv.Interval(a_lo, a_hi), iv.Interval(b_lo, b_hi)  # unordered ends too: the passes do not care
    got, want = op(a, b, iv.IntervalContext(compute=fmt)), torch_definition(op, a, b, fmt)
    assert same_bits(got.lo, want.lo) and same_bits(got.hi, want.hi)


@given(values=st.lists(st.tuples(*[st.floats(width=64)] * 4), min_size=1, max_size=30),
       case=st.sampled_from(BINARY_CASES))
@settings(max_examples=300, deadline=None)
def test_interval_products_sums_and_quotients_of_any_float64_ends(values, case):
    name, fmt = case
    op, _, _ = BINARY[name]
    ends = torch.tensor(values, dtype=torch.float64)
    a = iv.Interval(torch.fmin(ends[:, 0], ends[:, 1]), torch.fmax(ends[:, 0], ends[:, 1]))
    b = iv.Interval(torch.fmin(ends[:, 2], ends[:, 3]), torch.fmax(ends[:, 2], ends[:, 3]))
    got, want = op(a, b, iv.IntervalContext(compute=fmt)), torch_definition(op, a, b, fmt)
    assert same_bits(got.lo, want.lo) and same_bits(got.hi, want.hi)


@pytest.mark.parametrize("name", BINARY)
def test_interval_binary_passes_with_a_constant_and_strided_ends_over_several_threads(name):
    """A constant's ends broadcast from a scalar, a strided x, and enough elements for several tasks."""
    op, _, _ = BINARY[name]
    context = iv.IntervalContext(compute="f16")
    x = awkward("f16", count=400_000, seed=7)[::2]  # strided
    point = iv.Interval.point(x)
    half = iv.constant(0.5, x, context)
    got, want = op(half, point, context), torch_definition(op, half, point, "f16")
    assert same_bits(got.lo, want.lo) and same_bits(got.hi, want.hi)


@pytest.mark.parametrize("name", BINARY)
def test_where_the_binary_passes_do_not_apply_they_say_so(name):
    _, fused, _ = BINARY[name]
    x = torch.linspace(-2, 2, 11, dtype=torch.float64)
    if name != "quotient":  # the division has no allowance for it
        assert fused(x, x, x, x, fmt="f8e4m3fn") is None  # no infinities
    assert fused(x.float(), x.float(), x.float(), x.float(), fmt="f16") is None  # not float64
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_VAR, "torch")
        assert fused(x, x, x, x, fmt="f16") is None


MONOTONE = ["exp", "log", "tanh", "erf", "rsqrt"]
CONTEXTS = [dict(), dict(ulps=0.5), dict(abs_error=1e-3), dict(ulps=0.0, abs_error=0.0)]  # the table, overrides


def torch_monotone(name: str, arg: iv.Interval, context: iv.IntervalContext) -> iv.Interval:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_VAR, "torch")
        return getattr(iv, name)(arg, context)


@pytest.mark.parametrize("fmt", COMPUTE_FORMATS)
@pytest.mark.parametrize("name", MONOTONE)
def test_monotone_primitives_equal_the_torch_definition(name, fmt):
    """Increasing and decreasing functions on intervals and on points (one evaluation there), outside their
    domains (NaN), at infinities and zeros, with the table's allowances and the catalogue's overrides."""
    ends = awkward(fmt, count=20_000, seed=9)
    for arguments in (interval_from(ends, 3), iv.Interval.point(ends)):
        for overrides in CONTEXTS:
            context = iv.IntervalContext(compute=fmt, **overrides)
            got, want = getattr(iv, name)(arguments, context), torch_monotone(name, arguments, context)
            assert same_bits(got.lo, want.lo) and same_bits(got.hi, want.hi), overrides


@pytest.mark.parametrize("fmt", COMPUTE_FORMATS)
def test_monotone_pass_of_every_pairing_of_special_ends_and_values(fmt):
    """The argument's ends and the function's values there each run over the specials: unordered values (a
    decreasing function), equal values of either zero, NaN on either side."""
    spec = float_format(fmt)
    specials = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.5, 5e-324, spec.max, -spec.max * 4],
                            dtype=torch.float64)
    lo, hi, at_lo, at_hi = (end.reshape(-1) for end in torch.meshgrid(specials, specials, specials, specials,
                                                                     indexing="ij"))
    for name in ("exp", "log"):  # an allowance without and with an absolute part inside a range
        context = iv.IntervalContext(compute=fmt)

        def values():
            ends = iter([at_lo, at_hi])
            return lambda _: next(ends)

        got = iv.monotone(iv.Interval(lo, hi), values(), name, context)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(ENV_VAR, "torch")
            want = iv.monotone(iv.Interval(lo, hi), values(), name, context)
        assert same_bits(got.lo, want.lo) and same_bits(got.hi, want.hi)
    assert fused_monotone(lo, hi, at_lo, at_hi, context.allowance("exp"), iv.F64_SLACK, fmt) is not None


@given(values=st.lists(st.tuples(*[st.floats(width=64)] * 2), min_size=1, max_size=30),
       fmt=st.sampled_from(COMPUTE_FORMATS), name=st.sampled_from(MONOTONE))
@settings(max_examples=300, deadline=None)
def test_monotone_primitives_of_any_float64_interval(values, fmt, name):
    ends = torch.tensor(values, dtype=torch.float64)
    arg = iv.Interval(torch.fmin(ends[:, 0], ends[:, 1]), torch.fmax(ends[:, 0], ends[:, 1]))
    context = iv.IntervalContext(compute=fmt)
    got, want = getattr(iv, name)(arg, context), torch_monotone(name, arg, context)
    assert same_bits(got.lo, want.lo) and same_bits(got.hi, want.hi)


def test_monotone_pass_where_it_does_not_apply_says_so():
    x = torch.linspace(-2, 2, 11, dtype=torch.float64)
    allowance = iv.ALLOWANCES["exp"]["f32"]
    assert fused_monotone(x[::2], x[::2], x[::2], x[::2], allowance, iv.F64_SLACK, "f32") is not None  # copied
    assert fused_monotone(x.float(), x.float(), x.float(), x.float(), allowance, iv.F64_SLACK, "f32") is None


def sided_bound(lo: torch.Tensor, hi: torch.Tensor, ref: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """AcceptanceInterval.evaluate_for_output for the interval [lo, hi]."""
    model = BoundModel()
    bound = AcceptanceInterval(FUNCTIONS["exp"], "f16", "f16", {"x": ref})
    bound._cache[interval_context(model, "f16")] = iv.Interval(lo, hi)
    return bound.evaluate_for_output(model, ref, out)


def test_the_bound_for_an_output_equals_the_torch_definition():
    """The output's side of the interval, NaN refs, NaN and -0 sides kept as torch's clamp keeps them, outputs
    that are NaN or infinite, on every pairing of special values and on random bit patterns."""
    specials = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.5, 5e-324, 65504.0],
                            dtype=torch.float64)
    pairings = [end.reshape(-1) for end in torch.meshgrid(specials, specials, specials, specials, indexing="ij")]
    ends = awkward("f16", count=20_000, seed=11)
    interval = interval_from(ends, 4)
    shuffled = ends[torch.randperm(ends.numel(), generator=torch.Generator().manual_seed(6))]
    for lo, hi, ref, out in (pairings, (interval.lo, interval.hi, ends, shuffled)):
        assert fused_output_side(lo, hi, ref, out) is not None
        got = sided_bound(lo, hi, ref, out)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(ENV_VAR, "torch")
            want = sided_bound(lo, hi, ref, out)
        assert same_bits(got, want)
    assert fused_output_side(lo[::2], hi[::2], ref[::2], out[::2]) is None  # strided: torch's ops
