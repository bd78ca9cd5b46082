"""The plain-torch path's fast kernel (metrics/fused_torch.py) against numba, on inputs built to hit it.

The fast kernel runs on chunks whose every element is compared; the general
kernel takes chunks with NaN, inf or overflow. These inputs are mostly
compared elements at the awkward spots (zeros, subnormals of T and of
float64, powers of two, ±max, flushes, ties across chunk boundaries), with
special elements in a few chunks only, so that both kernels and the merge of
their rows are exercised. Everything but the sums must match numba exactly.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from e2egen.metrics import compare, fused_numba, fused_torch, get_format

pytestmark = pytest.mark.skipif(not fused_numba.AVAILABLE, reason="no numba to compare with")

FLOAT_NAMES = ["f32", "f16", "bf16", "f8e4m3fn", "f8e5m2"]
SUMS = ("rms", "rel_l2", "bound_rms", "bias_z", "rounding_rms", "backend")  # summation order differs


def assert_same(a, b) -> None:
    da, db = a.as_dict(), b.as_dict()
    for key in SUMS:
        da.pop(key), db.pop(key)
    assert json.dumps(da, sort_keys=True) == json.dumps(db, sort_keys=True)  # NaN-aware equality
    assert a.rms == pytest.approx(b.rms, rel=1e-12) and a.rel_l2 == pytest.approx(b.rel_l2, rel=1e-12)
    assert (a.bound_rms is None) == (b.bound_rms is None)
    if a.bound_rms is not None:
        assert a.bound_rms == pytest.approx(b.bound_rms, rel=1e-12)
    assert a.bias_z == pytest.approx(b.bias_z, rel=1e-9, abs=1e-9)
    assert a.rounding_rms == pytest.approx(b.rounding_rms, rel=1e-12)


def both(ref, out, name, **kwargs):
    return (compare(ref, out, name, backend="torch", **kwargs), compare(ref, out, name, backend="numba", **kwargs))


def awkward_pair(name: str, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Compared-only data: ordinary values with a sprinkle of zeros, subnormals and extremes of T and
    float64, and outputs off by a few ulps (some flushed to zero, some of the other sign)."""
    fmt = get_format(name)
    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(n, generator=g, dtype=torch.float64) * 4
    picks = torch.tensor([0.0, -0.0, fmt.min_subnormal, -fmt.min_subnormal * 3, fmt.min_subnormal / 3,
                          fmt.min_normal, -fmt.min_normal, fmt.min_normal * 0.75, 1.0, -2.0, 0.5, fmt.max, -fmt.max,
                          fmt.max * 0.999, 5e-324, -1e-310, 1e-300, 2.0 ** -30, 1e-3, -1e-3],
                         dtype=torch.float64)
    where = torch.randint(0, n, (n // 8,), generator=g)
    ref[where] = picks[torch.randint(0, len(picks), (len(where),), generator=g)]
    ref.clamp_(-fmt.max, fmt.max)
    out = ref.to(torch.float32).to(fmt.torch_dtype) if fmt.bits < 32 else ref.to(torch.float32)
    raw = out.view({8: torch.int8, 16: torch.int16, 32: torch.int32}[fmt.bits])
    nudged = torch.randint(0, n, (n // 4,), generator=g)
    step = torch.randint(-3, 4, (len(nudged),), generator=g).to(raw.dtype)
    magnitude = raw[nudged] & ((1 << (fmt.bits - 1)) - 1)
    keeps_finite = (magnitude + step >= 0) & (magnitude + step <= fmt.max_pattern)  # sign-magnitude: step the magnitude
    raw[nudged] = torch.where(keeps_finite, raw[nudged] + step, raw[nudged])
    flushed = torch.randint(0, n, (n // 50,), generator=g)
    out[flushed] = 0
    flipped = torch.randint(0, n, (n // 100,), generator=g)
    raw[flipped] = raw[flipped] ^ -(1 << (fmt.bits - 1))  # the sign bit
    assert torch.isfinite(out.to(torch.float64)).all()
    return ref, out


@pytest.mark.parametrize("name", FLOAT_NAMES)
@pytest.mark.parametrize("ftz", [False, True])
def test_fast_kernel_matches_numba_on_compared_data(name, ftz):
    ref, out = awkward_pair(name, 50_000, seed=3)
    bound = (ref.abs() * 2.0 ** -8).to(torch.float64)
    bound[::97] = 0  # 0/0 = 0 and d/0 = inf
    for kwargs in ({}, {"bound": bound}, {"chunk": 1000}, {"chunk": 777, "bound": bound}):
        assert_same(*both(ref, out, name, ftz=ftz, **kwargs))


@pytest.mark.parametrize("name", FLOAT_NAMES)
@pytest.mark.parametrize("rounding", ["toward-zero", "up", "down"])
def test_fast_kernel_matches_numba_for_every_rounding(name, rounding):
    ref, out = awkward_pair(name, 20_000, seed=5)
    for ftz in (False, True):
        assert_same(*both(ref, out, name, rounding=rounding, ftz=ftz, chunk=3000))


@pytest.mark.parametrize("name", FLOAT_NAMES)
def test_special_elements_in_some_chunks_only(name, monkeypatch):
    general = []
    original = fused_torch._chunk_general
    monkeypatch.setattr(fused_torch, "_chunk_general", lambda *args: general.append(args[5]) or original(*args))
    fmt = get_format(name)
    ref, out = awkward_pair(name, 40_000, seed=11)
    # chunk 2 gets a NaN output, chunk 5 an overflowing reference, chunk 7 a NaN reference
    out[2 * 4096 + 17] = float("nan")
    ref[5 * 4096 + 3] = fmt.max * 4
    ref[7 * 4096 + 4000] = float("nan")
    bound = torch.full_like(ref, 1e-2)
    for kwargs in ({"chunk": 4096}, {"chunk": 4096, "bound": bound, "ftz": True}):
        torch_result, numba_result = both(ref, out, name, **kwargs)
        assert_same(torch_result, numba_result)
        assert torch_result.nan_mismatch == 2 and torch_result.overflow == 1
        assert sorted(general) == [2 * 4096, 5 * 4096, 7 * 4096]  # the other chunks took the fast kernel
        general.clear()


def test_the_global_maximum_in_a_special_chunk_and_ties_across_chunks():
    ref = torch.linspace(1, 2, 10_000, dtype=torch.float64)
    out = ref.to(torch.float16)
    out[1234] = out[1234] * 2  # the largest error, in a chunk that also holds a NaN output
    out[1300] = float("nan")
    out[5000] = out[5000] * 1.5  # an equal relative error later on
    out[9000] = out[9000] * 1.5
    torch_result, numba_result = both(ref, out, "f16", chunk=1000)
    assert_same(torch_result, numba_result)
    assert torch_result.worst["max_abs_diff"].index == 1234
    # ties between fast chunks: the first element wins
    out[1234], out[1300] = ref[1234].to(torch.float16), ref[1300].to(torch.float16)
    torch_result, numba_result = both(ref, out, "f16", chunk=1000)
    assert_same(torch_result, numba_result)
    assert torch_result.worst["max_ulp_diff"].index == 5000


@pytest.mark.parametrize("chunk", [1, 2, 3, 64, 4095, 4096, 4097])
def test_chunk_boundaries(chunk):
    ref, out = awkward_pair("bf16", 4096 + 5, seed=chunk)
    assert_same(*both(ref, out, "bf16", ftz=True, chunk=chunk))


def test_zero_references():
    ref = torch.zeros(300, dtype=torch.float64)
    ref[150:] = 1.0
    out = ref.to(torch.float16)
    out[10] = 1e-3  # ref == 0, out != 0: infinite rel_l2, no rel
    for chunk in (100, 300):
        torch_result, numba_result = both(ref, out, "f16", chunk=chunk)
        assert_same(torch_result, numba_result)
        assert torch_result.histogram["ref == 0"] == 150
    only_zeros = both(torch.zeros(50, dtype=torch.float64), torch.zeros(50, dtype=torch.float16), "f16")
    assert_same(*only_zeros)
    assert only_zeros[0].max_rel_diff == 0 and only_zeros[0].worst.get("max_rel_diff") is None


def test_float64_subnormal_references_give_an_infinite_rel():
    ref = torch.tensor([5e-324, -1e-310, 1.0, 0.0], dtype=torch.float64)
    out = torch.tensor([1.0, 1e-3, 1.0, 0.0], dtype=torch.float16)
    torch_result, numba_result = both(ref, out, "f16")
    assert_same(torch_result, numba_result)
    assert torch_result.max_rel_diff == math.inf and torch_result.histogram[">=1"] == 2


def test_general_kernel_alone_agrees_with_the_fast_one(monkeypatch):
    ref, out = awkward_pair("f16", 30_000, seed=2)
    bound = ref.abs() * 2.0 ** -10
    fast = compare(ref, out, "f16", bound=bound, ftz=True, backend="torch", chunk=5000)
    monkeypatch.setattr(fused_torch, "FAST_PATH", False)
    general = compare(ref, out, "f16", bound=bound, ftz=True, backend="torch", chunk=5000)
    assert_same(fast, general)


def test_histogram_table_matches_bucketize():
    edges = torch.tensor(fused_torch._HIST_EDGES, dtype=torch.float64)
    values = [0.0, 5e-324, 1e-320, 2.2e-308, 1e-300, 1e-7, 0.75, 1.0, 1.5, 2.0, 1e300, math.inf]
    for e in fused_torch._HIST_EDGES:
        values += [e, float(np.nextafter(e, -1.0)), float(np.nextafter(e, math.inf))]
    values += [float(x) for x in np.logspace(-320, 300, 2000)]
    rel = torch.tensor([v for v in values if v >= 0], dtype=torch.float64)
    table = torch.tensor(fused_torch._bucket_table(), dtype=torch.int64)
    bits = rel.view(torch.int64)
    buckets = (bits - table[(bits >> 52) & 0xFFF]) >> 53
    assert torch.equal(buckets, torch.bucketize(rel, edges, right=True))
    marker = torch.tensor([-1.0, -0.0, -5e-324, -math.inf, -1e300], dtype=torch.float64).view(torch.int64)
    assert ((marker - table[(marker >> 52) & 0xFFF]) >> 53).eq(0).all()
