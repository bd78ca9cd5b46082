"""Attention's per-element bound, composed from runner.bound's pieces by first-order propagation.

The derivation is docs/attention-bound.md; in short, for one row (query i of one head), with
exact scores s_j, p_j = softmax(s)_j, o = Σ_j p_j v_j, u the compute format's unit roundoff:

1. score errors |ŝ_j - s_j| <= E_j:
       E_j = F_qk · |σ τ_j| · Σ_l |q_l k_jl|          the Q·Kᵀ product sum (gemm piece, over head_dim_qk)
           + u · (c_s · (|s_j| + |β_j|)               scale, score-scale and bias roundings
                  + 2 · (|s_j| + 2|m| + log seq_k)    the exponent's argument (s - m, ·log2 e, one LSE merge)
                  + 2 · EXP_ULPS)                     exp itself (P and one merge)
   A relative perturbation η_j of any unnormalised weight (exp's error, an online rescale) acts like
   a score error: softmax is invariant to a common shift, so
       o' - o = Σ_j p_j δ_j (v_j - o)   =>   |δo| <= Σ_j p_j E_j (|v_j| + |o|)
2. online softmax: up to seq_k rescales by α = exp(m_old - m_new), each with error
   u·(EXP_ULPS + 1 + 2·spread) (spread = max - min of the row's scores) on every weight before it:
       G(seq_k) · u · (EXP_ULPS + 1 + 2·spread) · (Σ_j p_j|v_j| + |o|)
3. P rounded to a format F before P·V (the format the probes found, runner/arithmetic/attention_probes.py;
   the input format where not measured; nothing when P stays in f32): relative u_F, absolute half F's
   subnormal spacing where P is that small, with the row sum l from the rounded or the unrounded P.
   Each weight is rounded on its own, so the errors are independent: under the probabilistic model the
   first part is min(it, λ·u_F·(sqrt(Σ_j (p_j v_j)²) + |o|·sqrt(Σ_j p_j²))):
       u_F · (Σ_j p_j|v_j| + |o|) + tiny_F · Σ_allowed |v_j| / l
4. the P·V product sum over seq_k (gemm piece): F_pv · Σ_j p_j |v_j|
5. the row sum l (positive terms): G(seq_k)·u·|o|; the division o/l: u·|o|
6. the output rounding: c_out · ulp_T(o).

The log-sum-exp lse = m + log l gets Σ_j p_j E_j + step 2 without the |v| factor + G(seq_k)·u +
u·(LOG_ULPS·|log l| + |lse|) + c_out·ulp_f32(lse). A fully masked row is exact (o = 0, lse = -inf).
"""
from __future__ import annotations

import math
from typing import Mapping

import torch

from .bound import (ComputeRoundings, ExactWhere, IndependentRoundings, IntermediateRounding, OutputRounding,
                    PositiveSumCoefficient, ProductSumCoefficient, ScaledMagnitude, SumOfBounds)
from .problem import Problem

EXP_ULPS = 16  # exp in the compute format, in u: libm's expf is within 1 ulp, CUDA's ex2.approx 2, torch CPU's vectorised exp_u20 (flash attention) about 2^-20 relative
ARGUMENT_ROUNDINGS = 2  # the exponent's argument: s - m, then a multiply by log2 e (or one fma)
LOG_ULPS = 4  # log (or log2 then · ln 2) in the compute format


def rescale_roundings(spread: torch.Tensor) -> torch.Tensor:
    """Per online rescale by exp(m_old - m_new), in u: its argument's roundings (|m_old - m_new| <= spread),
    exp's own error and the multiply; shared by attention's and the stand-alone softmax's bounds."""
    return spread.mul(ARGUMENT_ROUNDINGS).add_(EXP_ULPS + 1)


