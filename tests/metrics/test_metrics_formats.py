"""ulp, round_to and flush_subnormals against brute force, for every value of every small format."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from e2egen import metrics
from e2egen.metrics import flush_subnormals, get_format, round_to, ulp

try:
    from tests.test_metrics_oracle import STORAGE, f32_round, f32_ulp, oracle_format, oracle_round, oracle_ulp
except ImportError:
    from test_metrics_oracle import STORAGE, f32_round, f32_ulp, oracle_format, oracle_round, oracle_ulp

SMALL_FORMATS = list(STORAGE)


def probe_points(values: np.ndarray) -> np.ndarray:
    """Every value, both signs of zero, every midpoint, points just off each, and far beyond max."""
    mids = (values[:-1] + values[1:]) / 2
    top = values[-1]
    gap = values[-1] - values[-2]
    beyond = np.array([top + gap / 4, top + gap / 2, top + gap, 2 * top, 1e300, -1e300, 5e-324, -5e-324, -0.0])
    points = np.concatenate([values, mids, beyond])
    return np.concatenate([points, np.nextafter(points, np.inf), np.nextafter(points, -np.inf)])


@pytest.mark.parametrize("name", SMALL_FORMATS)
def test_format_limits_come_out_of_the_bits_as_torch_has_them(name):
    fmt, info = get_format(name), torch.finfo(STORAGE[name])
    assert (fmt.max, fmt.min_normal, fmt.eps) == (info.max, info.smallest_normal, info.eps)
    assert fmt.min_subnormal == oracle_format(name).values[oracle_format(name).values > 0][0]
    assert fmt.overflow_limit == oracle_format(name).overflow_limit


def test_f32_tf32_limits():
    info = torch.finfo(torch.float32)
    for name in ("f32", "tf32"):
        fmt = get_format(name)
        assert (fmt.max, fmt.min_normal, fmt.eps, fmt.min_subnormal) == (info.max, info.tiny, info.eps, 2.0 ** -149)


def test_fp8_e4m3fn_has_no_inf_and_one_more_binade():
    fmt = get_format("f8e4m3fn")
    assert not fmt.has_inf and fmt.max == 448 and fmt.emax == 8
    assert get_format("f8e5m2").has_inf and get_format("f8e5m2").max == 57344


@pytest.mark.parametrize("name", SMALL_FORMATS)
def test_ulp_of_every_value_midpoint_and_neighbour(name):
    fmt = oracle_format(name)
    x = torch.from_numpy(probe_points(fmt.values))
    np.testing.assert_array_equal(ulp(x, name).numpy(), oracle_ulp(fmt, x.numpy()))


@pytest.mark.parametrize("name", SMALL_FORMATS)
def test_round_to_every_value_midpoint_and_neighbour(name):
    fmt = oracle_format(name)
    x = torch.from_numpy(probe_points(fmt.values))
    got, want = round_to(x, name).numpy(), oracle_round(fmt, x.numpy())
    np.testing.assert_array_equal(got, want)
    numbers = ~np.isnan(want)  # the sign of a NaN means nothing
    np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


@pytest.mark.parametrize("name", SMALL_FORMATS)
@settings(max_examples=50, deadline=None)
@given(values=st.lists(st.floats(width=64, allow_nan=True, allow_infinity=True), min_size=1, max_size=50),
       scale=st.sampled_from([1.0, 2.0 ** -20, 2.0 ** -130, 2.0 ** 10, 2.0 ** 120]))
def test_ulp_and_round_on_arbitrary_doubles(name, values, scale):
    fmt = oracle_format(name)
    with np.errstate(over="ignore"):  # huge values times a scale above 1 overflow to inf: fine
        x = np.array(values) * scale
    got = round_to(torch.from_numpy(x), name).numpy()
    want = oracle_round(fmt, x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ulp(torch.from_numpy(x), name).numpy(), oracle_ulp(fmt, x))


@pytest.mark.parametrize("name", ["f16", "bf16", "f8e5m2", "f8e4m3fn"])
def test_round_to_agrees_with_torch_casting_from_float32(name):
    # Points exact in float32, so torch's cast rounds once; for e4m3fn torch
    # saturates overflow to 448 where round_to gives NaN, so stay in range there.
    fmt = oracle_format(name)
    x = probe_points(fmt.values)
    x = x[np.abs(x) < 2.0 ** 100].astype(np.float32)
    if name == "f8e4m3fn":
        x = x[np.abs(x) < fmt.max + fmt.top_gap / 2]
    x = torch.from_numpy(x)
    want = x.to(STORAGE[name]).to(torch.float64)
    np.testing.assert_array_equal(round_to(x.to(torch.float64), name).numpy(), want.numpy())


def test_round_to_rounds_float64_once():
    # Just above the f16 midpoint between 1 and 1 + 2**-10: torch's f64 -> f16
    # cast goes through f32, lands on the midpoint and rounds down to 1.
    x = torch.tensor([1 + 2.0 ** -11 + 2.0 ** -40], dtype=torch.float64)
    assert round_to(x, "f16").item() == 1 + 2.0 ** -10


def test_round_to_specials():
    x = torch.tensor([math.nan, math.inf, -math.inf, 1e6, -1e6], dtype=torch.float64)
    f16 = round_to(x, "f16")
    assert math.isnan(f16[0]) and f16[1:].tolist() == [math.inf, -math.inf, math.inf, -math.inf]
    assert torch.isnan(round_to(x, "f8e4m3fn")).all()  # no inf in e4m3fn: overflow is NaN


def test_f32_ulp_and_round_on_random_and_boundary_values():
    rng = np.random.default_rng(1)
    f32_values = np.concatenate([
        rng.standard_normal(2000).astype(np.float32),
        (rng.standard_normal(2000) * 1e-39).astype(np.float32),  # subnormal range
        np.array([0, 1, 2, 0.5, 2 ** -126, 2 ** -149, np.finfo(np.float32).max], np.float32),
    ]).astype(np.float64)
    with np.errstate(over="ignore"):  # the neighbour above max is inf: its midpoint overflows f32
        neighbours = np.nextafter(f32_values.astype(np.float32), np.float32(np.inf)).astype(np.float64)
    mids = (f32_values + neighbours) / 2
    x = np.concatenate([f32_values, -f32_values, mids, -mids, np.nextafter(mids, np.inf), [1e39, 3.4028235e38]])
    got_round = round_to(torch.from_numpy(x), "f32").numpy()
    np.testing.assert_array_equal(got_round, [f32_round(v) for v in x])
    got_ulp = ulp(torch.from_numpy(x), "f32").numpy()
    np.testing.assert_array_equal(got_ulp, [f32_ulp(v) for v in x])
    np.testing.assert_array_equal(round_to(torch.from_numpy(x), "tf32").numpy(), got_round)


def test_ulp_follows_the_cts_definition_at_landmarks():
    x = torch.tensor([0.0, 1.0, 1.5, 2.0 ** -14, 65504.0, 70000.0, math.inf, math.nan], dtype=torch.float64)
    got = ulp(x, "f16")
    assert got[:7].tolist() == [2.0 ** -24, 2.0 ** -11, 2.0 ** -10, 2.0 ** -24, 32.0, 32.0, 32.0]
    assert math.isnan(got[7])


@pytest.mark.parametrize("name", SMALL_FORMATS + ["f32"])
def test_flush_subnormals(name):
    fmt = get_format(name)
    x = torch.tensor([fmt.min_subnormal, -fmt.min_subnormal, np.nextafter(fmt.min_normal, 0), fmt.min_normal,
                      -fmt.min_normal, 0.0, -0.0, 1.0, math.inf, math.nan], dtype=torch.float64)
    got = flush_subnormals(x, name)
    assert got[:8].tolist() == [0.0, 0.0, 0.0, fmt.min_normal, -fmt.min_normal, 0.0, 0.0, 1.0]
    assert torch.signbit(got[:8]).tolist() == [False, True, False, False, True, False, True, False]
    assert got[8] == math.inf and math.isnan(got[9])


def test_helpers_accept_numpy_and_return_numpy():
    result = ulp(np.array([1.0, 3.0]), "bf16")
    assert isinstance(result, np.ndarray) and result.tolist() == [2.0 ** -8, 2.0 ** -6]


def test_dtype_names_and_torch_dtypes():
    assert metrics.DTYPE_NAMES == ("f32", "tf32", "f16", "bf16", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz",
                                   "f4e2m1", "e8m0", "i8", "i32")
    for name in metrics.DTYPE_NAMES:
        fmt = get_format(name)
        assert fmt.name == name
        if name != "tf32":
            assert get_format(fmt.torch_dtype if fmt.torch_dtype is not None else fmt.packed_torch_dtype).name == name
    assert get_format(torch.float32).name == "f32"
    assert get_format("i8").min == -128 and get_format("i32").max == 2 ** 31 - 1


def test_unknown_dtype_names_the_choices_and_a_near_miss():
    with pytest.raises(ValueError, match=r"'fp16'.*did you mean 'f16'.*f32, tf32, f16"):
        get_format("fp16")
    with pytest.raises(ValueError, match="unknown dtype"):
        get_format(torch.complex64)


def test_ulp_of_an_integer_format_is_an_error():
    with pytest.raises(ValueError, match="i8 is an integer format"):
        ulp(torch.zeros(1, dtype=torch.float64), "i8")
