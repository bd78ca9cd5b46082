"""The low-bit formats (fnuz FP8, fp4 e2m1, e8m0) against a decoder written here from their bit layouts.

The decoder knows only each format's layout and NaN/inf rules (issue 16);
from it come every value of each format, a brute-force round (nearest, ties
to the even pattern), the CTS ulp and a per-element compare(). The OCP FP8
formats (f8e4m3fn, f8e5m2) run through the same checks. torch's own casts
are checked where torch has the dtype, with their differences asserted.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from e2egen.metrics import compare, flush_subnormals, get_format, round_to, ulp
from e2egen.metrics import fused_numba
from e2egen.metrics.encoding import (block_amax, decode, encode, mx_scale_codes, mx_scale_exponent, pack_fp4,
                                     unpack_fp4)

# name: (sign bits, exponent bits, mantissa bits, bias)
LAYOUTS = {"f8e4m3fn": (1, 4, 3, 7), "f8e5m2": (1, 5, 2, 15), "f8e4m3fnuz": (1, 4, 3, 8),
           "f8e5m2fnuz": (1, 5, 2, 16), "f4e2m1": (1, 2, 1, 1), "e8m0": (0, 8, 0, 127)}
NAMES = list(LAYOUTS)
NEW = ["f8e4m3fnuz", "f8e5m2fnuz", "f4e2m1", "e8m0"]
TORCH = {"f8e4m3fn": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2, "f8e4m3fnuz": torch.float8_e4m3fnuz,
         "f8e5m2fnuz": torch.float8_e5m2fnuz, "e8m0": torch.float8_e8m0fnu}
BACKENDS = ["torch", pytest.param("numba", marks=pytest.mark.skipif(not fused_numba.AVAILABLE, reason="no numba"))]


def spec_decode(name: str, code: int) -> float:
    """The value of a bit pattern, from the layout alone."""
    sign_bits, e, m, bias = LAYOUTS[name]
    if name == "e8m0":
        return math.nan if code == 0xFF else math.ldexp(1.0, code - bias)
    negative = sign_bits and (code >> (e + m)) & 1
    field, fraction = (code >> m) & ((1 << e) - 1), code & ((1 << m) - 1)
    if name.endswith("fnuz") and code == 0x80:
        return math.nan
    if name == "f8e4m3fn" and field == 15 and fraction == 7:
        return math.nan
    if name == "f8e5m2" and field == 31:
        return math.nan if fraction else (-math.inf if negative else math.inf)
    if field == 0:
        value = math.ldexp(fraction, 1 - bias - m)
    else:
        value = math.ldexp((1 << m) + fraction, field - bias - m)
    return -value if negative else value


def codes_of(name: str) -> range:
    return range(1 << sum(LAYOUTS[name][:3]))


@functools.cache
def table(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(finite values ascending, -0 merged into +0; whether each one's pattern is even)."""
    by_value: dict[float, int] = {}
    for code in codes_of(name):
        v = spec_decode(name, code)
        if math.isfinite(v):
            by_value.setdefault(v + 0.0, code)  # +0.0: -0 and +0 are one value
    values = np.array(sorted(by_value))
    return values, np.array([by_value[v] % 2 == 0 for v in values])


def oracle_round(name: str, x: float) -> float:
    """Nearest value, ties to the even pattern (e8m0: up); beyond the top the format's overflow result."""
    values, even = table(name)
    fmt_max = values[-1]
    if math.isnan(x) or (name == "e8m0" and x < 0):
        return math.nan
    overflow = {"f8e5m2": math.copysign(math.inf, x), "f4e2m1": math.copysign(fmt_max, x)}.get(name, math.nan)
    if math.isinf(x):
        return overflow
    virtual = 2 * fmt_max if name == "e8m0" else fmt_max + (values[-1] - values[-2])  # the pattern after max
    extended = np.concatenate([[-virtual], values, [virtual]])
    parity = np.concatenate([[not even[-1]], even, [not even[-1]]])
    if name == "e8m0":
        parity = np.ones_like(parity)  # both neighbours' significands are 1 (odd): ties go up
    i = int(np.searchsorted(extended, x, side="right")) - 1
    if i >= len(extended) - 1:
        return overflow
    lower, upper = extended[i], extended[i + 1]
    if name == "e8m0" and i == 0:  # below the smallest value: nothing lower (no zero)
        return float(values[0])
    up = (upper - x < x - lower) or (upper - x == x - lower and (parity[i + 1] if name != "e8m0" else True))
    result = float(upper if up and lower != x else lower)
    if abs(result) == virtual:
        return overflow
    if result == 0:
        return 0.0 if name.endswith("fnuz") else math.copysign(0.0, x)
    return result


