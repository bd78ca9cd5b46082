"""Attention's reference and bound for a chunk of query rows, streamed over blocks of keys (flash-style, float64).

A case whose K or V would hold more than params.CHUNK_SCORES elements in float64 keeps them in their input
format (AttentionOp.streamed_inputs) and widens them here one block of keys at a time (params.key_blocks), so
neither the float64 K and V nor a row's scores over every key are ever held whole. Two passes over the blocks:

1. the row's largest score m and its least allowed score (the spread the online-rescaling term needs);
2. each block's weights w_j = exp(s_j - m) <= 1, unnormalised, and everything the bound sums over keys,
   by the same code an unblocked row uses (bound.row_terms on the block's rows, with p := w and l := 1):
   Σ w_j v_j, Σ w_j |v_j|, Σ w_j² v_j², Σ w_j², Σ w_j E_j (|v_j|) for both score-error kinds, Σ_allowed |v_j|,
   and the row sum l = Σ w_j.

Every one of those is a sum over keys, so the blocks' sums add; dividing by l (l² for the squared ones) gives
the row's p-weighted sums, and the terms in |o| (through_softmax's |o|·Σ p_j E_j, the rms form's
|o|·sqrt(Σ p_j²)) are added once o is known. The reference o = Σ w_j v_j / l and lse = m + log l are the
unblocked row's in another summation order: within float64's own rounding (tests/ops/attention/test_attention_chunks.py).
The blocks' upper bounds (each proven, f32 or float64: upper_matmul) are added in float64, whose roundings could
take a sum below the exact one; the totals are widened by those additions and the division, as
magnitude.widening does for a sum.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

from e2egen.runner.bound import ErrorBound
from e2egen.runner.exp_log_pieces import rescale_roundings
from e2egen.runner.inputs import widen_to_float64
from e2egen.runner.magnitude import F64_UNIT_ROUNDOFF, widening
from e2egen.runner.ops.attention.attention_math import (AttentionRows, QueryRows, allowed_keys, key_slice, matmul_kv,
                                                        scores_float64)
from e2egen.runner.ops.attention.bound import RowTerms, SoftmaxTimesV, assembled_bound, row_terms
from e2egen.runner.ops.attention.params import KEY_INPUTS, key_blocks
from e2egen.runner.problem import Problem


@dataclass(frozen=True, eq=False)
class StreamedRows:
    """A chunk's reference rows and their bounds."""

    values: dict[str, torch.Tensor]
    bounds: dict[str, ErrorBound]


def streamed_rows(problem: Problem, inputs: Mapping[str, torch.Tensor], query_rows: QueryRows) -> StreamedRows:
    """The reference and the bound of the query rows `inputs` were sliced to (chunks.query_slice), K and V as
    stored (their input format, or float64) and widened block by block."""
    params = problem.params
    blocks = key_blocks(params)
    row_max, least = _score_range(problem, inputs, query_rows, blocks)
    empty = torch.isneginf(row_max)
    row_max = row_max.masked_fill(empty, 0.0)  # a fully masked row: m = 0, l = 0, o = 0, lse = -inf
    no_key = torch.zeros((), dtype=torch.float64)  # each block's terms in |o| come once o is known
    totals: _Totals | None = None
    for keys in blocks:
        block = _widened_block(inputs, keys)
        scores = _masked_scores(problem, block, query_rows, keys)
        weights = torch.exp(scores - row_max)
        rows = AttentionRows(scores, allowed_keys(params, scores.device, query_rows, keys), row_max, weights,
                             torch.ones_like(row_max), weights, block["v"], params.group, None, None)
        terms = row_terms(problem, block, rows, no_key, seq_k=params.seq_k)
        part = _Totals.of(rows, terms)
        totals = part if totals is None else totals.add(part)
        del block, scores, weights, rows, terms, part
    return totals.rows(problem, row_max, torch.where(empty, 0.0, row_max - least), len(blocks))


def _widened_block(inputs: Mapping[str, torch.Tensor], keys: tuple[int, int]) -> dict[str, torch.Tensor]:
    block = key_slice(inputs, keys)
    for name in KEY_INPUTS:
        block[name] = widen_to_float64(block[name].contiguous())
    return block


def _masked_scores(problem: Problem, block: Mapping[str, torch.Tensor], query_rows: QueryRows,
                   keys: tuple[int, int]) -> torch.Tensor:
    scores = scores_float64(problem.params, block)
    allowed = allowed_keys(problem.params, scores.device, query_rows, keys)
    return scores if allowed is None else scores.masked_fill_(~allowed, float("-inf"))


