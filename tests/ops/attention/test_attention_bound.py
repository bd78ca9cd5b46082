"""The pieces attention's bound is composed of, each against a brute-force computation, and the
composition's own properties (runner/ops/attention/bound.py, docs/concepts/attention-bound.md)."""
from __future__ import annotations

import gc
import math

import numpy as np
import torch
from hypothesis import given, settings, strategies as st

from e2egen.runner import make_problem
from e2egen.runner.bound import (BoundModel, ComputeRoundings, FormatRounding, IndependentRoundings,
                                 PositiveSumCoefficient, ProductSumCoefficient, SubnormalRounding, unit_roundoff)
from e2egen.runner.exp_log_pieces import ARGUMENT_ROUNDINGS, EXP_ULPS
from e2egen.runner.inputs import generate_inputs, reference_inputs, round_to_storage
from e2egen.runner.ops import shared_values
from e2egen.runner.ops.attention import attention_math
from e2egen.runner.ops.attention.attention_math import attention_float64, expand_kv, matmul_kv
from e2egen.runner.ops.attention.bound import attention_bound

STRICT = BoundModel(strict=True, lam=1.0)
U32 = unit_roundoff("f32")
SETTINGS = settings(max_examples=40, deadline=None)


def f32(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


# -- reduction piece: a sum of non-negative terms ------------------------------------------
@SETTINGS
@given(st.integers(1, 4000), st.integers(0, 2 ** 32 - 1))
def test_positive_sum_in_f32_is_within_its_worst_case_coefficient(count, seed):
    terms = f32(np.random.default_rng(seed).random(count) * 10.0)
    running = np.float32(0.0)
    for term in terms:  # one rounding per addition, in order
        running = np.float32(running + term)
    exact = math.fsum(terms.astype(np.float64))
    assert abs(float(running) - exact) <= PositiveSumCoefficient(count, "f32")(STRICT) * exact


@SETTINGS
@given(st.integers(64, 20000), st.integers(0, 2 ** 32 - 1))
def test_positive_sum_within_the_default_probabilistic_coefficient(count, seed):
    terms = f32(np.random.default_rng(seed).random(count))
    computed = float(np.cumsum(terms, dtype=np.float32)[-1])
    exact = math.fsum(terms.astype(np.float64))
    assert abs(computed - exact) <= PositiveSumCoefficient(count, "f32")(BoundModel()) * exact


def test_positive_sum_coefficient_follows_the_accumulator_and_truncation():
    assert PositiveSumCoefficient(100, "f32")(BoundModel(acc="f16")) == PositiveSumCoefficient(100, "f32")(BoundModel()) * 2 ** 13
    assert PositiveSumCoefficient(100, "f32")(STRICT) == 100 * U32


# -- element-wise pieces: one operation, exp and its argument ------------------------------------
@SETTINGS
@given(st.integers(0, 2 ** 32 - 1))
def test_one_f32_operation_is_within_one_compute_rounding(seed):
    rng = np.random.default_rng(seed)
    x, y = f32(rng.standard_normal(1000) * 100), f32(rng.standard_normal(1000))
    exact = x.astype(np.float64) * y.astype(np.float64)
    assert (np.abs((x * y).astype(np.float64) - exact) <= ComputeRoundings(1, "f32")(BoundModel()) * np.abs(exact)).all()


@SETTINGS
@given(st.integers(0, 2 ** 32 - 1), st.floats(0.0, 2000.0))
def test_exp_of_a_shifted_score_is_within_the_argument_and_exp_pieces(seed, offset):
    """p = exp(s - m) in f32 both ways kernels compute it (exp of the difference, and exp2 of an fma with
    log2 e): within u·(2·(|s| + 2|m|) + EXP_ULPS) of the exact exp(s - m), relative."""
    rng = np.random.default_rng(seed)
    scores = torch.tensor(f32(offset + rng.standard_normal(512) * 8))
    m = scores.max()
    exact = torch.exp(scores.double() - m.double())
    log2e = torch.tensor(math.log2(math.e), dtype=torch.float32)
    allowance = U32 * (ARGUMENT_ROUNDINGS * (scores.double().abs() + 2 * m.double().abs()) + EXP_ULPS)
    for computed in (torch.exp(scores - m), torch.exp2(torch.addcmul(-(m * log2e), scores, log2e))):
        assert ((computed.double() - exact).abs() <= allowance * exact).all()


# -- rounding P to the input format ----------------------------------------------------------
@SETTINGS
@given(st.integers(0, 2 ** 32 - 1), st.sampled_from(["f16", "bf16"]), st.floats(0.0, 30.0))
def test_p_rounded_before_pv_is_within_the_rounding_piece(seed, fmt, spread):
    """o' = Σ fl(p̃_j) v_j / l with l from the unrounded p̃ (or from the rounded one): within
    u_F (Σ p_j |v_j| + |o|) + tiny_F Σ |v_j| / l of the exact o."""
    rng = np.random.default_rng(seed)
    scores = torch.tensor(rng.standard_normal(300) * spread, dtype=torch.float64)
    v = torch.tensor(rng.uniform(-1, 1, (300, 8)), dtype=torch.float64)
    weights = torch.exp(scores - scores.max())
    l = weights.sum()
    p = weights / l
    o = p @ v
    rounded = round_to_storage(weights, torch.float16 if fmt == "f16" else torch.bfloat16).double()
    allowance = (FormatRounding(fmt)(BoundModel()) * (p @ v.abs() + o.abs())
                 + SubnormalRounding(fmt)(BoundModel()) * v.abs().sum(0) / l)
    for total in (l, rounded.sum()):
        assert ((rounded @ v / total - o).abs() <= allowance * (1 + 1e-9)).all()


# -- propagation through the softmax ----------------------------------------------------------
@SETTINGS
@given(st.integers(0, 2 ** 32 - 1), st.floats(0.0, 20.0), st.floats(1e-7, 1e-3))
def test_score_errors_move_the_output_by_at_most_the_propagated_bound(seed, spread, size):
    """|o(s + δ) - o(s)| <= Σ_j p_j |δ_j| (|v_j| + |o|) to first order; the second order is below size·bound."""
    rng = np.random.default_rng(seed)
    scores = torch.tensor(rng.standard_normal(200) * spread, dtype=torch.float64)
    v = torch.tensor(rng.uniform(-1, 1, (200, 5)), dtype=torch.float64)
    errors = torch.tensor(rng.random(200) * size, dtype=torch.float64)
    delta = errors * torch.tensor(rng.choice([-1.0, 1.0], 200))

    def output(s):
        return torch.softmax(s, 0) @ v

    o, p = output(scores), torch.softmax(scores, 0)
    bound = (p * errors) @ v.abs() + o.abs() * (p * errors).sum()
    assert ((output(scores + delta) - o).abs() <= bound * (1 + 4 * size) + 1e-15).all()


# -- the composition ----------------------------------------------------------------------------
def _bound(params, dtype="f16", model=BoundModel(), seed=3):
    problem = make_problem("attention", "fwd", dtype, "bhsd", params, (-1.0, 1.0), seed)
    inputs64 = {name: t.double() for name, t in generate_inputs(problem).items()}
    rows = attention_float64(problem.params, inputs64)
    bounds = attention_bound(problem, inputs64)
    return rows, {name: b.evaluate(model, rows.o if name == "o" else rows.lse) for name, b in bounds.items()}, bounds


def test_a_fully_masked_row_has_a_zero_bound_for_both_outputs():
    rows, evaluated, _ = _bound({"batch": 2, "seq_q": 4, "seq_k": 8, "head_dim_qk": 8, "kv_lengths": [0, 8],
                                 "return_lse": True})
    assert torch.isneginf(rows.lse[0]).all() and (evaluated["o"][0] == 0).all() and (evaluated["lse"][0] == 0).all()
    assert (evaluated["o"][1] > 0).all() and torch.isfinite(evaluated["lse"]).all()


def test_the_bound_names_its_parts_and_follows_the_model():
    rows, evaluated, bounds = _bound({"seq_q": 16, "seq_k": 64, "head_dim_qk": 32, "return_lse": True})
    sources = [getattr(part, "source", type(part).__name__) for part in bounds["o"].parts]
    assert sources[:2] == ["Q·Kᵀ product sum", "scores, exp"] and "P rounded before P·V" in sources
    assert sources[-1] == "output rounding"
    wider = bounds["o"].evaluate(BoundModel(acc="f16"), rows.o)
    assert (wider >= evaluated["o"]).all() and (wider > 2 * evaluated["o"]).any()
    no_rounding = bounds["o"].evaluate(BoundModel(c_out=0.0), rows.o)
    assert (no_rounding < evaluated["o"]).all()


def test_the_qk_term_is_the_gemm_piece_over_head_dim():
    _, _, bounds = _bound({"seq_q": 8, "seq_k": 8, "head_dim_qk": 48})
    qk = bounds["o"].parts[0]
    assert isinstance(qk.coefficient, ProductSumCoefficient) and qk.coefficient.count == 48


def test_bf16_bound_is_wider_than_f16_by_the_p_rounding():
    params = {"seq_q": 16, "seq_k": 128, "head_dim_qk": 32}
    rows16, b16, _ = _bound(params, "f16")
    rows_bf, bbf, _ = _bound(params, "bf16")
    assert (bbf["o"] > 4 * b16["o"]).all()


@SETTINGS
@given(st.integers(0, 2 ** 32 - 1), st.sampled_from(["f16", "bf16"]), st.floats(0.0, 30.0), st.integers(16, 4096))
def test_p_rounding_within_the_probabilistic_form(seed, fmt, spread, keys):
    """The roundings of different weights are independent: the error also stays within
    lam·u_F·(sqrt(Σ (p_j v_j)²) + |o|·sqrt(Σ p_j²)) (the IndependentRoundings piece, default model)."""
    rng = np.random.default_rng(seed)
    scores = torch.tensor(rng.standard_normal(keys) * spread, dtype=torch.float64)
    v = torch.tensor(rng.uniform(-1, 1, (keys, 4)), dtype=torch.float64)
    weights = torch.exp(scores - scores.max())
    p = weights / weights.sum()
    o = p @ v
    rounded = round_to_storage(weights, torch.float16 if fmt == "f16" else torch.bfloat16).double()
    rms = (p.square() @ v.square()).sqrt() + o.abs() * p.square().sum().sqrt()
    piece = IndependentRoundings(FormatRounding(fmt), p @ v.abs() + o.abs(), rms, "P")
    allowance = piece.evaluate(BoundModel()) + SubnormalRounding(fmt)(BoundModel()) * v.abs().sum(0) / weights.sum()
    assert (piece.evaluate(BoundModel()) <= piece.evaluate(STRICT) * (1 + 1e-12)).all()
    for total in (weights.sum(), rounded.sum()):
        assert ((rounded @ v / total - o).abs() <= allowance * (1 + 1e-9)).all()


# -- grouped-query products without repeating K and V ----------------------------------------
@SETTINGS
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 4), st.integers(1, 5), st.integers(1, 6),
       st.integers(1, 4), st.booleans(), st.integers(0, 2 ** 32 - 1))
