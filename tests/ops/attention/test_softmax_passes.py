"""Attention's one pass over its scores (runner/softmax_passes.py) against the torch definition it replaces,
and the bound built on it (runner/ops/attention/bound.py) against the torch path and against exact sums."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from e2egen.metrics import fused_numba
from e2egen.runner import make_problem
from e2egen.runner.bound import BoundModel
from e2egen.runner.inputs import generate_inputs
from e2egen.metrics import threads
from e2egen.runner.exp_log_pieces import ARGUMENT_ROUNDINGS, EXP_ULPS
from e2egen.runner.ops.attention.attention_math import attention_float64, matmul_kv
from e2egen.runner.ops.attention.bound import ScoreErrors, SoftmaxTimesV, attention_bound, score_roundings
from e2egen.runner.softmax_passes import weight_terms
from e2egen.runner.upper_matmul import UnwidenedProduct, magnitudes, rounded_up, unwidened_matmul

pytestmark = pytest.mark.skipif(not fused_numba.AVAILABLE, reason="numba is not installed")

U32 = 2.0 ** -24


def _softmax_rows(rng, b, hq, sq, sk, spread, masked):
    """(scores with -inf where masked, row_max as attention_math sets it, p) of random rows."""
    scores = torch.tensor(rng.standard_normal((b, hq, sq, sk)) * spread, dtype=torch.float64)
    scores.masked_fill_(torch.tensor(rng.random((b, hq, sq, sk)) < masked), float("-inf"))
    row_max = scores.amax(-1, keepdim=True)
    empty = torch.isneginf(row_max)
    row_max.masked_fill_(empty, 0.0)
    weights = torch.exp(scores - row_max)
    p = weights / torch.where(empty, 1.0, weights.sum(-1, keepdim=True))
    return scores, row_max, p


def _stacked_by_kv_head(tensors, group):
    """The kernel's stacking, written with matmul_kv's reshape: per kv head, each tensor's group·sq rows."""
    b, hq, sq, sk = tensors[0].shape
    return torch.cat([t.reshape(b, hq // group, group * sq, sk) for t in tensors], dim=2)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 2), st.integers(1, 2), st.integers(1, 3), st.integers(1, 5), st.integers(1, 40),
       st.sampled_from([torch.float32, torch.float64]), st.integers(0, 3), st.booleans(), st.booleans(),
       st.floats(0.0, 1.0), st.floats(0.0, 40.0), st.integers(0, 2 ** 32 - 1))
def test_the_pass_gives_the_torch_definitions_f32_operands_bit_for_bit(b, hkv, group, sq, sk, raw_dtype, score_ops,
                                                                      with_scale, with_bias, masked, spread, seed):
    rng = np.random.default_rng(seed)
    hq = hkv * group
    scores, row_max, p = _softmax_rows(rng, b, hq, sq, sk, spread, masked)
    raw = torch.tensor(rng.random((b, hq, sq, sk)) * 50, dtype=raw_dtype)
    score_scale, bias = (torch.tensor(rng.standard_normal((b, hq, sq, sk)), dtype=torch.float64) if given else None
                         for given in (with_scale, with_bias))
    allowance, widening, scale = float(rng.random() * 1e-30), 1 + float(rng.random()) * 1e-3, float(rng.random())
    terms = weight_terms(p, scores, row_max, raw, group, allowance=allowance, widening=widening, scale=scale,
                         score_ops=score_ops, log_keys=math.log(sk), argument_roundings=ARGUMENT_ROUNDINGS,
                         exp_term=2 * EXP_ULPS, score_scale=score_scale, bias=bias)
    errors = ScoreErrors(raw.clone(), allowance, widening, scale).tensor()
    first = p * (errors.mul_(score_scale.abs()) if with_scale else errors)
    second = p * score_roundings(SimpleNamespace(scores=scores, row_max=row_max), sk, score_ops, bias)
    expected = [rounded_up(t)[0] for t in (first, second, p)]
    assert torch.equal(terms.stacked.view(torch.int32), _stacked_by_kv_head(expected, group).view(torch.int32))
    squared = rounded_up(p.square())[0]
    assert torch.equal(terms.squared.view(torch.int32), squared.view(torch.int32))
    assert terms.largest == max(float(t.max()) for t in (*expected, squared))
    for got, summed in ((terms.sum_first, first), (terms.sum_second, second), (terms.sum_squared, p.square())):
        torch.testing.assert_close(got, summed.sum(-1, keepdim=True), rtol=sk * 2.0 ** -52, atol=0.0)
    assert torch.equal(terms.least_score, scores.nan_to_num(neginf=math.inf).amin(-1, keepdim=True))


def test_special_scores_are_read_as_torch_nan_to_num_reads_them():
    """NaN as 0 and +inf as float64's largest, for the roundings' |s| and for the least score."""
    scores = torch.tensor([[[[float("nan"), float("inf"), -3.0, float("-inf")]]]], dtype=torch.float64)
    row_max = torch.zeros((1, 1, 1, 1), dtype=torch.float64)
    p = torch.full_like(scores, 0.25)
    terms = weight_terms(p, scores, row_max, p.float(), 1, allowance=0.0, widening=1.0, scale=1.0, score_ops=1,
                         log_keys=math.log(4), argument_roundings=ARGUMENT_ROUNDINGS, exp_term=2 * EXP_ULPS)
    second = p * score_roundings(SimpleNamespace(scores=scores, row_max=row_max), 4, 1)
    assert torch.equal(terms.stacked[0, 0, 1], rounded_up(second)[0][0, 0, 0])
    assert float(terms.least_score) == -3.0


def test_off_the_numba_path_the_pass_steps_aside(monkeypatch):
    scores = torch.zeros((1, 1, 2, 3), dtype=torch.float64)
    arguments = dict(allowance=0.0, widening=1.0, scale=1.0, score_ops=1, log_keys=0.0, argument_roundings=2,
                     exp_term=32)
    monkeypatch.setenv("E2E_METRICS_BACKEND", "torch")
    assert weight_terms(scores, scores, scores[..., :1], scores, 1, **arguments) is None
    monkeypatch.delenv("E2E_METRICS_BACKEND")
    assert weight_terms(scores, scores, scores[..., :1], scores.half(), 1, **arguments) is None  # not f32/float64
    assert weight_terms(scores, scores, scores[..., :1], scores, 1, **arguments) is not None


# -- the bound on the pass ------------------------------------------------------------------------------
ATTENTION = [
    {"heads_q": 4, "heads_kv": 2, "seq_q": 16, "seq_k": 40, "head_dim_qk": 16, "causal": True},
    {"batch": 2, "heads_q": 6, "heads_kv": 2, "seq_q": 10, "seq_k": 24, "head_dim_qk": 8, "causal": True},
    {"batch": 2, "seq_q": 12, "seq_k": 20, "head_dim_qk": 8, "score_scale": True, "score_bias": True},
    {"batch": 2, "seq_q": 9, "seq_k": 33, "head_dim_qk": 8, "kv_lengths": [0, 20], "return_lse": True},
    {"heads_q": 8, "heads_kv": 2, "seq_q": 1, "seq_k": 300, "head_dim_qk": 32},  # decode: 12 stacked rows
    {"seq_q": 8, "seq_k": 24, "head_dim_qk": 16, "quantized": True, "return_lse": True},
]


def _rows_and_bounds(params, dtype, fused: bool, monkeypatch):
    problem = make_problem("attention", "fwd", dtype, "bhsd", params, (-1.0, 1.0), 5)
    inputs64 = {name: t.double() for name, t in generate_inputs(problem).items()}
    taken = []
    original = SoftmaxTimesV._fused.__func__

    def watched(cls, *args):
        result = original(cls, *args) if fused else None
        taken.append(result is not None)
        return result

    with monkeypatch.context() as patch:
        patch.setattr(SoftmaxTimesV, "_fused", classmethod(watched))
        bounds = attention_bound(problem, inputs64)
    rows = attention_float64(problem.params, inputs64)
    evaluated = {name: b.evaluate(BoundModel(), rows.o if name == "o" else rows.lse) for name, b in bounds.items()}
    return problem, inputs64, rows, evaluated, taken


IDS = ["gqa-causal", "batched-gqa", "scale-bias", "kv-lengths-lse", "decode", "quantized"]


@pytest.mark.parametrize("params", ATTENTION, ids=IDS)
def test_the_fused_bound_is_the_torch_paths_to_the_f32_sums_rounding(params, monkeypatch):
    """Both are upper bounds on the same sums; the torch path's float64 or separately summed f32 products
    differ from the stacked f32 one by at most the f32 sums' own widening."""
    dtype = "i8" if params.get("quantized") else "f16"
    _, _, rows, fused, taken = _rows_and_bounds(params, dtype, True, monkeypatch)
    assert taken == [True]
    _, _, _, plain, taken = _rows_and_bounds(params, dtype, False, monkeypatch)
    assert taken == [False]
    keys = rows.p.shape[-1]
    for name in fused:
        assert torch.equal(fused[name] == 0, plain[name] == 0)
        assert ((fused[name] - plain[name]).abs() <= plain[name] * 4 * (keys + 8) * U32).all()


@pytest.mark.parametrize("params", ATTENTION[:-1], ids=IDS[:-1])
def test_the_fused_products_bound_their_exact_sums(params, monkeypatch):
    """Σ_j p_j E_j |v_j| + |o| Σ_j p_j E_j for both score errors, and Σ_j p_j |v_j|, from the pass: never below
    the float64 sums of the exact terms, and within the f32 sums' widening of them."""
    problem, inputs64, rows, _, _ = _rows_and_bounds(params, "f16", True, monkeypatch)
    o_abs = rows.o.abs()
    group, softmax_scale = problem.params.group, abs(problem.params.softmax_scale)
    score_scale = inputs64["score_scale"] if problem.params.score_scale else None
    bias = inputs64["score_bias"] if problem.params.score_bias else None
    score_ops = 1 + (score_scale is not None) + (bias is not None)
    exact_qk = matmul_kv(inputs64["q"].abs(), inputs64["k"].abs().mT, group) * softmax_scale
    if score_scale is not None:
        exact_qk *= score_scale.abs()
    product = unwidened_matmul(inputs64["q"], inputs64["k"].mT, lambda a, b: matmul_kv(a, b, group))
    errors = ScoreErrors(product.summed, product.allowance, product.factor, softmax_scale)
    assert SoftmaxTimesV._fused(rows, o_abs, magnitudes(rows.v), errors, score_ops, score_scale, bias) is not None
    pv, first, second = SoftmaxTimesV.with_score_errors(rows, o_abs, errors, score_ops, score_scale, bias)
    keys = rows.p.shape[-1]
    roundings = score_roundings(rows, keys, score_ops, bias)
    widest, underflow = 1 + 4 * (keys + 8) * U32, (keys + 8) * 2.0 ** -120  # upper_matmul's allowance
    for (to_output, to_lse), per_score in ((first, exact_qk), (second, roundings)):
        weighted = rows.p * per_score
        exact = matmul_kv(weighted, rows.v.abs(), group) + o_abs * weighted.sum(-1, keepdim=True)
        assert (to_output >= exact).all()
        assert (to_output <= exact * widest + underflow).all()
        torch.testing.assert_close(to_lse, weighted.sum(-1), rtol=1e-3, atol=0.0)
    exact_pv = matmul_kv(rows.p, rows.v.abs(), group)
    assert (pv.weighted_v >= exact_pv).all() and (pv.weighted_v <= exact_pv * widest + underflow).all()
    squared = rows.p.square()
    rms = matmul_kv(squared, rows.v.square(), group).sqrt() + o_abs * squared.sum(-1, keepdim=True).sqrt()
    assert (pv.p_rounding_rms >= rms * (1 - 1e-12)).all()


def test_passes_split_into_tasks_give_one_tasks_bits(monkeypatch):
    """The score pass and the widening passes over many small tasks (their offsets) as over one."""
    rng = np.random.default_rng(11)
    b, hkv, group, sq, sk = 2, 2, 3, 7, 9
    scores, row_max, p = _softmax_rows(rng, b, hkv * group, sq, sk, 3.0, 0.2)
    raw = torch.tensor(rng.random(p.shape), dtype=torch.float32)
    arguments = dict(allowance=1e-30, widening=1.001, scale=0.5, score_ops=2, log_keys=math.log(sk),
                     argument_roundings=ARGUMENT_ROUNDINGS, exp_term=2 * EXP_ULPS,
                     bias=torch.tensor(rng.standard_normal(p.shape)))

    right = torch.rand(b, hkv, sk, 5)

    def results():
        terms = weight_terms(p, scores, row_max, raw, group, **arguments)
        product = UnwidenedProduct(torch.matmul(terms.stacked, right), 1e-30, 1.25)
        return (terms.stacked, terms.squared, terms.sum_first, terms.sum_second, terms.sum_squared,
                terms.least_score, product.widened(), product.widened_by_term(3, group * sq))

    whole = results()
    monkeypatch.setattr(threads, "SMALLEST_TASK", 2 * sk)  # 2 rows a task at least
    monkeypatch.setattr(threads, "LIGHT_TASK", 16)
    split = results()
    for one, many in zip(whole, split):
        assert torch.equal(one, many)


def test_an_operand_beyond_the_f32_premises_takes_the_torch_path(monkeypatch):
    """Score errors so large that an f32 sum of p·E·|v| could overflow: the pass's products are not proven,
    and the bound is the torch path's, float64 products where needed."""
    params = ATTENTION[0]
    problem, inputs64, rows, _, _ = _rows_and_bounds(params, "f16", True, monkeypatch)
    huge = torch.full_like(rows.p, 1e37)
    fused = SoftmaxTimesV._fused(rows, rows.o.abs(), magnitudes(rows.v), ScoreErrors(huge.clone()), 1)
    assert fused is None
    pv, first, _ = SoftmaxTimesV.with_score_errors(rows, rows.o.abs(), ScoreErrors(huge.clone()), 1)
    plain = SoftmaxTimesV.of(rows, rows.o.abs()).through_softmax(huge)
    assert torch.equal(first[0], plain[0]) and torch.isfinite(first[0]).all()
