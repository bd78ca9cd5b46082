"""Attention's exact arithmetic in float64, with the intermediates its error bound needs.

Shared by the reference, the bound (runner/ops/attention/bound.py) and torch's default kernel (the mask).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

from e2egen import metrics
from e2egen.runner.ops.attention.params import KEY_INPUTS, UNBOUNDED, AttentionParams
from e2egen.runner.ops.shared_values import computed_once


QueryRows = tuple[int, int]  # [start, stop) of the query rows a computation covers
KeyRange = tuple[int, int]  # [start, stop) of the keys a block covers


def allowed_keys(params: AttentionParams, device: torch.device, query_rows: QueryRows | None = None,
                 keys: KeyRange | None = None) -> torch.Tensor | None:
    """(batch, 1, seq_q, seq_k) bool: which keys each query may attend to; None when every key is allowed.
    query_rows, keys: only those rows' and those keys' (a chunk's and a block's, runner/ops/attention/chunks.py)."""
    if not params.masked:
        return None
    start, stop = query_rows or (0, params.seq_q)
    first, last = keys or (0, params.seq_k)
    rows = torch.arange(start, stop, device=device).view(1, -1, 1)
    cols = torch.arange(first, last, device=device).view(1, 1, -1)
    offset = torch.tensor(params.offsets(), device=device).view(-1, 1, 1)
    diagonal = rows + offset  # the key each query lines up with, per batch
    allowed = torch.ones(params.batch, stop - start, last - first, dtype=torch.bool, device=device)
    if params.kv_lengths is not None:
        allowed &= cols < torch.tensor(params.kv_lengths, device=device).view(-1, 1, 1)
    if params.causal:
        allowed &= cols <= diagonal
    if params.window is not None:
        left, right = params.window
        if left != UNBOUNDED:
            allowed &= cols >= diagonal - left
        if right != UNBOUNDED:
            allowed &= cols <= diagonal + right
    if params.look_back is not None:
        last = torch.tensor(params.last_valid_keys(), device=device).view(-1, 1, 1)
        allowed &= cols >= (last - params.look_back).clamp_min(0)
    return allowed.unsqueeze(1)


def expand_kv(tensor: torch.Tensor, group: int) -> torch.Tensor:
    """kv heads -> one per q head (q head h reads kv head h // group)."""
    return tensor if group == 1 else tensor.repeat_interleave(group, dim=1)


def matmul_kv(per_q_head: torch.Tensor, per_kv_head: torch.Tensor, group: int) -> torch.Tensor:
    """per_q_head (b, hq, s, x) @ per_kv_head (b, hkv, x, y) with q head h reading kv head h // group:
    the `group` q heads of a kv head stacked as rows of one product, so K and V are never repeated."""
    if group == 1:
        return torch.matmul(per_q_head, per_kv_head)
    b, hq, s, x = per_q_head.shape
    rows = per_q_head.reshape(b, hq // group, group * s, x)
    return torch.matmul(rows, per_kv_head).view(b, hq, s, per_kv_head.shape[-1])


@dataclass(frozen=True, eq=False)
class AttentionRows:
    """Every row's exact softmax, float64. Masked scores are -inf, their p 0; a fully masked row has
    m = 0, l = 0, o = 0 and lse = -inf."""

    scores: torch.Tensor  # S (b, hq, sq, sk), -inf where masked
    allowed: torch.Tensor | None  # (b, 1, sq, sk), None: all
    row_max: torch.Tensor  # m (b, hq, sq, 1), 0 for a fully masked row
    weights: torch.Tensor  # exp(S - m) (b, hq, sq, sk)
    row_sum: torch.Tensor  # l = Σ_j exp(S_j - m) (b, hq, sq, 1)
    p: torch.Tensor  # weights / l (0 in a fully masked row)
    v: torch.Tensor  # (b, hkv, sk, dv): q head h reads kv head h // group (matmul_kv)
    group: int
    o: torch.Tensor  # (b, hq, sq, dv)
    lse: torch.Tensor  # (b, hq, sq)
    overflow: torch.Tensor | None = None  # quantized: (b, hq, sq, 1) rows whose intermediates overflow (o, lse: OVERFLOWED)
    quantized: QuantizedScores | None = None


I32_MAX = 2 ** 31 - 1
# The reference of an output row whose contract intermediates overflow (quantized attention's i32 Q·Kᵀ, or a
# score beyond f16): no exact result exists, so the row is set beyond every output format's overflow limit and
# the comparison counts it under `overflow` (a failure unless allowed), never as a number.
OVERFLOWED = 2.0 ** 200


@dataclass(frozen=True, eq=False)
class QuantizedScores:
    """rocMLIR's quantized scores (docs/concepts/lowbit-attention.md), (b, hq, sq, sk) float64, unmasked.

    chain     R16(R16(R16(R16(Q·Kᵀ - zp) · qs) · score_scale) + score_bias): the reference's scores, each
              step an f16 operation (rounded once), Q·Kᵀ - zp exact (i32)
    pre_last  the chain's value before its last rounding (exact in float64: the last operation on f16 values)
    band      how far a kernel under the contract may hold that value from pre_last: it may skip any rounding
              but the last (an fma, a wider intermediate), so up to each skipped rounding's own error
              |R16(x) - x|, carried through the later multipliers, plus 2·u32 of each step (an f32 intermediate)
    overflow  Q·Kᵀ - zp beyond i32, or a step of the chain beyond f16"""

    chain: torch.Tensor
    pre_last: torch.Tensor
    band: torch.Tensor
    overflow: torch.Tensor


def quantized_scores(params: AttentionParams, inputs64: Mapping[str, torch.Tensor]) -> QuantizedScores:
    integer = matmul_kv(inputs64["q"], inputs64["k"].mT, params.group)  # exact: |sums| < 2^53
    integer.sub_(inputs64["quant_bias"])
    overflow = integer.abs() > I32_MAX
    steps = [("mul", inputs64["quant_scale"])]
    if params.score_scale:
        steps.append(("mul", inputs64["score_scale"]))
    if params.score_bias:
        steps.append(("add", inputs64["score_bias"]))
    wide = 2.0 * 2.0 ** -24  # an f32 intermediate's rounding, relative, with room

    value = integer  # the pre-rounding value of the current step
    band = torch.zeros_like(integer)
    for op, operand in steps:  # round the previous step (it is not the last), then apply this one
        rounded = metrics.round_to(value, "f16")
        band.add_((rounded - value).abs().add_(value.abs().mul_(wide)))
        if op == "mul":
            band.mul_(operand.abs())
            value = rounded * operand
        else:
            value = rounded + operand
    band.add_(value.abs().mul_(wide))
    chain = metrics.round_to(value, "f16")
    overflow |= ~torch.isfinite(chain)
    return QuantizedScores(chain, value, band, overflow)


def overflowed_rows(params: AttentionParams, scores: QuantizedScores, allowed: torch.Tensor | None) -> torch.Tensor:
    """(b, hq, sq, 1) bool: rows with an allowed score whose contract intermediate overflows."""
    overflow = scores.overflow if allowed is None else scores.overflow & allowed
    return overflow.any(dim=-1, keepdim=True)


def scores_float64(params: AttentionParams, inputs64: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """scale · Q·Kᵀ (· score_scale) (+ score_bias), unmasked; quantized: rocMLIR's f16 chain (QuantizedScores)."""
    if params.quantized:
        return quantized_scores(params, inputs64).chain
    scores = matmul_kv(inputs64["q"], inputs64["k"].mT, params.group).mul_(params.softmax_scale)
    if params.score_scale:
        scores.mul_(inputs64["score_scale"])
    if params.score_bias:
        scores.add_(inputs64["score_bias"])
    return scores


def attention_float64(params: AttentionParams, inputs64: Mapping[str, torch.Tensor]) -> AttentionRows:
    """The rows of these inputs, computed once per set of input tensors (reference and bound share them)."""
    return computed_once("attention rows", params, inputs64, lambda: attention_rows(params, inputs64))


QUERY_ROW_INPUTS = ("q", "score_scale", "score_bias")  # (batch, heads_q, seq_q, ...): one row per query


def query_slice(inputs64: Mapping[str, torch.Tensor], query_rows: QueryRows) -> dict[str, torch.Tensor]:
    """The inputs a chunk of query rows reads: q's and the score tensors' rows [start, stop) (views), k and v whole."""
    start, stop = query_rows
    return {name: tensor[..., start:stop, :] if name in QUERY_ROW_INPUTS else tensor for name, tensor in inputs64.items()}


def key_slice(inputs: Mapping[str, torch.Tensor], keys: KeyRange) -> dict[str, torch.Tensor]:
    """The inputs a block of keys reads: k's and v's rows [start, stop) and the score tensors' columns (views)."""
    start, stop = keys
    return {name: tensor[..., start:stop, :] if name in KEY_INPUTS
            else tensor[..., start:stop] if name in ("score_scale", "score_bias") else tensor
            for name, tensor in inputs.items()}


def attention_rows(params: AttentionParams, inputs64: Mapping[str, torch.Tensor],
                   query_rows: QueryRows | None = None) -> AttentionRows:
    """The rows computed afresh (attention_float64 keeps them for the inputs' lifetime); query_rows: only those,
    from inputs already sliced to them (query_slice)."""
    quantized = overflow = None
    if params.quantized:
        quantized = quantized_scores(params, inputs64)
        scores = quantized.chain.clone()
        allowed = allowed_keys(params, scores.device, query_rows)
        overflow = overflowed_rows(params, quantized, allowed)
        scores.masked_fill_(overflow, 0.0)  # rows without an exact result: finite stand-ins, marked below
    else:
        scores = scores_float64(params, inputs64)
        allowed = allowed_keys(params, scores.device, query_rows)
    if allowed is not None:
        scores.masked_fill_(~allowed, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True)
    empty = torch.isneginf(row_max)
    row_max.masked_fill_(empty, 0.0)
    weights = torch.exp(scores - row_max)
    row_sum = weights.sum(dim=-1, keepdim=True)
    p = weights / torch.where(empty, 1.0, row_sum)
    v = inputs64["v"]
    o = matmul_kv(p, v, params.group)
    lse = (row_max + torch.log(row_sum)).squeeze(-1)  # log 0 = -inf for a fully masked row
    if overflow is not None and bool(overflow.any()):
        o = o.masked_fill(overflow, OVERFLOWED)
        lse = lse.masked_fill(overflow.squeeze(-1), OVERFLOWED)
    return AttentionRows(scores, allowed, row_max, weights, row_sum, p, v, params.group, o, lse, overflow, quantized)
