"""Attention's exact arithmetic in float64, with the intermediates its error bound needs.

Shared by the reference, the bound (runner/softmax_bound.py) and torch's default kernel (the mask).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

from .attention_params import UNBOUNDED, AttentionParams


def allowed_keys(params: AttentionParams, device: torch.device) -> torch.Tensor | None:
    """(batch, 1, seq_q, seq_k) bool: which keys each query may attend to; None when every key is allowed."""
    if not params.masked:
        return None
    rows = torch.arange(params.seq_q, device=device).view(1, -1, 1)
    cols = torch.arange(params.seq_k, device=device).view(1, 1, -1)
    offset = torch.tensor(params.offsets(), device=device).view(-1, 1, 1)
    diagonal = rows + offset  # the key each query lines up with, per batch
    allowed = torch.ones(params.batch, params.seq_q, params.seq_k, dtype=torch.bool, device=device)
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
    return allowed.unsqueeze(1)


def expand_kv(tensor: torch.Tensor, group: int) -> torch.Tensor:
    """kv heads -> one per q head (q head h reads kv head h // group)."""
    return tensor if group == 1 else tensor.repeat_interleave(group, dim=1)


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
    v: torch.Tensor  # v expanded to heads_q (b, hq, sk, dv)
    o: torch.Tensor  # (b, hq, sq, dv)
    lse: torch.Tensor  # (b, hq, sq)


def scores_float64(params: AttentionParams, inputs64: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """scale · Q·Kᵀ (· score_scale) (+ score_bias), unmasked."""
    k = expand_kv(inputs64["k"], params.group)
    scores = torch.matmul(inputs64["q"], k.mT).mul_(params.softmax_scale)
    if params.score_scale:
        scores.mul_(inputs64["score_scale"])
    if params.score_bias:
        scores.add_(inputs64["score_bias"])
    return scores


def attention_float64(params: AttentionParams, inputs64: Mapping[str, torch.Tensor]) -> AttentionRows:
    scores = scores_float64(params, inputs64)
    allowed = allowed_keys(params, scores.device)
    if allowed is not None:
        scores.masked_fill_(~allowed, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True)
    empty = torch.isneginf(row_max)
    row_max.masked_fill_(empty, 0.0)
    weights = torch.exp(scores - row_max)
    row_sum = weights.sum(dim=-1, keepdim=True)
    p = weights / torch.where(empty, 1.0, row_sum)
    v = expand_kv(inputs64["v"], params.group)
    o = torch.matmul(p, v)
    lse = (row_max + torch.log(row_sum)).squeeze(-1)  # log 0 = -inf for a fully masked row
    return AttentionRows(scores, allowed, row_max, weights, row_sum, p, v, o, lse)
