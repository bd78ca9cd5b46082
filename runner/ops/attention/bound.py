"""Attention's per-element bound, composed from runner.bound's pieces by first-order propagation.

The derivation is docs/concepts/attention-bound.md; in short, for one row (query i of one head), with
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
3. P rounded to a format F before P·V (the format the probes found, runner/ops/attention/probes.py;
   the input format where not measured; nothing when P stays in f32): relative u_F, absolute tiny_F where
   P is that small: half F's subnormal spacing, and at least f32's smallest normal, since exp may return 0
   for a subnormal weight (vectorised exps do below f32's normal range); with the row sum l from the
   rounded or the unrounded P.
   Each weight is rounded on its own, so the errors are independent: under the probabilistic model the
   first part is min(it, λ·u_F·(sqrt(Σ_j (p_j v_j)²) + |o|·sqrt(Σ_j p_j²))):
       u_F · (Σ_j p_j|v_j| + |o|) + tiny_F · Σ_allowed |v_j| / l
4. the P·V product sum over seq_k (gemm piece): F_pv · Σ_j p_j |v_j|
5. the row sum l (positive terms): G(seq_k)·u·|o|; the division o/l: u·|o|
6. the output rounding: c_out · ulp_T(o).

The log-sum-exp lse = m + log l gets Σ_j p_j E_j + step 2 without the |v| factor + G(seq_k)·u +
u·(LOG_ULPS·|log l| + |lse|) + c_out·ulp_f32(lse), and, since l may be summed from P as rounded for P·V
(step 3), u_F + tiny_F · (allowed keys) / l. A fully masked row is exact (o = 0, lse = -inf).

Quantized (i8) attention (docs/concepts/lowbit-attention.md): Q·Kᵀ is exact (i32), so step 1 has no product-sum
term and its score roundings are f16's, in a piece of their own. The reference's scores are rocMLIR's f16
chain R16(...R16(R16(Q·Kᵀ - zp)·qs)...); a kernel may skip any rounding but the last one (an fma, a wider
intermediate), so its value before the last rounding lies within the band B_j of the chain's V_j
(attention_math.QuantizedScores). Where V_j is farther than B_j from every f16 rounding boundary, kernel and
reference round to the same score (D_j = 0); elsewhere they may differ by D_j = B_j + ulp16(|V_j| + B_j).
Such differences can exceed 1 (f16's ulp at 1024 is 1), so they go through softmax exactly, not to first
order: weight j changes by a factor within e^±D_j and the row sum by one within [Σ p e^-D, Σ p e^D], so
    |p'_j - p_j| <= p_j · m_j,   m_j = max(e^D_j / Σ_k p_k e^-D_k - 1,  1 - e^-D_j / Σ_k p_k e^D_k)
    |δo| <= Σ_j p_j m_j (|v_j| + |o|),   |δlse| <= max(log Σ_k p_k e^D_k, -log Σ_k p_k e^-D_k)
The softmax steps then run in f32 (exp's argument, exp, the rescales, the row sum, the division), P is
rounded to f16 (or the probes' format) before P·V, whose sums are f32, and o and lse are rounded to f16.
Rows whose intermediates overflow (i32, or an f16 score) have no exact result: their reference is set beyond
the output's range (attention_math.OVERFLOWED), the comparison counts them as `overflow`, their bound is 0.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Mapping

import torch

from e2egen import metrics
from e2egen.runner.bound import (BoundModel, ComputeRoundings, ExactWhere, IndependentRoundings, IntermediateRounding, OutputRounding,
                    PositiveSumCoefficient, ProductSumCoefficient, ScaledMagnitude, SumOfBounds)
from e2egen.runner.exp_log_pieces import ARGUMENT_ROUNDINGS, EXP_ULPS, LOG_ULPS, rescale_roundings
from e2egen.runner.ops.attention.attention_math import AttentionRows, QuantizedScores, attention_float64, expand_kv, matmul_kv
from e2egen.runner.problem import Problem
from e2egen.runner.ops.shared_values import computed_once
from e2egen.runner.softmax_passes import WeightTerms, weight_terms
from e2egen.runner.magnitude import f32_sums_unproven
from e2egen.runner.upper_matmul import (F32_FROM_ROWS, Magnitudes, UnwidenedProduct, f32_product_proven, magnitudes, rounded_up,
                           unwidened_matmul, upper_matmul)

@dataclass(frozen=True)
class Unscaled:
    """A coefficient of 1: the magnitude is already the bound (quantized attention's f16 score differences)."""

    def __call__(self, model: BoundModel) -> float:
        return 1.0


def score_differences(scores: QuantizedScores) -> torch.Tensor:
    """D_j: how far a kernel's f16 score may lie from the reference's: 0 where the chain's value before its last
    rounding lies farther than the band from every f16 rounding boundary (both round alike), else the band
    plus the wider f16 step there (the two roundings to either side)."""
    to_boundary = metrics.ulp(scores.chain, "f16").div_(2).sub_((scores.pre_last - scores.chain).abs())
    step = metrics.ulp(scores.pre_last.abs() + scores.band, "f16")
    return torch.where(scores.band >= to_boundary, step.add_(scores.band), 0.0)


def score_change_factors(p: torch.Tensor, differences: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(m_j, the lse's bound per row): the relative change of each p_j, and of the row's log-sum-exp, when
    each score moves by at most D_j (the exact form in the module's docstring)."""
    up, down = differences.exp(), differences.neg().exp()
    grows = (p * up).sum(dim=-1, keepdim=True)  # >= 1
    shrinks = (p * down).sum(dim=-1, keepdim=True)  # <= 1, > 0 for an allowed row
    shrinks = torch.where(shrinks > 0, shrinks, 1.0)  # a fully masked row: p = 0, nothing moves
    change = torch.maximum(up / shrinks - 1, 1 - down / grows)
    return change, torch.maximum(grows.log(), shrinks.log().neg()).squeeze(-1)


@dataclass(frozen=True, eq=False)
class ScoreErrors:
    """E_j per score as ((raw_j + allowance)·widening)·scale: the Q·Kᵀ product sum's magnitude as
    upper_matmul summed it, not yet widened, times |softmax scale|; or given whole (allowance 0, widening and
    scale 1)."""

    raw: torch.Tensor  # f32 or float64, the scores' shape
    allowance: float = 0.0
    widening: float = 1.0
    scale: float = 1.0

    def tensor(self) -> torch.Tensor:
        """E in float64: raw itself where there is nothing to apply, else a new tensor."""
        if self.raw.dtype == torch.float64 and (self.allowance, self.widening, self.scale) == (0.0, 1.0, 1.0):
            return self.raw
        return UnwidenedProduct(self.raw, self.allowance, self.widening).widened().mul_(self.scale)


def score_roundings(rows: AttentionRows, seq_k: int, score_ops: int, bias: torch.Tensor | None = None) -> torch.Tensor:
    """Per score, in u: score_ops roundings of |s_j| (+ |β_j|) (scale, score scale, bias), the exponent's
    argument's (|s_j| + 2|m| + log seq_k, ARGUMENT_ROUNDINGS of them) and exp's own (2·EXP_ULPS); masked
    scores (-inf) count as 0."""
    scores_abs = rows.scores.nan_to_num(neginf=0.0).abs_()
    roundings = (scores_abs + bias.abs()).mul_(score_ops) if bias is not None else scores_abs * score_ops
    roundings.add_(scores_abs.add_(rows.row_max.abs(), alpha=2).add_(math.log(seq_k)), alpha=ARGUMENT_ROUNDINGS)
    return roundings.add_(2 * EXP_ULPS)


Through = tuple[torch.Tensor, torch.Tensor]  # SoftmaxTimesV.through_softmax's (to the output, to the lse)


@dataclass(frozen=True, eq=False)
class SoftmaxTimesV:
    """The magnitudes of softmax(scores)·V that every attention bound shares, per row: the error of the
    weights P (rescaling, rounding before P·V, subnormal P), of P·V's product sum, of the row sum and of
    the division by it, and how score errors E_j reach the output (through_softmax). Products of
    magnitudes are upper_matmul's: never below the exact sums, in f32 where that is proven."""

    p: torch.Tensor
    v: Magnitudes  # |V| per kv head (matmul_kv), rounded up to f32 once for every product with it
    group: int
    o_abs: torch.Tensor
    weighted_v: torch.Tensor  # Σ_j p_j |v_j|
    squared_weighted_v: torch.Tensor  # Σ_j (p_j v_j)², never below it
    sum_squared: torch.Tensor  # Σ_j p_j²
    rescale_per_weight: torch.Tensor
    tiny_terms: torch.Tensor

    @property
    def p_rounding_rms(self) -> torch.Tensor:
        """The P roundings' rms form: sqrt(Σ_j (p_j v_j)²) + |o|·sqrt(Σ_j p_j²)."""
        return self.squared_weighted_v.sqrt().add_(self.o_abs * self.sum_squared.sqrt())

    @classmethod
    def of(cls, rows: AttentionRows, o_abs: torch.Tensor, v: Magnitudes | None = None) -> "SoftmaxTimesV":
        """The magnitudes in torch's ops, one product per operand pair; v: |V| where already made (rounded up
        to f32 once for every product with it)."""
        group = rows.group
        by_kv_head = functools.partial(matmul_kv, group=group)
        v = v if v is not None else magnitudes(rows.v)
        p_squared = rows.p.square()
        squared = upper_matmul(p_squared, rows.v.square(), by_kv_head)
        # the scores are -inf exactly where masked: their maximum is row_max, their minimum over allowed keys
        # that of the scores with -inf read as +inf
        spread = rows.row_max - rows.scores.nan_to_num(neginf=math.inf).amin(dim=-1, keepdim=True)
        return cls(rows.p, v, group, o_abs, upper_matmul(rows.p, v, by_kv_head), squared,
                   p_squared.sum(-1, keepdim=True), *_rescale_and_tiny(rows, v, spread))

    @classmethod
    def with_score_errors(cls, rows: AttentionRows, o_abs: torch.Tensor, product: ScoreErrors, score_ops: int,
                          score_scale: torch.Tensor | None = None,
                          bias: torch.Tensor | None = None, seq_k: int | None = None,
                          ) -> tuple["SoftmaxTimesV", Through, Through]:
        """(of(rows, o_abs), through_softmax of the product's errors (times |score_scale|), through_softmax
        of score_roundings): in one numba pass over the scores (runner/softmax_passes.py) where its products
        with |V| are proven in f32, else in torch's ops. seq_k: the row's keys, where rows hold a block of them."""
        seq_k = seq_k or rows.p.shape[-1]
        # |V| and its f32 rounding up, made once for every chunk of query rows (rows.v is the input itself)
        v = computed_once("attention |V|", rows.group, {"v": rows.v}, lambda: magnitudes(rows.v))
        fused = cls._fused(rows, o_abs, v, product, score_ops, score_scale, bias, seq_k)
        if fused is not None:
            return fused
        errors = product.tensor()
        if score_scale is not None:
            errors.mul_(score_scale.abs())
        terms = cls.of(rows, o_abs, v)
        roundings = score_roundings(rows, seq_k, score_ops, bias)
        return terms, terms.through_softmax(errors), terms.through_softmax(roundings)

    @classmethod
    def _fused(cls, rows: AttentionRows, o_abs: torch.Tensor, v: Magnitudes, product: ScoreErrors, score_ops: int,
               score_scale: torch.Tensor | None = None,
               bias: torch.Tensor | None = None, seq_k: int | None = None,
               ) -> tuple["SoftmaxTimesV", Through, Through] | None:
        """with_score_errors from softmax_passes.weight_terms and f32 products, or None where those do not
        pay (fewer than F32_FROM_ROWS rows per kv head in the product of the stacked operands, 3·group·seq_q)
        or are not proven (upper_matmul.f32_product_proven)."""
        sq, sk = rows.p.shape[-2:]
        seq_k = seq_k or sk
        if 3 * rows.group * sq < F32_FROM_ROWS or f32_sums_unproven(sk) or v.rounded_up is None:
            return None
        terms = weight_terms(rows.p, rows.scores, rows.row_max, product.raw, rows.group, allowance=product.allowance,
                             widening=product.widening, scale=product.scale, score_ops=score_ops,
                             log_keys=math.log(seq_k), argument_roundings=ARGUMENT_ROUNDINGS, exp_term=2 * EXP_ULPS,
                             score_scale=score_scale, bias=bias)
        if terms is None:
            return None
        # once for every chunk of query rows, as |V|
        v_squared, v_squared_largest = computed_once("attention V²", rows.group, {"v": rows.v},
                                                     lambda: rounded_up(rows.v.square()))
        if not f32_product_proven(sk, terms.largest, max(v.rounded_up[1], v_squared_largest)):
            return None
        first, second, weighted_v = _stacked_products(terms, v.rounded_up[0], sk)
        squared = UnwidenedProduct.of(matmul_kv(terms.squared, v_squared, rows.group), sk).widened()
        spread = rows.row_max - terms.least_score
        pv = cls(rows.p, v, rows.group, o_abs, weighted_v, squared, terms.sum_squared,
                 *_rescale_and_tiny(rows, v, spread))
        return (pv, (first.add_(o_abs * terms.sum_first), terms.sum_first.squeeze(-1)),
                (second.add_(o_abs * terms.sum_second), terms.sum_second.squeeze(-1)))

    def through_softmax(self, per_score: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(Σ_j p_j E_j (|v_j| + |o|), Σ_j p_j E_j) for score errors E_j: what they add to the output, and
        to the row's log-sum-exp."""
        weighted = self.p * per_score
        weighted_sum = weighted.sum(dim=-1, keepdim=True)
        to_output = upper_matmul(weighted, self.v, functools.partial(matmul_kv, group=self.group))
        return to_output.add_(self.o_abs * weighted_sum), weighted_sum.squeeze(-1)

    def lse_parts(self, row_sum: torch.Tensor, lse: torch.Tensor, allowed: torch.Tensor | int, seq_k: int, dtype: str,
                  known: torch.Tensor) -> tuple:
        """The lse's error sources from the row sum on (online rescaling and the row sum, the log and
        m + log l), for rows with row sums l, log-sum-exps lse and `allowed` keys each, where `known` marks
        the rows whose lse is a number."""
        row_sum = torch.where(row_sum > 0, row_sum, 1.0)
        log_sum = torch.log(row_sum).squeeze(-1)
        lse_abs = torch.where(known, lse, 0.0).abs()
        return (
            ScaledMagnitude(PositiveSumCoefficient(seq_k, dtype), (self.rescale_per_weight + 1).squeeze(-1),
                            "online rescaling, row sum"),
            ScaledMagnitude(ComputeRoundings(1, dtype), log_sum.abs().mul_(LOG_ULPS).add_(lse_abs), "log, m + log l"),
            # l may be summed from P as rounded for P·V (step 3): each weight off by u_F relative, so l by u_F
            # and log l by as much; a weight that small rounds to within tiny_F of itself
            ScaledMagnitude(IntermediateRounding(dtype), torch.ones_like(log_sum), "row sum from P rounded before P·V"),
            ScaledMagnitude(IntermediateRounding(dtype, tiny=True), (allowed / row_sum).squeeze(-1),
                            "row sum from subnormal P"),
        )

    def parts(self, seq_k: int, dtype: str) -> tuple:
        """The output's error sources from the weights on, in the compute arithmetic of `dtype`."""
        both = self.weighted_v + self.o_abs
        return (
            ScaledMagnitude(PositiveSumCoefficient(seq_k, dtype), self.rescale_per_weight * both, "online rescaling"),
            IndependentRoundings(IntermediateRounding(dtype), both, self.p_rounding_rms, "P rounded before P·V"),
            ScaledMagnitude(IntermediateRounding(dtype, tiny=True), self.tiny_terms, "subnormal P"),
            ScaledMagnitude(ProductSumCoefficient(seq_k, dtype), self.weighted_v, "P·V product sum"),
            ScaledMagnitude(PositiveSumCoefficient(seq_k, dtype), self.o_abs, "row sum"),
            ScaledMagnitude(ComputeRoundings(1, dtype), self.o_abs, "division by the row sum"),
        )


def _rescale_and_tiny(rows: AttentionRows, v: Magnitudes, spread: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """SoftmaxTimesV's rescale_per_weight (from the row's score spread) and tiny_terms."""
    allowed_rows = rows.row_sum > 0  # a row with an allowed key has l >= 1 (its largest weight is 1)
    rescale = rescale_roundings(torch.where(allowed_rows, spread, 0.0))
    # Σ_allowed |v_j| is the same for every q head of a kv head (the mask has no head axis): one product
    # per kv head, then shared
    allowed = torch.ones((1, 1, 1, rows.p.shape[-1]), dtype=torch.float64) if rows.allowed is None else rows.allowed
    allowed_v = expand_kv(upper_matmul(allowed.to(torch.float64), v), rows.group)
    return rescale, allowed_v.div(torch.where(allowed_rows, rows.row_sum, 1.0))


def _stacked_products(terms: WeightTerms, v_up: torch.Tensor, seq_k: int) -> tuple[torch.Tensor, ...]:
    """The upper bounds on (p·E1)·|V|, (p·E2)·|V| and p·|V| (b, hq, sq, dv) from one f32 product of the
    stacked operands, each contiguous (the widening writes them out of the stacked rows' order)."""
    summed = torch.matmul(terms.stacked, v_up)  # (b, hkv, 3·group·sq, dv)
    by_term = UnwidenedProduct.of(summed, seq_k).widened_by_term(3, summed.shape[-2] // 3)
    b, hq, sq = terms.squared.shape[:3]
    return tuple(by_term[t].view(b, hq, sq, summed.shape[-1]) for t in range(3))


def attention_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, ExactWhere]:
    return rows_bound(problem, inputs64, attention_float64(problem.params, inputs64))


def rows_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor], rows: AttentionRows) -> dict[str, ExactWhere]:
    """The bound of the query rows `rows` holds, from the inputs they were computed from (a chunk's: query_slice)."""
    if problem.params.quantized:
        return _quantized_bound(problem, rows)
    return assembled_bound(problem, row_terms(problem, inputs64, rows, rows.o.abs()), rows.row_sum, rows.lse,
                           allowed_per_row(rows))


def allowed_per_row(rows: AttentionRows) -> torch.Tensor | int:
    """How many keys each row may attend to (b, 1, sq, 1), or the row's every key where nothing is masked."""
    return rows.p.shape[-1] if rows.allowed is None else rows.allowed.sum(dim=-1, keepdim=True)


@dataclass(frozen=True, eq=False)
class RowTerms:
    """What a row's bound is composed of: SoftmaxTimesV's magnitudes, and how the Q·Kᵀ product sum's errors and
    the score roundings reach o and lse (each a through_softmax pair)."""

    pv: SoftmaxTimesV
    product: Through
    roundings: Through


def row_terms(problem: Problem, inputs64: Mapping[str, torch.Tensor], rows: AttentionRows, o_abs: torch.Tensor,
              seq_k: int | None = None) -> RowTerms:
    """Step 1's per-score magnitudes (Σ_l|q_l k_jl|·|στ_j| times F_qk, the rounding count Z_j times u) through
    the softmax of `rows`, from the inputs they were computed from; seq_k: the row's keys, where rows and
    inputs hold a block of them."""
    params = problem.params
    by_kv_head = functools.partial(matmul_kv, group=params.group)
    product = unwidened_matmul(inputs64["q"], inputs64["k"].mT, by_kv_head)
    product_terms = ScoreErrors(product.summed, product.allowance, product.factor, abs(params.softmax_scale))
    return RowTerms(*SoftmaxTimesV.with_score_errors(
        rows, o_abs, product_terms, 1 + params.score_scale + params.score_bias,
        score_scale=inputs64["score_scale"] if params.score_scale else None,
        bias=inputs64["score_bias"] if params.score_bias else None, seq_k=seq_k))


def assembled_bound(problem: Problem, terms: RowTerms, row_sum: torch.Tensor, lse: torch.Tensor,
                    allowed: torch.Tensor | int) -> dict[str, ExactWhere]:
    """The bounds of o (and lse) from their rows' terms, row sums l, log-sum-exps and allowed keys."""
    params, dtype = problem.params, problem.dtype
    pv, (product_to_o, product_to_lse), (roundings_to_o, roundings_to_lse) = terms.pv, terms.product, terms.roundings
    qk, seq_k = params.head_dim_qk, params.seq_k
    out_parts = (
        ScaledMagnitude(ProductSumCoefficient(qk, dtype), product_to_o, "Q·Kᵀ product sum"),
        ScaledMagnitude(ComputeRoundings(1, dtype), roundings_to_o, "scores, exp"),
        *pv.parts(seq_k, dtype),
        OutputRounding(problem.outputs["o"].dtype),
    )
    empty = row_sum == 0  # a fully masked row: o = 0 and lse = -inf exactly
    bounds = {"o": ExactWhere(empty.expand_as(pv.o_abs), SumOfBounds(out_parts))}
    if params.return_lse:
        empty = empty.squeeze(-1)
        bounds["lse"] = ExactWhere(empty, SumOfBounds((
            ScaledMagnitude(ProductSumCoefficient(qk, dtype), product_to_lse, "Q·Kᵀ product sum"),
            ScaledMagnitude(ComputeRoundings(1, dtype), roundings_to_lse, "scores, exp"),
            *pv.lse_parts(row_sum, lse, allowed, seq_k, dtype, torch.isfinite(lse)),
            OutputRounding(problem.outputs["lse"].dtype),
        )))
    return bounds


def _quantized_bound(problem: Problem, rows: AttentionRows) -> dict[str, ExactWhere]:
    """The module docstring's quantized form: exact Q·Kᵀ, the f16 score differences through softmax exactly,
    then the softmax in f32 and P·V as f16 attention's."""
    params = problem.params
    pv = "f16"  # P·V's operands: f16 V and P rounded to f16 (rocMLIR's), f32 sums; the compute format f32
    allowed = torch.ones_like(rows.p, dtype=torch.bool) if rows.allowed is None else rows.allowed.expand_as(rows.p)
    differences = torch.where(allowed & ~rows.overflow, score_differences(rows.quantized), 0.0)
    change, lse_change = score_change_factors(rows.p, differences)

    # exp's argument and exp, in f32 (no score roundings: score_ops 0)
    pv_terms, (change_to_o, _), (roundings_to_o, roundings_to_lse) = SoftmaxTimesV.with_score_errors(
        rows, torch.where(rows.overflow, 0.0, rows.o).abs(), ScoreErrors(change), 0)

    seq_k = params.seq_k
    exact = (rows.row_sum == 0) | rows.overflow  # fully masked (o = 0, lse = -inf) or no exact result
    bounds = {"o": ExactWhere(exact.expand_as(rows.o), SumOfBounds((
        ScaledMagnitude(Unscaled(), change_to_o, "f16 scores (quantized chain)"),
        ScaledMagnitude(ComputeRoundings(1, pv), roundings_to_o, "exp and its argument"),
        *pv_terms.parts(seq_k, pv),
        OutputRounding(problem.outputs["o"].dtype),
    )))}
    if params.return_lse:
        bounds["lse"] = ExactWhere(exact.squeeze(-1), SumOfBounds((
            ScaledMagnitude(Unscaled(), lse_change, "f16 scores (quantized chain)"),
            ScaledMagnitude(ComputeRoundings(1, pv), roundings_to_lse, "exp and its argument"),
            *pv_terms.lse_parts(rows.row_sum, rows.lse, allowed_per_row(rows), seq_k, pv,
                                torch.isfinite(rows.lse) & ~exact.squeeze(-1)),
            OutputRounding(problem.outputs["lse"].dtype),
        )))
    return bounds
