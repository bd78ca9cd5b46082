"""Brute-force oracles for the metrics tests, and checks of the oracles themselves.

The oracles know nothing of metrics' bit arithmetic: a format is the sorted
list of its finite values, obtained by letting torch decode every bit pattern
(f16, bf16, fp8) or numpy's float32 for f32. ulp is the smallest neighbouring
gap, rounding picks the nearer neighbour (ties to the even pattern), the ulp
distance is a distance of positions in the sorted list, and compare() is a
Python loop over the definitions of docs/reference/metrics.md.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch

STORAGE = {"f16": torch.float16, "bf16": torch.bfloat16,
           "f8e4m3fn": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2}
RAW = {1: torch.uint8, 2: torch.int16}


@dataclass(frozen=True)
class OracleFormat:
    name: str
    values: np.ndarray  # every finite value, ascending, -0 merged into +0
    even: np.ndarray  # whether each value's bit pattern is even (ties go there)
    has_inf: bool

    @property
    def max(self) -> float:
        return float(self.values[-1])

    @property
    def top_gap(self) -> float:
        return float(self.values[-1] - self.values[-2])

    @property
    def min_normal(self) -> float:
        # subnormals and the first binade share the gap at zero; the gap first
        # doubles at 2 * min_normal
        positive = self.values[self.values > 0]
        gaps = np.diff(positive)
        return float(positive[np.flatnonzero(gaps > gaps[0])[0]]) / 2

    @property
    def overflow_limit(self) -> float:
        # 2**(emax+1): the power of two just above max
        return 2.0 ** (math.floor(math.log2(self.max)) + 1)


@functools.lru_cache(maxsize=None)
def oracle_format(name: str) -> OracleFormat:
    """All finite values of a 8/16-bit format, decoded by torch from every bit pattern."""
    dtype = STORAGE[name]
    size = torch.empty((), dtype=dtype).element_size()
    patterns = torch.arange(1 << (8 * size), dtype=torch.int64)
    raw = patterns.to(RAW[size]) if size == 1 else patterns.to(torch.int32).to(torch.int16)
    decoded = raw.view(dtype).to(torch.float64).numpy()
    pattern_even = (patterns.numpy() % 2) == 0
    finite = np.isfinite(decoded)
    values, first = np.unique(decoded[finite], return_index=True)  # -0 and +0 collapse to one 0
    even = pattern_even[finite][first]
    even[values == 0] = True
    has_inf = bool(np.isinf(decoded).any())
    return OracleFormat(name, values, even, has_inf)


def oracle_ulp(fmt: OracleFormat, x: np.ndarray) -> np.ndarray:
    """min(b - a) over representable a <= x <= b, a != b; beyond max the gap below max."""
    values = fmt.values
    x = np.asarray(x, dtype=np.float64)
    clipped = np.clip(x, -fmt.max, fmt.max)
    i = np.searchsorted(values, clipped, side="left")
    i = np.clip(i, 0, len(values) - 1)
    exact = values[i] == clipped
    below = np.where(i > 0, values[i] - values[np.maximum(i - 1, 0)], np.inf)  # gap [v[i-1], v[i]]
    above = np.where(i + 1 < len(values), values[np.minimum(i + 1, len(values) - 1)] - values[i], np.inf)
    result = np.where(exact, np.minimum(below, above), below)
    return np.where(np.isnan(x), np.nan, result)


@functools.lru_cache(maxsize=None)
def _extended(name: str) -> tuple[np.ndarray, np.ndarray]:
    """The values with a virtual one beyond each end standing for overflow (its pattern follows max's)."""
    fmt = oracle_format(name)
    extended = np.concatenate([[-fmt.max - fmt.top_gap], fmt.values, [fmt.max + fmt.top_gap]])
    top_even = not fmt.even[-1]
    return extended, np.concatenate([[top_even], fmt.even, [top_even]])


def oracle_round(fmt: OracleFormat, x: np.ndarray) -> np.ndarray:
    """Nearest value, ties to the even pattern; beyond max + half the top gap: inf (NaN without inf)."""
    x = np.asarray(x, dtype=np.float64)
    extended, even = _extended(fmt.name)
    finite_x = np.where(np.isfinite(x), x, 0.0)
    i = np.clip(np.searchsorted(extended, finite_x, side="right") - 1, 0, len(extended) - 2)
    lower, upper = extended[i], extended[i + 1]
    take_upper = (upper - finite_x < finite_x - lower) | (
        (upper - finite_x == finite_x - lower) & even[i + 1])
    take_upper &= lower != finite_x
    j = np.where(take_upper, i + 1, i)
    result = extended[j]
    overflow = (j == 0) | (j == len(extended) - 1) | (np.abs(finite_x) >= extended[-1])
    beyond = np.copysign(np.inf, x) if fmt.has_inf else np.full_like(x, np.nan)
    result = np.where(overflow, beyond, result)
    result = np.where(result == 0, np.copysign(0.0, x), result)
    result = np.where(np.isinf(x), x if fmt.has_inf else np.nan, result)
    return np.where(np.isnan(x), np.nan, result)


def oracle_position(fmt: OracleFormat, v: float) -> int:
    """Position of a representable value in the sorted list (-0 and +0 share one)."""
    i = int(np.searchsorted(fmt.values, v))
    assert fmt.values[i] == v, v
    return i


# f32: numpy's float32 is the oracle (its float64 -> float32 cast rounds once, to nearest even).
def f32_round(x: float) -> float:
    with np.errstate(over="ignore"):
        return float(np.float32(x))


def f32_position(v: float) -> int:
    bits = int(np.float32(v).view(np.int32))
    return bits if bits >= 0 else -(bits & 0x7FFFFFFF)


F32_MAX = float(np.finfo(np.float32).max)


def f32_ulp(x: float) -> float:
    x = min(max(x, -F32_MAX), F32_MAX)
    r = np.float32(f32_round(x))  # finite: x is within ±max
    if float(r) == x:
        with np.errstate(over="ignore"):  # beyond ±max the neighbour is ±inf (and unused)
            down = float(r) - float(np.nextafter(r, np.float32(-np.inf)))
            up = float(np.nextafter(r, np.float32(np.inf))) - float(r)
        gaps = [g for g, ok in ((down, float(r) > -F32_MAX), (up, float(r) < F32_MAX)) if ok]
        return min(gaps)
    lo = r if float(r) < x else np.nextafter(r, np.float32(-np.inf))
    return float(np.nextafter(lo, np.float32(np.inf))) - float(lo)


@dataclass(frozen=True)
class Traits:
    """What the compare oracle needs of a format."""

    max: float
    min_normal: float
    has_inf: bool
    overflow_limit: float
    round: callable
    ulp: callable
    position: callable


def traits(name: str) -> Traits:
    if name in ("f32", "tf32"):
        return Traits(F32_MAX, 2.0 ** -126, True, 2.0 ** 128, f32_round, f32_ulp, f32_position)
    fmt = oracle_format(name)
    return Traits(fmt.max, fmt.min_normal, fmt.has_inf, fmt.overflow_limit,
                  lambda x: float(oracle_round(fmt, np.array([x]))[0]),
                  lambda x: float(oracle_ulp(fmt, np.array([x]))[0]),
                  lambda v: oracle_position(fmt, v))


BUCKET_EDGES = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0]