def _score_range(problem: Problem, inputs: Mapping[str, torch.Tensor], query_rows: QueryRows,
                 blocks: list[tuple[int, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Pass 1: each row's largest score (-inf where every key is masked) and least allowed score."""
    largest = least = None
    for keys in blocks:
        scores = _masked_scores(problem, _widened_block(inputs, keys), query_rows, keys)
        block_largest = scores.amax(dim=-1, keepdim=True)
        block_least = scores.nan_to_num(neginf=float("inf")).amin(dim=-1, keepdim=True)
        largest = block_largest if largest is None else torch.maximum(largest, block_largest)
        least = block_least if least is None else torch.minimum(least, block_least)
        del scores
    return largest, least


@dataclass(frozen=True, eq=False)
class _Totals:
    """The sums over keys of pass 2, so far: per row unless named otherwise."""

    weighted_values: torch.Tensor  # Σ w_j v_j (b, hq, sq, dv)
    row_sum: torch.Tensor  # l = Σ w_j
    allowed: torch.Tensor | int  # keys each row may attend to
    weighted_v: torch.Tensor  # Σ w_j |v_j|, never below it
    squared_weighted_v: torch.Tensor  # Σ w_j² v_j²
    sum_squared: torch.Tensor  # Σ w_j²
    tiny: torch.Tensor  # Σ_allowed |v_j|
    product: tuple[torch.Tensor, torch.Tensor]  # (Σ (w_j E_j)·|v_j|, Σ w_j E_j) of the Q·Kᵀ product's errors
    roundings: tuple[torch.Tensor, torch.Tensor]  # the same for the score roundings

    @classmethod
    def of(cls, rows: AttentionRows, terms: RowTerms) -> "_Totals":
        pv = terms.pv
        allowed = rows.p.shape[-1] if rows.allowed is None else rows.allowed.sum(dim=-1, keepdim=True)
        return cls(matmul_kv(rows.p, rows.v, rows.group), rows.p.sum(dim=-1, keepdim=True), allowed, pv.weighted_v,
                   pv.squared_weighted_v, pv.sum_squared, pv.tiny_terms, terms.product, terms.roundings)

    def add(self, other: "_Totals") -> "_Totals":
        return _Totals(*(tuple(a + b for a, b in zip(mine, theirs)) if isinstance(mine, tuple) else mine + theirs
                         for mine, theirs in zip(self._fields(), other._fields())))

    def _fields(self) -> tuple:
        return (self.weighted_values, self.row_sum, self.allowed, self.weighted_v, self.squared_weighted_v,
                self.sum_squared, self.tiny, self.product, self.roundings)

    def rows(self, problem: Problem, row_max: torch.Tensor, spread: torch.Tensor, blocks: int) -> StreamedRows:
        """The reference rows and their bound: the sums divided by l (l² for the squared ones), widened by the
        float64 additions of the blocks and the division (the module docstring)."""
        params = problem.params
        row_sum = self.row_sum
        divisor = torch.where(row_sum > 0, row_sum, 1.0)
        o = self.weighted_values / divisor
        lse = (row_max + torch.log(row_sum)).squeeze(-1)  # log 0 = -inf for a fully masked row
        spare = widening(blocks, F64_UNIT_ROUNDOFF)

        def averaged(total: torch.Tensor, power: int = 1) -> torch.Tensor:
            return total / divisor ** power * spare

        o_abs = o.abs()
        product_sums, rounding_sums = (averaged(sums.unsqueeze(-1)) for sums in (self.product[1], self.roundings[1]))
        pv = SoftmaxTimesV(None, None, params.group, o_abs, averaged(self.weighted_v),
                           averaged(self.squared_weighted_v, 2), averaged(self.sum_squared, 2),
                           rescale_roundings(spread), averaged(self.tiny))
        terms = RowTerms(pv, (averaged(self.product[0]).add_(o_abs * product_sums), product_sums.squeeze(-1)),
                         (averaged(self.roundings[0]).add_(o_abs * rounding_sums), rounding_sums.squeeze(-1)))
        values = {"o": o, "lse": lse} if params.return_lse else {"o": o}
        return StreamedRows(values, assembled_bound(problem, terms, row_sum, lse, self.allowed))
