"""compare() against a per-element oracle of every definition, on both backends."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from e2egen import metrics
from e2egen.metrics import compare, get_format, round_to
from e2egen.metrics import fused_numba

try:
    from tests.test_metrics_oracle import oracle_compare
except ImportError:
    from test_metrics_oracle import oracle_compare

FLOAT_NAMES = ["f32", "f16", "bf16", "f8e4m3fn", "f8e5m2"]
BACKENDS = ["torch", pytest.param("numba", marks=pytest.mark.skipif(not fused_numba.AVAILABLE, reason="no numba"))]
RAW = {8: torch.int8, 16: torch.int16, 32: torch.int32}
MAXIMA = ["max_abs_diff", "max_rel_diff", "max_rel_diff_old", "max_eps_diff", "max_ulp_diff"]
COUNTS = ["nan_mismatch", "inf_mismatch", "overflow", "ftz_allowed", "compared"]


def patterns_to_tensor(patterns: list[int], name: str) -> torch.Tensor:
    """Raw bit patterns (0 .. 2**bits - 1) as a tensor of the format."""
    fmt = get_format(name)
    signed = [p - (1 << fmt.bits) if p >= 1 << (fmt.bits - 1) else p for p in patterns]
    return torch.tensor(signed, dtype=RAW[fmt.bits]).view(fmt.torch_dtype)


def pattern_of(value: float, name: str) -> int:
    fmt = get_format(name)
    raw = torch.tensor([value], dtype=torch.float64).to(fmt.torch_dtype).view(RAW[fmt.bits]).item()
    return raw & ((1 << fmt.bits) - 1)


def landmarks(name: str) -> list[float]:
    """Values where the rules change: zeros, subnormals, powers of two, the overflow boundary."""
    fmt = get_format(name)
    top_gap = math.ldexp(1.0, fmt.emax - fmt.mantissa_bits)
    points = [0.0, -0.0, math.nan, math.inf, -math.inf, 1.0, 2.0, 0.5, -4.0,
              fmt.min_subnormal, fmt.min_subnormal / 2, fmt.min_subnormal * 1.5, -fmt.min_subnormal * 3,
              fmt.min_normal, fmt.min_normal - fmt.min_subnormal / 2, -fmt.min_normal * 1.5,
              fmt.max, -fmt.max, fmt.max + top_gap / 4, fmt.max + top_gap / 2, -(fmt.max + top_gap / 2),
              fmt.overflow_limit, -fmt.overflow_limit, float(np.nextafter(fmt.overflow_limit, 0)),
              fmt.overflow_limit * 4, 1e300, 5e-324]
    return points


@st.composite
def cases(draw, name: str):
    fmt = get_format(name)
    n = draw(st.integers(1, 24))
    ref_strategy = st.one_of(
        st.sampled_from(landmarks(name)),
        st.floats(-8, 8, width=64),
        st.floats(-4 * fmt.min_normal, 4 * fmt.min_normal, width=64),
        st.floats(-2 * fmt.overflow_limit, 2 * fmt.overflow_limit, width=64),
    )
    refs = [draw(ref_strategy) for _ in range(n)]
    patterns = []
    top = (1 << fmt.bits) - 1
    for r in refs:
        mode = draw(st.sampled_from(["exact", "near", "any", "special"]))
        rounded = round_to(torch.tensor([r], dtype=torch.float64), name).item()
        if mode in ("exact", "near") and math.isfinite(rounded):
            p = pattern_of(rounded, name)
            if mode == "near":
                p = min(max(p + draw(st.integers(-3, 3)), 0), top)
        elif mode == "special":
            sign = draw(st.sampled_from([0, 1 << (fmt.bits - 1)]))
            magnitude = draw(st.sampled_from([0, 1, fmt.max_pattern, fmt.max_pattern + 1, (1 << (fmt.bits - 1)) - 1]))
            p = sign | magnitude
        else:
            p = draw(st.integers(0, top))
        patterns.append(p)
    out = patterns_to_tensor(patterns, name)
    with_bound = draw(st.booleans())
    bound = None
    if with_bound:
        bound = torch.tensor([draw(st.sampled_from([0.0, 1e-3, 0.5, 2.0, math.inf])) for _ in refs],
                             dtype=torch.float64)
    return (torch.tensor(refs, dtype=torch.float64), out, bound, draw(st.booleans()),
            draw(st.sampled_from([1e-3, 0.0, 1.0])), draw(st.sampled_from([None, 1, 3, 7])))


def assert_matches_oracle(c, want, with_bound: bool) -> None:
    for name in MAXIMA + (["bound_ratio"] if with_bound else []):
        assert getattr(c, name) == want[name], name
    for name in COUNTS:
        assert getattr(c, name) == want[name], name
    assert list(c.histogram.values()) == want["histogram"]
    for name in ("rms", "rel_l2"):
        assert getattr(c, name) == pytest.approx(want[name], rel=1e-12, abs=0), name
    for name, index in want["worst"].items():
        assert c.worst[name].index == index, name
    assert set(c.worst) - {"rms", "rel_l2"} == set(want["worst"])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", FLOAT_NAMES)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_compare_matches_the_per_element_oracle(name, backend, data):
    ref, out, bound, ftz, rel_floor, chunk = data.draw(cases(name))
    c = compare(ref, out, name, ftz=ftz, rel_floor=rel_floor, bound=bound, backend=backend, chunk=chunk)
    want = oracle_compare(ref.numpy(), out.to(torch.float64).numpy(), name, ftz, rel_floor,
                          None if bound is None else bound.numpy())
    assert_matches_oracle(c, want, bound is not None)


def random_pair(name: str, n: int, seed: int):
    """Big random arrays with every kind of special value sprinkled in."""
    fmt = get_format(name)
    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(n, generator=g, dtype=torch.float64) * 4
    out = round_to(ref * (1 + 2 * fmt.eps * torch.rand(n, generator=g, dtype=torch.float64)), name)
    out = out.to(fmt.torch_dtype)
    specials = torch.tensor(landmarks(name), dtype=torch.float64)
    where = torch.randint(0, n, (200,), generator=g)
    ref[where] = specials[torch.randint(0, len(specials), (200,), generator=g)]
    ref[where[:20] + 1 if n > where.max() + 1 else where[:20]] *= 1e-3  # some tiny values
    out_specials = torch.randint(0, n, (100,), generator=g)
    raw = torch.randint(-(1 << (fmt.bits - 1)), 1 << (fmt.bits - 1), (100,), generator=g, dtype=torch.int64)
    out.view(RAW[fmt.bits])[out_specials] = raw.to(RAW[fmt.bits])
    bound = torch.rand(n, generator=g, dtype=torch.float64) * 1e-2
    bound[torch.randint(0, n, (50,), generator=g)] = 0
    return ref, out, bound


@pytest.mark.skipif(not fused_numba.AVAILABLE, reason="no numba")
@pytest.mark.parametrize("name", FLOAT_NAMES)
def test_backends_agree_on_large_random_arrays(name):
    ref, out, bound = random_pair(name, 300_001, seed=7)
    for ftz in (False, True):
        a = compare(ref, out, name, ftz=ftz, bound=bound, backend="torch")
        b = compare(ref, out, name, ftz=ftz, bound=bound, backend="numba")
        da, db = a.as_dict(), b.as_dict()
        for key in ("rms", "rel_l2", "bound_rms", "bias_z", "rounding_rms", "backend"):  # sums: order differs
            da.pop(key), db.pop(key)
        assert json.dumps(da, sort_keys=True) == json.dumps(db, sort_keys=True)  # NaN-aware equality
        assert b.rms == pytest.approx(a.rms, rel=1e-12) and b.rel_l2 == pytest.approx(a.rel_l2, rel=1e-12)
        assert b.bound_rms == pytest.approx(a.bound_rms, rel=1e-12)
        assert b.bias_z == pytest.approx(a.bias_z, rel=1e-9, abs=1e-9)
        assert b.rounding_rms == pytest.approx(a.rounding_rms, rel=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_f16_overflow_boundary(backend):
    # 65504 is max; 65520 = max + half a gap rounds to inf but may give max or
    # inf (CTS near overflow); from 2**16 on only inf is acceptable.
    ref = torch.tensor([65504, 65520, 65520, 65536, 65536, -65520, 65519.99, 1e5, 65520], dtype=torch.float64)
    out = torch.tensor([65504, 65504, math.inf, math.inf, 65504, -math.inf, 65504, 65504, -math.inf],
                       dtype=torch.float16)
    c = compare(ref, out, "f16", backend=backend)
    assert c.overflow == 8  # every element but the first (65519.99 is beyond max too)
    assert c.inf_mismatch == 3  # 65536 -> max, 1e5 -> max, 65520 -> -inf
    assert c.worst["inf_mismatch"].index == 4
    assert c.compared == 1 and c.max_abs_diff == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_e4m3fn_overflow_accepts_nan_or_saturation(backend):
    ref = torch.tensor([450.0, 1000.0, -1000.0, math.inf, 1000.0], dtype=torch.float64)
    out = torch.tensor([448.0, 448.0, -448.0, 448.0, math.nan]).to(torch.float8_e4m3fn)
    out[4] = torch.tensor(math.nan).to(torch.float8_e4m3fn)
    c = compare(ref, out, "f8e4m3fn", backend=backend)
    assert (c.overflow, c.inf_mismatch, c.nan_mismatch) == (4, 0, 0)
    wrong_sign = compare(ref[:2], torch.tensor([-448.0, 448.0]).to(torch.float8_e4m3fn), "f8e4m3fn",
                         backend=backend)
    assert wrong_sign.inf_mismatch == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_and_inf_never_reach_the_maxima(backend):
    ref = torch.tensor([1.0, math.nan, 2.0, math.inf, 3.0, 1.0], dtype=torch.float64)
    out = torch.tensor([1.0, 5.0, math.nan, math.inf, math.inf, 1.5], dtype=torch.float16)
    c = compare(ref, out, "f16", backend=backend)
    assert (c.nan_mismatch, c.inf_mismatch, c.overflow, c.compared) == (2, 1, 0, 2)
    assert c.max_abs_diff == 0.5 and c.worst["max_abs_diff"].index == 5
    assert math.isfinite(c.rms) and sum(c.histogram.values()) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_zero_inputs_give_zeros_not_nan(backend):
    ref = torch.zeros(5, dtype=torch.float64)
    c = compare(ref, torch.zeros(5, dtype=torch.bfloat16), "bf16", bound=torch.zeros(5, dtype=torch.float64),
                backend=backend)
    assert [c.max_abs_diff, c.max_rel_diff, c.rms, c.rel_l2, c.bound_ratio] == [0.0] * 5
    assert c.histogram["ref == 0"] == 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_reference_with_error_gives_infinite_rel_l2_and_bound_ratio(backend):
    ref = torch.zeros(3, dtype=torch.float64)
    out = torch.tensor([0.0, 0.25, 0.0], dtype=torch.float32)
    c = compare(ref, out, "f32", bound=torch.zeros(3, dtype=torch.float64), backend=backend)
    assert c.rel_l2 == math.inf and c.bound_ratio == math.inf and c.max_rel_diff == 0
    assert c.rms == pytest.approx(0.25 / (math.sqrt(3) * 0.25))


@pytest.mark.parametrize("backend", BACKENDS)
def test_ftz_allowance(backend):
    fmt = get_format("f16")
    ref = torch.tensor([fmt.min_subnormal * 3, -fmt.min_subnormal, fmt.min_normal * 0.75, 1.0], dtype=torch.float64)
    out = torch.tensor([0.0, -0.0, fmt.min_normal * 0.75, 1.0], dtype=torch.float16)
    strict = compare(ref, out, "f16", backend=backend)
    assert strict.ftz_allowed == 0 and strict.max_rel_diff == 1.0 and strict.max_ulp_diff == 3
    allowed = compare(ref, out, "f16", ftz=True, backend=backend)
    assert allowed.ftz_allowed == 2 and allowed.max_rel_diff == 0 and allowed.max_ulp_diff == 0
    assert allowed.histogram["0"] == 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_ulp_distance_counts_values_and_merges_signed_zeros(backend):
    fmt = get_format("bf16")
    ref = torch.tensor([0.0, -fmt.min_subnormal, 1.0, 1.0], dtype=torch.float64)
    out = torch.tensor([-0.0, fmt.min_subnormal, 1.0 - 2 ** -8, 1.0 + 2 ** -5], dtype=torch.bfloat16)
    c = compare(ref, out, "bf16", backend=backend)
    # -0 and +0 are one value; -min_sub .. +min_sub is 2 steps; 1 .. 1 + 4 * 2**-7 is 4
    assert c.max_ulp_diff == 4 and c.worst["max_ulp_diff"].index == 3
    # eps divides by ulp(1) = 2**-8, the gap below the power of two
    assert c.max_eps_diff == 8.0


def test_numpy_inputs_and_torch_dtype():
    ref = np.linspace(-1, 1, 11)
    out = ref.astype(np.float16)
    a = compare(ref, out, torch.float16)
    b = compare(torch.from_numpy(ref), torch.from_numpy(out), "f16")
    assert a.as_dict() == b.as_dict()


def test_multidimensional_inputs_report_positions():
    ref = torch.zeros(2, 3, 4, dtype=torch.float64)
    out = torch.zeros(2, 3, 4, dtype=torch.float32)
    out[1, 2, 3] = 1.0
    c = compare(ref, out, "f32")
    assert c.worst["max_abs_diff"].index == 23 and c.worst["max_abs_diff"].position == (1, 2, 3)


def test_non_contiguous_inputs_use_logical_order():
    ref = torch.arange(12, dtype=torch.float64).reshape(3, 4).t()
    out = ref.to(torch.float16).contiguous()
    out[0, 2] = 0
    c = compare(ref, out, "f16")
    assert c.worst["max_abs_diff"].position == (0, 2) and c.max_abs_diff == 8


@pytest.mark.parametrize("bad, message", [
    (dict(ref=torch.zeros(3, dtype=torch.float64), out=torch.zeros(4, dtype=torch.float16)), "shape mismatch"),
    (dict(ref=torch.zeros(0, dtype=torch.float64), out=torch.zeros(0, dtype=torch.float16)), "empty"),
    (dict(ref=torch.zeros(3, dtype=torch.float32), out=torch.zeros(3, dtype=torch.float16)), "ref must be float64"),
    (dict(ref=torch.zeros(3, dtype=torch.float64), out=torch.zeros(3, dtype=torch.float32)), "dtype mismatch"),
    (dict(ref=torch.zeros(3, dtype=torch.float64), out=torch.zeros(3, dtype=torch.float16), dtype="half"),
     "unknown dtype 'half'.*valid choices: f32, tf32, f16"),
    (dict(ref=torch.zeros(3, dtype=torch.float64), out=torch.zeros(3, dtype=torch.float16),
          bound=torch.zeros(2, dtype=torch.float64)), "shape mismatch: bound"),
    (dict(ref=torch.zeros(3, dtype=torch.float64), out=torch.zeros(3, dtype=torch.float16),
          bound=torch.tensor([0.0, -1.0, 0.0], dtype=torch.float64)), "bound must be >= 0"),
    (dict(ref=torch.zeros(3, dtype=torch.float64), out=torch.zeros(3, dtype=torch.float16), rel_floor=-1.0),
     "rel_floor"),
    (dict(ref=torch.zeros(3, dtype=torch.float64), out=torch.zeros(3, dtype=torch.float16), backend="cuda"),
     "unknown metrics backend 'cuda'"),
])
def test_bad_inputs_are_value_errors_that_name_the_problem(bad, message):
    args = {"dtype": "f16", **bad}
    with pytest.raises(ValueError, match=message):
        compare(**args)


def test_tf32_is_compared_as_f32():
    ref = torch.randn(100, dtype=torch.float64)
    out = ref.to(torch.float32)
    a, b = compare(ref, out, "tf32"), compare(ref, out, "f32")
    assert a.dtype == "tf32" and a.max_eps_diff == b.max_eps_diff and a.max_ulp_diff == b.max_ulp_diff == 0


def test_as_dict_is_json_serialisable():
    ref, out, bound = random_pair("f16", 1000, seed=3)
    d = compare(ref, out, "f16", bound=bound).as_dict()
    again = json.loads(json.dumps(d))
    assert list(again["histogram"]) == list(metrics.HISTOGRAM_BUCKETS)
    assert set(metrics.METRIC_NAMES) <= set(again) and again["worst"]["max_abs_diff"]["index"] >= 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad_value", [-1e-300, math.nan, -math.inf])
@pytest.mark.parametrize("where", [0, 999, 2047])
def test_a_bad_bound_element_in_any_chunk_is_refused(backend, bad_value, where):
    """The check runs inside the fused pass (numba): every chunk, also where ref is NaN (not compared)."""
    ref = torch.linspace(-3, 3, 2048, dtype=torch.float64)
    ref[where] = math.nan
    bound = torch.full_like(ref, 1e-3)
    bound[where] = bad_value
    with pytest.raises(ValueError, match="bound must be >= 0 everywhere"):
        compare(ref, ref.to(torch.float16), "f16", bound=bound, backend=backend, chunk=300)
    bound[where] = 0.0
    assert compare(ref, ref.to(torch.float16), "f16", bound=bound, backend=backend, chunk=300).compared == 2047


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("chunk", [None, 300])
@pytest.mark.parametrize("with_nan", [False, True])  # the torch path's general kernel takes chunks with a NaN
def test_a_negative_zero_bound_is_zero(backend, chunk, with_nan):
    """A bound of -0 (an interval whose upper end is round_up's -0 at a +0 reference gives one) allows no
    difference: an output off by anything fails bound_ratio, as a +0 bound does (|d| / -0 would be -inf,
    below every ratio, and the element would pass)."""
    ref = torch.zeros(2048, dtype=torch.float64)
    out = torch.zeros(2048, dtype=torch.float16)
    if with_nan:
        ref[1400], out[1400] = math.nan, math.nan
    out[1500] = 2.0 ** -24
    for zero in (0.0, -0.0):
        c = compare(ref, out, "f16", bound=torch.full_like(ref, zero), backend=backend, chunk=chunk)
        assert c.bound_ratio == math.inf and c.bound_rms == math.inf
        assert c.worst["bound_ratio"].index == 1500
    out[1500] = 0.0
    c = compare(ref, out, "f16", bound=torch.full_like(ref, -0.0), backend=backend, chunk=chunk)
    assert c.bound_ratio == 0.0 and c.bound_rms == 0.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_negative_zero_rel_floor_is_zero(backend):
    """rel_floor=-0.0 compares as 0.0 on both paths, whichever came first in the process (the numba path's
    format arguments are cached): a zero ref is not above it, so max_rel_diff_old has no element."""
    ref = torch.zeros(64, dtype=torch.float64)
    out = torch.zeros(64, dtype=torch.float16)
    for floor in (-0.0, 0.0, -0.0):
        c = compare(ref, out, "f16", rel_floor=floor, backend=backend)
        assert "max_rel_diff_old" not in c.worst and c.max_rel_diff_old == 0.0