def oracle_compare(ref, out, name: str, ftz: bool = False, rel_floor: float = 1e-3, bound=None) -> dict:
    """Every metric by the definitions, one element at a time."""
    t = traits(name)
    ref = [float(v) for v in np.asarray(ref, dtype=np.float64).ravel()]
    out = [float(v) for v in np.asarray(out, dtype=np.float64).ravel()]
    bound = None if bound is None else [float(v) for v in np.asarray(bound, dtype=np.float64).ravel()]
    same_sign = lambda a, b: math.copysign(1, a) == math.copysign(1, b)  # noqa: E731
    counts = {"nan_mismatch": [0, -1], "inf_mismatch": [0, -1], "overflow": [0, -1]}
    maxima = {k: [-1.0, -1] for k in ("max_abs_diff", "max_rel_diff", "max_rel_diff_old",
                                       "max_eps_diff", "max_ulp_diff", "bound_ratio")}
    hist = [0] * 10
    squares, ref_squares, compared, ftz_allowed, top_ref, top_out = [], [], 0, 0, 0.0, 0.0

    def count(name_, i):
        counts[name_][0] += 1
        if counts[name_][1] < 0:
            counts[name_][1] = i

    def offer(name_, value, i):
        if value > maxima[name_][0]:
            maxima[name_] = [value, i]

    for i, (r, o) in enumerate(zip(ref, out)):
        if math.isnan(r):
            if not math.isnan(o):
                count("nan_mismatch", i)
            continue
        if abs(r) > t.max:
            if math.isfinite(r):
                count("overflow", i)
            if t.has_inf:
                ok = same_sign(o, r) and (math.isinf(o) or (abs(o) == t.max and abs(r) < t.overflow_limit))
            else:
                ok = math.isnan(o) or (same_sign(o, r) and abs(o) == t.max)
            if not ok:
                count("nan_mismatch" if math.isnan(o) else "inf_mismatch", i)
            continue
        if math.isnan(o):
            count("nan_mismatch", i)
            continue
        if math.isinf(o):
            count("inf_mismatch", i)
            continue
        compared += 1
        top_ref, top_out = max(top_ref, abs(r)), max(top_out, abs(o))
        ref_squares.append(r * r)
        if ftz and o == 0 and r != 0 and abs(r) < t.min_normal:
            ftz_allowed += 1
            d, ulp_distance = 0.0, 0
        else:
            d = abs(r - o)
            ulp_distance = abs(t.position(t.round(r)) - t.position(o))
        squares.append(d * d)
        offer("max_abs_diff", d, i)
        offer("max_eps_diff", d / t.ulp(r), i)
        offer("max_ulp_diff", ulp_distance, i)
        if bound is not None:
            offer("bound_ratio", 0.0 if d == 0 else (d / bound[i] if bound[i] != 0 else math.inf), i)
        if r == 0:
            hist[9] += 1
        else:
            rel = d / abs(r)
            offer("max_rel_diff", rel, i)
            if abs(r) > rel_floor:
                offer("max_rel_diff_old", rel, i)
            hist[0 if rel == 0 else 1 + sum(rel >= e for e in BUCKET_EDGES)] += 1
    root = math.sqrt(math.fsum(squares))
    scale = math.sqrt(max(compared, 1)) * max(top_ref, top_out)
    ref_norm = math.sqrt(math.fsum(ref_squares))
    ratio = lambda a, b: 0.0 if a == 0 else (a / b if b else math.inf)  # noqa: E731
    result = {name_: max(v, 0.0) for name_, (v, _) in maxima.items()}
    result.update({name_: c for name_, (c, _) in counts.items()})
    result.update(rms=ratio(root, scale), rel_l2=ratio(root, ref_norm), compared=compared,
                  ftz_allowed=ftz_allowed, histogram=hist)
    result["worst"] = {name_: i for name_, (v, i) in maxima.items() if i >= 0}
    result["worst"].update({name_: i for name_, (c, i) in counts.items() if i >= 0})
    if bound is None:
        del result["bound_ratio"]
    return result


# ---- checks of the oracle itself ---------------------------------------------------------


def test_oracle_formats_match_torch_finfo():
    for name, dtype in STORAGE.items():
        fmt, info = oracle_format(name), torch.finfo(dtype)
        assert fmt.max == info.max
        assert fmt.min_normal == info.smallest_normal
        assert oracle_ulp(fmt, np.array([1.5]))[0] == info.eps


def test_oracle_knows_the_primer_f16_values():
    fmt = oracle_format("f16")
    assert fmt.max == 65504 and fmt.min_normal == 2.0 ** -14 and fmt.values[fmt.values > 0][0] == 2.0 ** -24
    assert oracle_ulp(fmt, np.array([1.0]))[0] == 2.0 ** -11  # the gap below a power of two
    assert oracle_round(fmt, np.array([65519.0, 65520.0]))[0] == 65504
    assert np.isinf(oracle_round(fmt, np.array([65520.0]))[0])