def oracle_ulp(name: str, x: float) -> float:
    """min(b - a) over representable a <= x <= b, a != b (clipped to the range)."""
    values, _ = table(name)
    x = min(max(x, values[0]), values[-1])
    i = int(np.searchsorted(values, x))
    gaps = []
    if i > 0:
        gaps.append(values[i] - values[i - 1])
    if values[i] == x and i + 1 < len(values):
        gaps.append(values[i + 1] - values[i])
    return float(min(gaps))


def probe_points(name: str) -> np.ndarray:
    """Every value, every midpoint, their float64 neighbours, and points beyond the ends."""
    values, _ = table(name)
    mids = (values[:-1] + values[1:]) / 2
    top_gap = values[-1] - values[-2]
    beyond = [values[-1] + top_gap / 2, values[-1] + top_gap, 3 * values[-1], 1e300, math.inf, -math.inf,
              5e-324, -0.0, 0.0, values[0] / 2, values[0] / 4, values[0] * 0.75]
    points = np.concatenate([values, mids, beyond, -np.concatenate([values, mids, beyond])])
    return np.concatenate([points, np.nextafter(points, np.inf), np.nextafter(points, -np.inf), [math.nan]])


def same(a, b) -> bool:
    """Equal values (NaN equals NaN), with the sign of zero."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(both_nan | ((a == b) & (np.signbit(a) == np.signbit(b)))))


# ---- the formats --------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_every_pattern_decodes_as_its_layout_says(name):
    codes = torch.tensor(list(codes_of(name)), dtype=torch.int64)
    want = [spec_decode(name, c) for c in codes.tolist()]
    assert same(decode(codes, name).numpy(), want)
    if name in TORCH:  # torch decodes its dtypes the same way
        assert same(codes.to(torch.uint8).view(TORCH[name]).to(torch.float64).numpy(), want)


@pytest.mark.parametrize("name", NAMES)
def test_derived_limits_match_the_enumerated_values(name):
    fmt, (values, _) = get_format(name), table(name)
    positive = values[values > 0]
    assert fmt.max == values[-1] and fmt.min_subnormal == positive[0]
    assert spec_decode(name, fmt.max_pattern) == fmt.max  # the sign bit clear
    assert fmt.bias == LAYOUTS[name][3] and fmt.bits == sum(LAYOUTS[name][:3])
    assert fmt.min_normal == 2.0 ** fmt.emin and fmt.overflow_limit == 2.0 ** (fmt.emax + 1)
    assert math.floor(math.log2(fmt.max)) == fmt.emax
    if fmt.has_subnormals:  # the first gap doubles at 2 * min_normal
        gaps = np.diff(positive)
        assert positive[np.flatnonzero(gaps > gaps[0])[0]] == 2 * fmt.min_normal
    nans = [c for c in codes_of(name) if math.isnan(spec_decode(name, c))]
    assert (fmt.nan_pattern in nans) if nans else fmt.nan_pattern is None
    assert fmt.has_nan == bool(nans)
    zeros = [c for c in codes_of(name) if spec_decode(name, c) == 0]
    assert fmt.has_zero == bool(zeros) and fmt.has_negative_zero == (len(zeros) == 2)


def test_the_issue_constants():
    f = {name: get_format(name) for name in NAMES}
    assert (f["f8e4m3fnuz"].max, f["f8e5m2fnuz"].max, f["f8e4m3fn"].max, f["f4e2m1"].max) == (240, 57344, 448, 6)
    assert table("f4e2m1")[0][table("f4e2m1")[0] >= 0].tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert (f["e8m0"].min_subnormal, f["e8m0"].max) == (2.0 ** -127, 2.0 ** 127)
    assert [f[n].encoding for n in NAMES] == ["fn", "ieee", "fnuz", "fnuz", "none", "unsigned-exponent"]
    assert [f[n].nan_pattern for n in ("f8e4m3fn", "f8e4m3fnuz", "f8e5m2fnuz", "e8m0")] == [0x7F, 0x80, 0x80, 0xFF]
    assert not any(f[n].has_inf for n in NEW)
    for name in ("f8e4m3fnuz", "f8e5m2fnuz", "e8m0"):  # torch agrees on the limits
        info = torch.finfo(TORCH[name])
        assert (f[name].max, f[name].min_normal) == (info.max, info.smallest_normal)
    assert get_format(torch.float4_e2m1fn_x2).name == "f4e2m1" and get_format("f4e2m1").torch_dtype is None


# ---- rounding -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_round_to_every_value_midpoint_and_neighbour(name):
    x = probe_points(name)
    assert same(round_to(torch.from_numpy(x), name).numpy(), [oracle_round(name, v) for v in x])


@pytest.mark.parametrize("name", NAMES)
def test_ulp_every_value_midpoint_and_neighbour(name):
    x = probe_points(name)
    x = x[~np.isnan(x) & ((x > 0) if name == "e8m0" else True)]
    np.testing.assert_array_equal(ulp(torch.from_numpy(x), name).numpy(), [oracle_ulp(name, v) for v in x])


@pytest.mark.parametrize("name", ["f8e4m3fnuz", "f8e5m2fnuz", "e8m0"])
def test_round_to_matches_torch_cast_from_float32_bit_for_bit(name):
    # float32 inputs: torch's cast rounds once (from float64 it rounds via float32, twice; below)
    x = torch.from_numpy(probe_points(name)).to(torch.float32)
    if name == "e8m0":  # torch drops the sign of negative input (below)
        x = x[~(x < 0)]
    ours = encode(x.to(torch.float64), name)
    theirs = x.to(TORCH[name]).view(torch.uint8)
    assert torch.equal(ours, theirs)


def test_where_torch_casts_differ_from_round_to():
    f64 = torch.float64
    # float64 -> fnuz / e8m0 goes through float32 in torch: a point just above a midpoint rounds twice
    x = torch.tensor([1 + 1 / 16 + 2 ** -40, 248 - 2 ** -30], dtype=f64)
    assert round_to(x, "f8e4m3fnuz").tolist() == [1.125, 240.0]
    assert x.to(torch.float8_e4m3fnuz).view(torch.uint8).tolist() == [0x40, 0x80]  # 1.0 and NaN
    x = torch.tensor([1.5 - 2 ** -40], dtype=f64)
    assert round_to(x, "e8m0").tolist() == [1.0] and x.to(torch.float8_e8m0fnu).to(f64).tolist() == [2.0]
    # negative input to e8m0: torch drops the sign; round_to says NaN (no sign bit)
    assert torch.tensor([-3.0], dtype=f64).to(torch.float8_e8m0fnu).to(f64).tolist() == [4.0]
    assert math.isnan(round_to(torch.tensor([-3.0], dtype=f64), "e8m0").item())
    # the same on overflow, ties, NaN, zero and inf
    specials = torch.tensor([1e30, 248.0, math.nan, -0.0, math.inf, 1.0625], dtype=f64)
    assert torch.equal(encode(specials, "f8e4m3fnuz"), specials.to(torch.float8_e4m3fnuz).view(torch.uint8))
    specials = torch.tensor([0.0, -0.0, 1.5, 3.0, 0.75, math.inf, math.nan, 2.0 ** -140, 1.5 * 2.0 ** 127], dtype=f64)
    assert torch.equal(encode(specials, "e8m0"), specials.to(torch.float8_e8m0fnu).view(torch.uint8))


def test_overflow_by_encoding_and_saturation():
    big = torch.tensor([1e300, -1e300, math.inf, -math.inf, math.nan], dtype=torch.float64)
    assert same(round_to(big, "f8e5m2").numpy(), [math.inf, -math.inf, math.inf, -math.inf, math.nan])
    for name in ("f8e4m3fn", "f8e4m3fnuz", "f8e5m2fnuz"):
        assert np.isnan(round_to(big, name).numpy()).all()
    for name in ("f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz", "f4e2m1"):
        m = get_format(name).max
        assert same(round_to(big, name, saturate=True).numpy(), [m, -m, m, -m, math.nan])
    assert same(round_to(big, "f4e2m1").numpy(), [6, -6, 6, -6, math.nan])  # no NaN/inf: always saturates
    assert same(round_to(big[:1], "e8m0").numpy(), [math.nan]) and round_to(big[:1], "e8m0", saturate=True).item() == 2.0 ** 127


def test_fnuz_has_no_negative_zero():
    x = torch.tensor([-0.0, -1e-30, -2.0 ** -16], dtype=torch.float64)  # -2**-16: subnormal in both
    for name in ("f8e4m3fnuz", "f8e5m2fnuz"):
        assert not torch.signbit(round_to(x[:2], name)).any()
        assert encode(x[:2], name).tolist() == [0, 0]
        assert not torch.signbit(flush_subnormals(x, name)).any()
    assert torch.signbit(round_to(x[:2], "f8e4m3fn")).all() and torch.signbit(round_to(x[:2], "f4e2m1")).all()


def test_flush_subnormals_per_format():
    x = torch.tensor([0.5, -0.5, 1.0, 2.0 ** -127, 2.0 ** -130], dtype=torch.float64)
    assert same(flush_subnormals(x, "f4e2m1").numpy(), [0.0, -0.0, 1.0, 0.0, 0.0])
    assert same(flush_subnormals(x, "e8m0").numpy(), x.numpy())  # no subnormals
    fnuz = get_format("f8e4m3fnuz")
    sub = torch.tensor([fnuz.min_subnormal, -fnuz.min_subnormal, fnuz.min_normal], dtype=torch.float64)
    assert same(flush_subnormals(sub, "f8e4m3fnuz").numpy(), [0.0, 0.0, fnuz.min_normal])


def doubles(name: str):
    fmt = get_format(name)
    return st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                     st.floats(-2 * fmt.overflow_limit, 2 * fmt.overflow_limit, width=64),
                     st.floats(-4 * fmt.min_normal, 4 * fmt.min_normal, width=64),
                     st.sampled_from(probe_points(name).tolist()))


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_round_to_is_idempotent_monotone_and_nearest(name, data):
    xs = np.array(data.draw(st.lists(doubles(name), min_size=2, max_size=30)))
    r = round_to(torch.from_numpy(xs), name).numpy()
    assert same(round_to(torch.from_numpy(r), name).numpy(), r)  # idempotent
    assert same(r, [oracle_round(name, v) for v in xs])  # the nearest value, ties to even
    order = np.argsort(xs, kind="stable")
    numbers = r[order][~np.isnan(r[order])]
    assert np.all(numbers[1:] >= numbers[:-1])  # monotone where both are numbers
    values, _ = table(name)
    finite = np.isfinite(r) & (np.abs(xs) <= values[-1]) & ((xs >= 0) if name == "e8m0" else True)
    for x, rx in zip(xs[finite], r[finite]):  # no representable value is nearer
        assert np.min(np.abs(values - x)) == abs(rx - x)


# ---- codes, fp4 packing, MX scales ------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_encode_decode_round_trip_every_number(name):
    codes = torch.tensor([c for c in codes_of(name) if not math.isnan(spec_decode(name, c))], dtype=torch.int64)
    assert torch.equal(encode(decode(codes, name), name).to(torch.int64), codes)
    fmt = get_format(name)
    if fmt.has_nan:
        assert encode(torch.tensor([math.nan], dtype=torch.float64), name).item() == fmt.nan_pattern
    else:
        with pytest.raises(ValueError, match="f4e2m1 has no NaN"):
            encode(torch.tensor([1.0, math.nan]), name)


def test_fp4_packs_two_a_byte_low_nibble_first():
    codes = torch.tensor([[1, 2, 15, 0]], dtype=torch.uint8)
    packed = pack_fp4(codes)
    assert packed.tolist() == [[0x21, 0x0F]]
    assert torch.equal(unpack_fp4(packed.view(torch.float4_e2m1fn_x2)), codes)
    with pytest.raises(ValueError, match="even last dimension"):
        pack_fp4(torch.zeros(3, dtype=torch.uint8))


def test_mx_scale_is_floor_log2_amax_minus_emax_clamped():
    amax = torch.tensor([6.0, 7.99, 8.0, 448.0, 0.0, 2.0 ** -200, 1e300, math.nan, math.inf], dtype=torch.float64)
    assert mx_scale_exponent(amax, "f4e2m1").tolist() == [0, 0, 1, 6, -127, -127, 127, 128, 128]
    assert mx_scale_exponent(amax[:4], "f8e4m3fn").tolist() == [-6, -6, -5, 0]
    codes = mx_scale_codes(amax, "f4e2m1")
    assert codes.tolist() == [127, 127, 128, 133, 0, 0, 254, 255, 255]
    scales = decode(codes, "e8m0")
    # every finite block then fits: amax / scale < 2 * 2**emax, so at most one binade above max
    assert (amax[:4] / scales[:4] < 2 * 2.0 ** get_format("f4e2m1").emax).all()
    x = torch.tensor([[1.0, -3.0, 0.5, 2.0, -100.0, 1.0, 0.0, math.nan]], dtype=torch.float64)
    assert same(block_amax(x, 4).numpy(), [[3.0, math.nan]])


# ---- compare() ------------------------------------------------------------------------------


def out_tensor(name: str, codes: list[int]) -> torch.Tensor:
    raw = torch.tensor(codes, dtype=torch.uint8)
    return raw.view(TORCH[name]) if name in TORCH else raw


def position(name: str, v: float) -> int:
    values, _ = table(name)
    i = int(np.searchsorted(values, v))
    assert values[i] == v
    return i


def oracle_compare(name: str, refs: list[float], codes: list[int]) -> dict:
    """The counts and maxima compare() reports, element by element (ftz off)."""
    fmt = get_format(name)
    counts = {"nan_mismatch": 0, "inf_mismatch": 0, "overflow": 0, "compared": 0}
    top = {"max_abs_diff": 0.0, "max_eps_diff": 0.0, "max_ulp_diff": 0}
    for r, c in zip(refs, codes):
        o = spec_decode(name, c)
        if math.isnan(r):
            counts["nan_mismatch"] += not math.isnan(o)
            continue
        if abs(r) > fmt.max:
            counts["overflow"] += math.isfinite(r)
            if not (math.isnan(o) or (abs(o) == fmt.max and math.copysign(1, o) == math.copysign(1, r))):
                counts["nan_mismatch" if math.isnan(o) else "inf_mismatch"] += 1
            continue
        if math.isnan(o):
            counts["nan_mismatch"] += 1
            continue
        counts["compared"] += 1
        d = abs(r - o)
        top["max_abs_diff"] = max(top["max_abs_diff"], d)
        top["max_eps_diff"] = max(top["max_eps_diff"], d / oracle_ulp(name, abs(r)))
        top["max_ulp_diff"] = max(top["max_ulp_diff"], abs(position(name, oracle_round(name, r) + 0.0)
                                                            - position(name, o + 0.0)))
    return {**counts, **top}


@st.composite
def compare_cases(draw, name: str):
    fmt = get_format(name)
    values, _ = table(name)
    if name == "e8m0":  # positive refs from 2**-126 up (see compare.py on smaller ones)
        ref = st.one_of(st.floats(2.0 ** -126, 4 * fmt.max), st.sampled_from([math.nan, math.inf, 3 * 2.0 ** 127]),
                        st.sampled_from(values.tolist()[1:]))
    else:
        ref = st.one_of(st.floats(-2 * fmt.overflow_limit, 2 * fmt.overflow_limit),
                        st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0]),
                        st.sampled_from(values.tolist()))
    refs = draw(st.lists(ref, min_size=1, max_size=24))
    codes = []
    for r in refs:
        rounded = oracle_round(name, r)
        if draw(st.booleans()) and math.isfinite(rounded):
            code = int(encode(torch.tensor([rounded], dtype=torch.float64), name))
            code = min(max(code + draw(st.integers(-2, 2)), 0), (1 << fmt.bits) - 1)
        else:
            code = draw(st.integers(0, (1 << fmt.bits) - 1))
        codes.append(code)
    return refs, codes


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", [n for n in NAMES if n != "f8e5m2"])  # inf outputs: test_metrics_compare.py
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_compare_matches_the_per_element_oracle(name, backend, data):
    refs, codes = data.draw(compare_cases(name))
    c = compare(torch.tensor(refs, dtype=torch.float64), out_tensor(name, codes), name, backend=backend,
                chunk=data.draw(st.sampled_from([None, 1, 5])))
    want = oracle_compare(name, refs, codes)
    for key, value in want.items():
        assert getattr(c, key) == value, key


@pytest.mark.parametrize("backend", BACKENDS)
def test_compare_nan_and_overflow_rules_per_encoding(backend):
    def run(name, refs, codes, **kw):
        return compare(torch.tensor(refs, dtype=torch.float64), out_tensor(name, codes), name, backend=backend, **kw)

    # fnuz: 0x80 is the only NaN (matches a NaN ref), overflow accepts NaN or max of ref's sign
    c = run("f8e4m3fnuz", [math.nan, 1000.0, -1000.0, 1000.0, 1.0], [0x80, 0x80, 0xFF, 0xFF, 0x80])
    assert (c.nan_mismatch, c.inf_mismatch, c.overflow, c.compared) == (1, 1, 3, 0)
    # fp4: no NaN, so a NaN ref never matches; overflow saturates to ±6
    c = run("f4e2m1", [math.nan, 7.0, -100.0, 7.0, 1.0], [0x7, 0x7, 0xF, 0xF, 0x2])
    assert (c.nan_mismatch, c.inf_mismatch, c.overflow, c.compared, c.max_abs_diff) == (1, 1, 3, 1, 0.0)
    # e8m0: 0xFF is NaN; overflow accepts NaN or 2**127
    c = run("e8m0", [math.nan, 2.0 ** 130, 2.0 ** 130, 1.0, 4.0], [0xFF, 0xFF, 0xFE, 0xFF, 129])
    assert (c.nan_mismatch, c.inf_mismatch, c.overflow, c.compared, c.max_ulp_diff) == (1, 0, 2, 1, 0)
    # fnuz ftz: +0 out for a subnormal ref
    fmt = get_format("f8e5m2fnuz")
    c = run("f8e5m2fnuz", [fmt.min_subnormal * 3, -fmt.min_subnormal], [0, 0], ftz=True)
    assert (c.ftz_allowed, c.max_abs_diff) == (2, 0.0)


def test_compare_e8m0_documented_edges():
    # no zero: 2**-127 is round_e8m0(0), but the fused passes count one ulp (compare.py's docstring)
    c = compare(torch.tensor([0.0, 1.0], dtype=torch.float64), out_tensor("e8m0", [0, 127]), "e8m0")
    assert (c.compared, c.max_ulp_diff, c.max_abs_diff) == (2, 1, 2.0 ** -127)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", NEW)
def test_compare_large_random_arrays_backends_agree(name, backend):
    g = torch.Generator().manual_seed(3)
    ref = torch.randn(50_001, generator=g, dtype=torch.float64) * 4
    if name == "e8m0":
        ref = ref.abs() + 2.0 ** -100
    codes = encode(round_to(ref * (1 + 0.2 * torch.rand(ref.shape, generator=g, dtype=torch.float64)), name,
                            saturate=True), name)
    out = codes.view(TORCH[name]) if name in TORCH else codes
    c = compare(ref, out, name, backend=backend)
    other = compare(ref, out, name, backend="torch")
    summed = {"rms", "rel_l2"}  # sums in another order: the last bit may differ
    assert {k: v for k, v in c.as_dict().items() if k not in summed | {"backend"}} == \
        {k: v for k, v in other.as_dict().items() if k not in summed | {"backend"}}
    for key in summed:
        assert getattr(c, key) == pytest.approx(getattr(other, key), rel=1e-12)
    assert c.compared + c.overflow == ref.numel() and c.max_ulp_diff >= 1


def test_compare_fp4_takes_codes_or_packed_pairs():
    ref = torch.tensor([[0.4, -2.9, 6.5, 1.0]], dtype=torch.float64)
    codes = encode(ref, "f4e2m1")
    packed = pack_fp4(codes).view(torch.float4_e2m1fn_x2)
    a, b = compare(ref, codes, "f4e2m1"), compare(ref, packed, "f4e2m1")
    assert a.as_dict() == b.as_dict() and a.max_ulp_diff == 0 and a.overflow == 1
    assert a.worst["max_abs_diff"].out == -3.0
    with pytest.raises(ValueError, match="4-bit codes, one a byte"):
        compare(ref, ref.to(torch.float32), "f4e2m1")


def test_a_decoded_value_is_a_copy_of_the_shared_table():
    """decode looks values up in one table per format: changing a result, even a 0-d one, leaves it alone."""
    one = decode(torch.tensor(0x38, dtype=torch.uint8), "f8e4m3fn")
    assert one.item() == 1.0
    one.add_(100)
    assert decode(torch.tensor([0x38], dtype=torch.uint8), "f8e4m3fn").tolist() == [1.0]
    assert decode(0x38, "f8e4m3fn").item() == 1.0
