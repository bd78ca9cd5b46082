"""torch's attention as a kernel under the contract: scaled_dot_product_attention, with the mask built
explicitly where its own flags cannot say it. SDPA cannot multiply the scores by a tensor nor return
the log-sum-exp; for those the scores are formed in f32 from the case's tensors (what a fused kernel
keeps in registers) and the softmax follows in f32.

Low-bit tensors (torch has no i8 or fp8 attention): fp8 q, k, v are widened to f32 (exact) and run as f32;
quantized i8 attention follows rocMLIR's arithmetic step by step (quantized_attention)."""
from __future__ import annotations

import torch
from torch import Tensor

from e2egen.runner.lowbit import FLOAT8_STORAGE, wrap_to_int32
from e2egen.runner.ops.attention.attention_math import allowed_keys, expand_kv, matmul_kv
from e2egen.runner.ops.attention.params import Alignment, AttentionParams


def contract_params(q: Tensor, k: Tensor, v: Tensor, scale: float, causal: bool, align: Alignment,
                    window: tuple[int, int] | None, kv_lengths: Tensor | None,
                    prefix_offset: Tensor | None, look_back: int | None = None) -> AttentionParams:
    """The AttentionParams a call under the contract describes (the tensors' shapes, the masks' keywords):
    what a kernel needs to build the mask with attention_math.allowed_keys."""
    return AttentionParams(
        seq_q=q.shape[2], seq_k=k.shape[2], head_dim_qk=q.shape[3], head_dim_v=v.shape[3], batch=q.shape[0],
        heads_q=q.shape[1], heads_kv=k.shape[1], scale=scale, causal=causal, align=align,
        window=None if window is None else tuple(window),
        kv_lengths=None if kv_lengths is None else tuple(int(x) for x in kv_lengths.tolist()),
        prefix_offset=None if prefix_offset is None else tuple(int(x) for x in prefix_offset.tolist()),
        look_back=look_back)


def torch_attention(q: Tensor, k: Tensor, v: Tensor, *, scale: float, causal: bool = False,
                    align: Alignment = "top-left", window: tuple[int, int] | None = None,
                    kv_lengths: Tensor | None = None, prefix_offset: Tensor | None = None,
                    score_scale: Tensor | None = None, score_bias: Tensor | None = None, return_lse: bool = False,
                    quant_bias: Tensor | None = None, quant_scale: Tensor | None = None,
                    look_back: int | None = None) -> Tensor | tuple[Tensor, Tensor]:
    params = contract_params(q, k, v, scale, causal, align, window, kv_lengths, prefix_offset, look_back)
    allowed = allowed_keys(params, q.device)
    if q.dtype == torch.int8:
        return quantized_attention(q, k, v, params, allowed, quant_bias, quant_scale, score_scale, score_bias, return_lse)
    if q.dtype in FLOAT8_STORAGE:  # widened exactly; the products and sums then run in f32
        q, k, v = q.float(), k.float(), v.float()
    if score_scale is None and not return_lse:
        o = _sdpa(q, k, v, params, allowed, score_bias)
    else:
        o, lse = _scores_in_f32(q, k, v, params, allowed, score_scale, score_bias)
    if allowed is not None:  # a fully masked row is 0 (SDPA's math path gives NaN there)
        o = o.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)
    if not return_lse:
        return o
    return o, lse


def _sdpa(q: Tensor, k: Tensor, v: Tensor, params: AttentionParams, allowed: Tensor | None,
          score_bias: Tensor | None) -> Tensor:
    # torch 2.13's CPU is_causal path returns NaN for a negative scale (found by the hypothesis test of this
    # kernel): such cases pass the causal mask as a mask instead
    only_causal = (params.causal and params.window is None and params.kv_lengths is None and params.look_back is None
                   and params.offsets() == (0,) * params.batch and params.softmax_scale > 0)
    mask = None
    if allowed is not None and not (only_causal and score_bias is None):
        mask = allowed
    if score_bias is not None:
        mask = score_bias if mask is None else score_bias.masked_fill(~mask, float("-inf"))
    return torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=only_causal and mask is None, scale=params.softmax_scale,
        enable_gqa=params.group > 1)


def _scores_in_f32(q: Tensor, k: Tensor, v: Tensor, params: AttentionParams, allowed: Tensor | None,
                   score_scale: Tensor | None, score_bias: Tensor | None) -> tuple[Tensor, Tensor]:
    # matmul_kv: the q heads of a kv head as rows of one product, K and V never repeated per q head
    scores = matmul_kv(q.float(), k.float().mT, params.group).mul_(params.softmax_scale)
    if score_scale is not None:
        scores.mul_(score_scale.float())
    if score_bias is not None:
        scores.add_(score_bias.float())
    if allowed is not None:
        scores.masked_fill_(~allowed, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    p = scores.sub_(torch.where(torch.isneginf(lse), 0.0, lse).unsqueeze(-1)).exp_()  # in place: one score-sized tensor
    # P rounded to the input format, then P·V with f32 sums, as oneDNN's f16/bf16 gemm does; in f32 matmuls because
    # ATen's own f16/bf16 gemm (an AVX2 CPU without oneDNN's) runs ~200x slower
    o = matmul_kv(p.to(q.dtype).float(), v.float(), params.group).to(q.dtype)
    return o, lse


def quantized_attention(q: Tensor, k: Tensor, v: Tensor, params: AttentionParams, allowed: Tensor | None,
                        quant_bias: Tensor, quant_scale: Tensor, score_scale: Tensor | None, score_bias: Tensor | None,
                        return_lse: bool) -> Tensor | tuple[Tensor, Tensor]:
    """rocMLIR's quantized attention (rocmlir-gen's rock.attention pre-softmax body and host reference):
    Q·Kᵀ in i32 (exact sums, wrapped as an i32 accumulator wraps), minus the i8 quant bias in i32, converted
    to f16, times quant_scale in f16, times score_scale and plus score_bias in f16; softmax in f32; P rounded
    to f16; P·V with f32 sums; o and lse in f16."""
    products = torch.matmul(q.double(), expand_kv(k, params.group).double().mT)  # exact below 2^53
    scores = wrap_to_int32(wrap_to_int32(products).double() - quant_bias.double())
    scores = scores.to(torch.float16) * quant_scale  # f16 ops: each result rounded to f16
    if score_scale is not None:
        scores = scores * score_scale
    if score_bias is not None:
        scores = scores + score_bias
    scores = scores.float()
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    p = torch.exp(scores - torch.where(torch.isneginf(lse), 0.0, lse).unsqueeze(-1))
    o = torch.matmul(p.half().float(), expand_kv(v, params.group).float()).half()
    if allowed is not None:
        o = o.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)
    return (o, lse.half()) if return_lse else o