def attention_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, SumOfBounds]:
    from .ops.attention_math import attention_float64, expand_kv

    params, dtype = problem.params, problem.dtype
    rows = attention_float64(params, inputs64)
    allowed = torch.ones_like(rows.p, dtype=torch.bool) if rows.allowed is None else rows.allowed.expand_as(rows.p)
    finite_scores = torch.where(allowed, rows.scores, 0.0)

    # 1. per-score magnitudes: Σ_l|q_l k_jl|·|στ_j| (times F_qk) and the rounding count Z_j (times u)
    k_abs = expand_kv(inputs64["k"], params.group).abs()
    product_terms = torch.matmul(inputs64["q"].abs(), k_abs.mT).mul_(abs(params.softmax_scale))
    if params.score_scale:
        product_terms.mul_(inputs64["score_scale"].abs())
    bias = inputs64["score_bias"].abs() if params.score_bias else 0.0
    score_ops = 1 + params.score_scale + params.score_bias
    roundings = (finite_scores.abs() + bias).mul_(score_ops)
    roundings.add_(finite_scores.abs().add(rows.row_max.abs(), alpha=2).add_(math.log(params.seq_k)),
                   alpha=ARGUMENT_ROUNDINGS)
    roundings.add_(2 * EXP_ULPS)

    v_abs = rows.v.abs()
    o_abs = rows.o.abs()
    weighted_v = torch.matmul(rows.p, v_abs)  # Σ_j p_j |v_j|
    p_squared = rows.p.square()
    # the P roundings' rms form: sqrt(Σ_j (p_j v_j)²) + |o|·sqrt(Σ_j p_j²)
    p_rounding_rms = torch.matmul(p_squared, rows.v.square()).sqrt_().add_(o_abs * p_squared.sum(-1, keepdim=True).sqrt())

    def through_softmax(per_score: torch.Tensor) -> torch.Tensor:
        """Σ_j p_j E_j (|v_j| + |o|) for score errors E_j."""
        weighted = rows.p * per_score
        return torch.matmul(weighted, v_abs).add_(o_abs * weighted.sum(dim=-1, keepdim=True))

    spread = (torch.where(allowed, rows.scores, -torch.inf).amax(dim=-1, keepdim=True)
              - torch.where(allowed, rows.scores, torch.inf).amin(dim=-1, keepdim=True))
    spread = torch.where(allowed.any(dim=-1, keepdim=True), spread, 0.0)
    rescale_per_weight = rescale_roundings(spread)
    tiny_terms = torch.matmul(allowed.to(v_abs.dtype), v_abs).div_(torch.where(rows.row_sum > 0, rows.row_sum, 1.0))

    qk, seq_k = params.head_dim_qk, params.seq_k
    out_parts = (
        ScaledMagnitude(ProductSumCoefficient(qk, dtype), through_softmax(product_terms), "Q·Kᵀ product sum"),
        ScaledMagnitude(ComputeRoundings(1, dtype), through_softmax(roundings), "scores, exp"),
        ScaledMagnitude(PositiveSumCoefficient(seq_k, dtype), rescale_per_weight * (weighted_v + o_abs),
                        "online rescaling"),
        IndependentRoundings(IntermediateRounding(dtype), weighted_v + o_abs, p_rounding_rms, "P rounded before P·V"),
        ScaledMagnitude(IntermediateRounding(dtype, tiny=True), tiny_terms, "subnormal P"),
        ScaledMagnitude(ProductSumCoefficient(seq_k, dtype), weighted_v, "P·V product sum"),
        ScaledMagnitude(PositiveSumCoefficient(seq_k, dtype), o_abs, "row sum"),
        ScaledMagnitude(ComputeRoundings(1, dtype), o_abs, "division by the row sum"),
        OutputRounding(problem.outputs["o"].dtype),
    )
    empty = rows.row_sum == 0  # a fully masked row: o = 0 and lse = -inf exactly
    bounds = {"o": ExactWhere(empty.expand_as(rows.o), SumOfBounds(out_parts))}
    if params.return_lse:
        log_sum = torch.log(torch.where(rows.row_sum > 0, rows.row_sum, 1.0)).squeeze(-1)
        lse_abs = torch.where(torch.isfinite(rows.lse), rows.lse, 0.0).abs()
        empty = empty.squeeze(-1)
        bounds["lse"] = ExactWhere(empty, SumOfBounds((
            ScaledMagnitude(ProductSumCoefficient(qk, dtype), (rows.p * product_terms).sum(dim=-1), "Q·Kᵀ product sum"),
            ScaledMagnitude(ComputeRoundings(1, dtype), (rows.p * roundings).sum(dim=-1), "scores, exp"),
            ScaledMagnitude(PositiveSumCoefficient(seq_k, dtype), (rescale_per_weight + 1).squeeze(-1),
                            "online rescaling, row sum"),
            ScaledMagnitude(ComputeRoundings(1, dtype), log_sum.abs().mul_(LOG_ULPS).add_(lse_abs), "log, m + log l"),
            OutputRounding(problem.outputs["lse"].dtype),
        )))
    return bounds