def test_matmul_kv_equals_the_product_with_repeated_kv_heads(batch, kv_heads, group, rows, inner, cols, strided, seed):
    generator = torch.Generator().manual_seed(seed)
    per_q = torch.randn(batch, kv_heads * group, rows, inner, dtype=torch.float64, generator=generator)
    per_kv = torch.randn(batch, kv_heads, cols, inner, dtype=torch.float64, generator=generator)
    if strided:  # a transposed view, as Kᵀ is passed, and an expanded mask as the left operand
        per_q = per_q.mT.contiguous().mT
    expected = torch.matmul(per_q, expand_kv(per_kv, group).mT)
    torch.testing.assert_close(matmul_kv(per_q, per_kv.mT, group), expected, rtol=1e-13, atol=1e-13)
    mask = (per_q[:, :1] > 0).expand_as(per_q).to(torch.float64)
    torch.testing.assert_close(matmul_kv(mask, per_kv.mT, group), torch.matmul(mask, expand_kv(per_kv, group).mT),
                               rtol=1e-13, atol=1e-13)


def test_reference_and_bound_share_one_computation_of_the_rows_while_the_inputs_live():
    problem = make_problem("attention", "fwd", "f16", "bhsd", {"seq_q": 8, "seq_k": 16, "head_dim_qk": 8},
                           (-1.0, 1.0), 3)
    inputs64 = reference_inputs(generate_inputs(problem), torch.device("cpu"))
    rows = attention_math.attention_float64(problem.params, inputs64)
    assert attention_math.attention_float64(problem.params, inputs64) is rows
    inputs64["q"].mul_(2.0)  # changed in place: computed again, from the new values
    changed = attention_math.attention_float64(problem.params, inputs64)
    assert changed is not rows and not torch.equal(changed.scores, rows.scores)
    del inputs64, rows, changed
    gc.collect()
    assert "attention rows" not in shared_values._last  # the inputs are gone: so are their rows
