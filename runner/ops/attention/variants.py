"""Attention kernels besides torch's own (kernels.py), under the attention contract (spec.py):
f(q, k, v, *, scale, causal, align, window, kv_lengths, prefix_offset, score_scale, score_bias, return_lse)
-> o, or (o, lse). Correct alternates and planted bugs, used by the evidence study (studies/attention_evidence.py,
docs/evidence/attention.md), the tests and the docs' examples: impl = "e2egen.runner.ops.attention.variants:<name>".

Every kernel does what a fused GPU kernel does, on the CPU: scores S = scale·Q·Kᵀ (·score_scale)
(+score_bias) in f32 from the case's dtype, the softmax in f32, the weights P rounded to the input dtype
before P·V, P·V accumulated in f32 (a product of two f16/bf16 values is exact in f32), the output rounded
once to the dtype; lse = m + log l in f32. A fully masked row gives o = 0 and lse = -inf. Masks come from
attention_math.allowed_keys, GQA from expand_kv (q head h reads kv head h // group).

CORRECT (other orders and blockings; a trustworthy suite passes each):
    flash_b16, flash_b64, flash_b128   online softmax over KV blocks of that size: running max m, the f32
                                       accumulator and row sum rescaled by exp(m_old - m_new) when m grows,
                                       P = exp(s - m) rounded to the dtype per block, l summed from the
                                       unrounded P
    split_kv2, split_kv4               KV cut into 2 / 4 contiguous splits, each a flash_b64 pass giving an
                                       f32 partial o_i (already divided by its l_i) and lse_i, combined
                                       through the LSEs: o = Σ exp(lse_i - lse)·o_i, lse = log Σ exp(lse_i)
    p_rounded                          one pass: P = exp(s - m) / l normalised in f32, rounded to the dtype,
                                       then P·V in f32 (no division afterwards)

WRONG (one bug each, on top of flash_b64 unless said; WRONG[name] = (kernel, the bug, shows(problem, inputs64):
whether the case can show it). A wrong kernel is judged only where its bug changes what it computes: its exact
result, or, for the two numerical bugs, the arithmetic it gets wrong):
    no_max_subtraction     P = exp(s) without the running max (one pass)    a score above ln(max) of P's format
    mask_off_by_one        the causal / window diagonal one key late         causal or window, the masks differ
    wrong_gqa_mapping      q head h reads kv head h % heads_kv               1 < heads_kv < heads_q
    scale_twice            scale² · Q·Kᵀ                                     a row of >= 2 keys, or lse
    scale_missing          Q·Kᵀ unscaled                                     a row of >= 2 keys, or lse
    pv_f16_accumulation    P·V into a half running sum, rounded every 4 keys  a row of > 4 keys, or f32
                           (f16; bf16 for bf16 inputs; one pass)
    row_sum_in_half        the running row sum l stored in f16 (bf16 for bf16 inputs) after every block of 64
                                                                            a row of > 4 keys, or f32
    scores_in_half         S rounded to f16 (bf16 for bf16 inputs) before the softmax      a row of >= 2 keys
    last_kv_block_dropped  the last block of 64 keys (seq_k <= 64: the last key) ignored   a row allows one
    lse_off_by_max         lse = log l (the max not added back)             return_lse, a row max != 0
    kv_cache_wrong_row     batch b masked with batch (b + 1) % batch's length  kv_lengths, the masks differ

QUANTIZED (i8, rocMLIR's quantized attention, docs/concepts/lowbit-attention.md): rocMLIR's arithmetic with one step
changed (quantized_variant). Correct: like_rocmlir (the contract's steps), fma_scale_bias (score scale and bias
in one f32 step, rocMLIR's newer host reference). Wrong: i16_accumulator, quant_scale_twice, quant_scale_missing,
bias_missing, zero_point_missing, softmax_in_f16.

FP8: fp8_k_read_as_e5m2, torch's kernel with K's bytes read as the other fp8 format.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Literal, Mapping, NamedTuple

import torch

from e2egen.runner.lowbit import wrap_to_int32
from e2egen.runner.ops.attention.attention_math import allowed_keys, expand_kv, scores_float64
from e2egen.runner.ops.attention.kernels import contract_params, torch_attention
from e2egen.runner.ops.attention.params import AttentionParams

DROPPED_BLOCK = 64  # last_kv_block_dropped: the size of the KV block it loses
LOWP_CHUNK = 4  # pv_f16_accumulation: keys summed in f32 before each rounding of the running sum


# -- the call --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Call:
    """One call's arguments, with its masks: what every kernel below starts from."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    params: AttentionParams
    score_scale: torch.Tensor | None
    score_bias: torch.Tensor | None
    return_lse: bool

    @property
    def dtype(self) -> torch.dtype:
        return self.q.dtype

    def allowed(self, params: AttentionParams | None = None) -> torch.Tensor | None:
        return allowed_keys(params or self.params, self.q.device)


def attention_kernel(body: Callable[[Call], tuple[torch.Tensor, torch.Tensor]]) -> Callable[..., object]:
    """A kernel under the contract from body(call) -> (o in f32, lse in f32)."""

    def kernel(q, k, v, *, scale, causal=False, align="top-left", window=None, kv_lengths=None, prefix_offset=None,
               score_scale=None, score_bias=None, return_lse=False, look_back=None):
        params = contract_params(q, k, v, scale, causal, align, window, kv_lengths, prefix_offset, look_back)
        o, lse = body(Call(q, k, v, params, score_scale, score_bias, return_lse))
        o = o.to(q.dtype)
        return (o, lse.to(torch.float32)) if return_lse else o

    kernel.__name__ = body.__name__
    kernel.__doc__ = body.__doc__
    return kernel


# -- the pieces ----------------------------------------------------------------------------------------
CALL_MASK = "the call's mask"  # scores_f32's default: mask with the call's own allowed keys


def scores_f32(call: Call, *, scale: float | None = None, allowed: torch.Tensor | None | str = CALL_MASK,
               kv_heads: torch.Tensor | None = None) -> torch.Tensor:
    """S in f32 from the dtype's q and k, -inf where `allowed` is False (None: no mask; default: the call's
    mask). `scale` replaces the softmax scale; `kv_heads` picks the kv head of each q head."""
    k = _kv(call.k, call.params, kv_heads)
    s = torch.matmul(call.q.float(), k.float().mT) * (call.params.softmax_scale if scale is None else scale)
    if call.score_scale is not None:
        s = s * call.score_scale.float()
    if call.score_bias is not None:
        s = s + call.score_bias.float()
    mask = call.allowed() if allowed is CALL_MASK else allowed
    return s if mask is None else s.masked_fill(~mask, -math.inf)


def values(call: Call, kv_heads: torch.Tensor | None = None) -> torch.Tensor:
    """V with one head per q head (in the dtype)."""
    return _kv(call.v, call.params, kv_heads)


def _kv(t: torch.Tensor, params: AttentionParams, kv_heads: torch.Tensor | None) -> torch.Tensor:
    return expand_kv(t, params.group) if kv_heads is None else t.index_select(1, kv_heads)


def _safe(m: torch.Tensor) -> torch.Tensor:
    """A running max usable in exp(s - m): 0 where the row has no allowed key yet."""
    return torch.where(torch.isneginf(m), 0.0, m)


def flash(s: torch.Tensor, v: torch.Tensor, dtype: torch.dtype, block: int
          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Online softmax over KV blocks of `block` keys, in s's format (the compute format, f32), P rounded to
    `dtype` before P·V: (unnormalised accumulator, running max m, row sum l of the unrounded P)."""
    compute, rows = s.dtype, s.shape[:-1]
    m = torch.full((*rows, 1), -math.inf, dtype=compute, device=s.device)
    l = torch.zeros((*rows, 1), dtype=compute, device=s.device)
    acc = torch.zeros((*rows, v.shape[-1]), dtype=compute, device=s.device)
    for start in range(0, s.shape[-1], block):
        s_blk = s[..., start:start + block]
        m_new = torch.maximum(m, s_blk.amax(dim=-1, keepdim=True))
        alpha = torch.exp(m - _safe(m_new))  # 0 while the row was empty (exp(-inf))
        p = torch.exp(s_blk - _safe(m_new))
        l = l * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + torch.matmul(p.to(dtype).to(compute), v[..., start:start + block, :].to(compute))
        m = m_new
    return acc, m, l


def normalise(acc: torch.Tensor, m: torch.Tensor, l: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(o = acc / l, lse = m + log l); a row with l = 0 (fully masked) gives o = 0, lse = -inf."""
    empty = l == 0
    o = torch.where(empty, 0.0, acc / torch.where(empty, 1.0, l))
    lse = torch.where(empty, -math.inf, _safe(m) + torch.log(torch.where(empty, 1.0, l)))
    return o, lse.squeeze(-1)


def split_kv(s: torch.Tensor, v: torch.Tensor, dtype: torch.dtype, splits: int, block: int = 64
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """KV cut into `splits` contiguous parts, a flash pass each (o_i divided by its own l_i, lse_i), combined:
    lse = log Σ exp(lse_i), o = Σ exp(lse_i - lse)·o_i (an empty part has lse_i = -inf: weight 0)."""
    size = math.ceil(s.shape[-1] / splits)
    parts = [normalise(*flash(s[..., i:i + size], v[..., i:i + size, :], dtype, block))
             for i in range(0, s.shape[-1], size)]
    lses = torch.stack([lse for _, lse in parts])  # (splits, b, h, sq)
    lse = torch.logsumexp(lses, dim=0)
    weights = torch.exp(lses - torch.where(torch.isneginf(lse), 0.0, lse))
    o = sum(w.unsqueeze(-1) * o_i for w, (o_i, _) in zip(weights, parts))
    return o, lse


def one_pass(s: torch.Tensor, v: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """P = exp(s - m) / l normalised in the compute format, rounded to `dtype`, then P·V (no division after)."""
    compute = s.dtype
    m = s.amax(dim=-1, keepdim=True)
    p = torch.exp(s - _safe(m))
    l = p.sum(dim=-1, keepdim=True)
    empty = l == 0
    p_n = (p / torch.where(empty, 1.0, l)).to(dtype).to(compute)
    o = torch.where(empty, 0.0, torch.matmul(p_n, v.to(compute)))
    lse = torch.where(empty, -math.inf, _safe(m) + torch.log(torch.where(empty, 1.0, l)))
    return o, lse.squeeze(-1)


def flash_pass(call: Call, block: int, **score_options) -> tuple[torch.Tensor, torch.Tensor]:
    kv_heads = score_options.get("kv_heads")
    return normalise(*flash(scores_f32(call, **score_options), values(call, kv_heads), call.dtype, block))


# -- CORRECT ------------------------------------------------------------------------------------------
def _flash_kernel(block: int):
    def body(call: Call):
        return flash_pass(call, block)

    body.__name__ = f"flash_b{block}"
    body.__doc__ = f"Online softmax over KV blocks of {block} keys (FlashAttention's forward loop)."
    return attention_kernel(body)


def _split_kernel(splits: int):
    def body(call: Call):
        return split_kv(scores_f32(call), values(call), call.dtype, splits)

    body.__name__ = f"split_kv{splits}"
    body.__doc__ = f"KV cut into {splits} splits, one flash pass each, the partials combined through their LSEs."
    return attention_kernel(body)


def _p_rounded_body(call: Call):
    """One pass: P normalised in f32, rounded to the dtype, then P·V in f32."""
    return one_pass(scores_f32(call), values(call), call.dtype)


_p_rounded_body.__name__ = "p_rounded"

flash_b16 = _flash_kernel(16)
flash_b64 = _flash_kernel(64)
flash_b128 = _flash_kernel(128)
split_kv2 = _split_kernel(2)
split_kv4 = _split_kernel(4)
p_rounded = attention_kernel(_p_rounded_body)

CORRECT: dict[str, Callable[..., object]] = {
    "flash_b16": flash_b16, "flash_b64": flash_b64, "flash_b128": flash_b128,
    "split_kv2": split_kv2, "split_kv4": split_kv4, "p_rounded": p_rounded,
}


# -- WRONG ------------------------------------------------------------------------------------------------
class WrongKernel(NamedTuple):
    kernel: Callable[..., object]
    bug: str
    shows: Callable[[object, Mapping[str, torch.Tensor]], bool]  # (problem, inputs64) -> judged on this case?


def _allowed_or_all(params: AttentionParams, device: torch.device = torch.device("cpu")) -> torch.Tensor:
    mask = allowed_keys(params, device)
    full = (params.batch, 1, params.seq_q, params.seq_k)
    return torch.ones(full, dtype=torch.bool, device=device) if mask is None else mask.expand(full)


def _masks_differ(params: AttentionParams, other: AttentionParams) -> bool:
    return bool((_allowed_or_all(params) != _allowed_or_all(other)).any())


def _shifted(params: AttentionParams) -> AttentionParams:
    """The diagonal one key later: every o[b] + 1 (causal and window bounds move; kv_lengths do not)."""
    offsets = params.prefix_offset or (0,) * params.batch
    return replace(params, prefix_offset=tuple(o + 1 for o in offsets))


def _rolled(params: AttentionParams) -> AttentionParams:
    """Batch b with batch (b + 1) % batch's KV length."""
    lengths = params.kv_lengths
    return replace(params, kv_lengths=tuple(lengths[(b + 1) % params.batch] for b in range(params.batch)))


def _dropped_from(seq_k: int) -> int:
    """The first key last_kv_block_dropped ignores."""
    return seq_k - 1 if seq_k <= DROPPED_BLOCK else DROPPED_BLOCK * ((seq_k - 1) // DROPPED_BLOCK)


def _half_of(dtype: torch.dtype) -> torch.dtype:
    return torch.bfloat16 if dtype == torch.bfloat16 else torch.float16


def _no_max_subtraction(call: Call):
    """exp(s) without subtracting the row max: P = exp(s) overflows f32 (s > 88.7), or the dtype when P is
    rounded to it (f16: s > 11.1)."""
    s = scores_f32(call)
    p = torch.exp(s)
    l = p.sum(dim=-1, keepdim=True)
    acc = torch.matmul(p.to(call.dtype).float(), values(call).float())
    return normalise(acc, torch.zeros_like(l), l)


def _mask_off_by_one(call: Call):
    """The causal / window diagonal one key late (j <= i + o + 1), for either alignment."""
    return flash_pass(call, 64, allowed=call.allowed(_shifted(call.params)))


def _wrong_gqa_mapping(call: Call):
    """q head h reads kv head h % heads_kv instead of h // (heads_q / heads_kv)."""
    heads = torch.arange(call.params.heads_q, device=call.q.device) % call.params.heads_kv
    return flash_pass(call, 64, kv_heads=heads)


def _scale_twice(call: Call):
    """The softmax scale applied twice (scale² · Q·Kᵀ)."""
    return flash_pass(call, 64, scale=call.params.softmax_scale ** 2)


def _scale_missing(call: Call):
    """The softmax scale left out (Q·Kᵀ unscaled)."""
    return flash_pass(call, 64, scale=1.0)


def _pv_f16_accumulation(call: Call):
    """P·V summed into a half-precision running sum: LOWP_CHUNK keys at a time in f32, the sum rounded to f16
    (to bf16 for bf16 inputs) after each chunk."""
    s, v = scores_f32(call), values(call).float()
    m = s.amax(dim=-1, keepdim=True)
    p = torch.exp(s - _safe(m))
    l = p.sum(dim=-1, keepdim=True)
    p_t = p.to(call.dtype).float()
    half = _half_of(call.dtype)
    acc = torch.zeros((*s.shape[:-1], v.shape[-1]), dtype=half, device=s.device)
    for start in range(0, s.shape[-1], LOWP_CHUNK):
        chunk = torch.matmul(p_t[..., start:start + LOWP_CHUNK], v[..., start:start + LOWP_CHUNK, :])
        acc = (acc.float() + chunk).to(half)
    return normalise(acc.float(), m, l)


def _row_sum_in_half(call: Call):
    """flash_b64 with its running row sum l stored in f16 (bf16 for bf16 inputs) after every block."""
    s, v = scores_f32(call), values(call)
    half, compute = _half_of(call.dtype), s.dtype
    rows = s.shape[:-1]
    m = torch.full((*rows, 1), -math.inf, dtype=compute, device=s.device)
    l = torch.zeros((*rows, 1), dtype=compute, device=s.device)
    acc = torch.zeros((*rows, v.shape[-1]), dtype=compute, device=s.device)
    for start in range(0, s.shape[-1], 64):
        s_blk = s[..., start:start + 64]
        m_new = torch.maximum(m, s_blk.amax(dim=-1, keepdim=True))
        alpha = torch.exp(m - _safe(m_new))
        p = torch.exp(s_blk - _safe(m_new))
        l = (l * alpha + p.sum(dim=-1, keepdim=True)).to(half).to(compute)
        acc = acc * alpha + torch.matmul(p.to(call.dtype).to(compute), v[..., start:start + 64, :].to(compute))
        m = m_new
    return normalise(acc, m, l)


def _scores_in_half(call: Call):
    """flash_b64 with the scores S = Q·Kᵀ·scale rounded to f16 (bf16 for bf16 inputs) before the softmax, as ONNX
    Runtime's f16 Attention on the CPU computes them."""
    s = scores_f32(call).to(_half_of(call.dtype)).to(torch.float32)
    return normalise(*flash(s, values(call), call.dtype, 64))


def _last_kv_block_dropped(call: Call):
    """The loop over KV blocks of 64 stops one block early (seq_k <= 64: the last key is left out)."""
    params = call.params
    keep = torch.arange(params.seq_k, device=call.q.device) < _dropped_from(params.seq_k)
    return flash_pass(call, 64, allowed=_allowed_or_all(params, call.q.device) & keep)


def _lse_off_by_max(call: Call):
    """lse = log l: the running max m is not added back."""
    acc, m, l = flash(scores_f32(call), values(call), call.dtype, 64)
    o, _ = normalise(acc, m, l)
    _, lse = normalise(acc, torch.zeros_like(m), l)
    return o, lse


def _kv_cache_wrong_row(call: Call):
    """Batch b masks its keys with batch (b + 1) % batch's KV length (a KV-cache row off by one)."""
    params = call.params
    return flash_pass(call, 64, allowed=call.allowed(_rolled(params)) if params.kv_lengths else CALL_MASK)


# -- which cases show each bug ------------------------------------------------------------------------------
def _exact_scores(problem, inputs64) -> tuple[torch.Tensor, torch.Tensor]:
    """(S in float64, the allowed mask expanded to S's shape)."""
    params = problem.params
    s = scores_float64(params, inputs64)
    return s, _allowed_or_all(params).expand_as(s)


def _shows_overflow(problem, inputs64) -> bool:
    """Cases where exp(s) without the max overflows: the largest allowed score above ln(max) of the format P is
    rounded to (f16 65504: 11.09; bf16 and f32: 88.72), or Σ exp(s) above f32's max, or every exp(s) of a row
    below f32's smallest subnormal."""
    s, allowed = _exact_scores(problem, inputs64)
    s = s.masked_fill(~allowed, -math.inf)
    p_max = {"f16": 65504.0}.get(problem.dtype, torch.finfo(torch.float32).max)
    top = s.amax(dim=-1)
    lse = torch.logsumexp(s, dim=-1)
    nonempty = allowed.any(dim=-1)
    underflow = nonempty & (top < math.log(2.0 ** -149))
    return bool((top > math.log(p_max)).any() or (lse > math.log(torch.finfo(torch.float32).max)).any()
                or underflow.any())


def _shows_diagonal(problem, inputs64) -> bool:
    """Causal or windowed cases whose allowed keys move with the diagonal."""
    params = problem.params
    return (params.causal or params.window is not None) and _masks_differ(params, _shifted(params))


def _shows_gqa(problem, inputs64) -> bool:
    """GQA with more than one kv head (1 < heads_kv < heads_q); MHA and MQA map every head the same way."""
    return 1 < problem.params.heads_kv < problem.params.heads_q


def _scale_shows(wrong_scale: Callable[[float], float]):
    def shows(problem, inputs64) -> bool:
        params = problem.params
        if wrong_scale(params.softmax_scale) == params.softmax_scale:
            return False
        counts = _allowed_or_all(params).sum(dim=-1)
        return bool((counts >= 2).any() or (params.return_lse and (counts >= 1).any()))

    shows.__doc__ = ("Cases with a row of two or more allowed keys (one key gets weight 1 whatever its score), "
                     "or any allowed key when the lse is returned.")
    return shows


def _shows_accumulation(problem, inputs64) -> bool:
    """Cases where the half-precision running sum is rounded after adding to it (a row of more than LOWP_CHUNK
    allowed keys), or any f32 case (one rounding of an f32 sum to f16 already shows)."""
    counts = _allowed_or_all(problem.params).sum(dim=-1)
    return problem.dtype == "f32" or bool((counts > LOWP_CHUNK).any())


def _shows_two_keys(problem, inputs64) -> bool:
    """Cases where a row allows two keys, whose rounded scores move its weights."""
    return bool((_allowed_or_all(problem.params).sum(dim=-1) >= 2).any())


def _shows_dropped(problem, inputs64) -> bool:
    """Cases where some row allows a key of the dropped block."""
    params = problem.params
    return bool(_allowed_or_all(params)[..., _dropped_from(params.seq_k):].any())


def _shows_lse(problem, inputs64) -> bool:
    """Cases returning the lse with a row whose max score is not 0."""
    if not problem.params.return_lse:
        return False
    s, allowed = _exact_scores(problem, inputs64)
    top = s.masked_fill(~allowed, -math.inf).amax(dim=-1)
    return bool((torch.isfinite(top) & (top != 0)).any())


def _shows_kv_row(problem, inputs64) -> bool:
    """Cases with kv_lengths where batch b and batch (b + 1) % batch allow different keys."""
    params = problem.params
    return params.kv_lengths is not None and params.batch > 1 and _masks_differ(params, _rolled(params))


def _wrong(body, shows) -> WrongKernel:
    body.__name__ = body.__name__.lstrip("_")
    bug = " ".join(body.__doc__.split())
    return WrongKernel(attention_kernel(body), bug, shows)


WRONG: dict[str, WrongKernel] = {
    "no_max_subtraction": _wrong(_no_max_subtraction, _shows_overflow),
    "mask_off_by_one": _wrong(_mask_off_by_one, _shows_diagonal),
    "wrong_gqa_mapping": _wrong(_wrong_gqa_mapping, _shows_gqa),
    "scale_twice": _wrong(_scale_twice, _scale_shows(lambda scale: scale * scale)),
    "scale_missing": _wrong(_scale_missing, _scale_shows(lambda scale: 1.0)),
    "pv_f16_accumulation": _wrong(_pv_f16_accumulation, _shows_accumulation),
    "row_sum_in_half": _wrong(_row_sum_in_half, _shows_accumulation),
    "scores_in_half": _wrong(_scores_in_half, _shows_two_keys),
    "last_kv_block_dropped": _wrong(_last_kv_block_dropped, _shows_dropped),
    "lse_off_by_max": _wrong(_lse_off_by_max, _shows_lse),
    "kv_cache_wrong_row": _wrong(_kv_cache_wrong_row, _shows_kv_row),
}

# the module-level names, for impl="e2egen.runner.ops.attention.variants:<name>"
no_max_subtraction = WRONG["no_max_subtraction"].kernel
mask_off_by_one = WRONG["mask_off_by_one"].kernel
wrong_gqa_mapping = WRONG["wrong_gqa_mapping"].kernel
scale_twice = WRONG["scale_twice"].kernel
scale_missing = WRONG["scale_missing"].kernel
pv_f16_accumulation = WRONG["pv_f16_accumulation"].kernel
row_sum_in_half = WRONG["row_sum_in_half"].kernel
scores_in_half = WRONG["scores_in_half"].kernel
last_kv_block_dropped = WRONG["last_kv_block_dropped"].kernel
lse_off_by_max = WRONG["lse_off_by_max"].kernel
kv_cache_wrong_row = WRONG["kv_cache_wrong_row"].kernel


# -- QUANTIZED: rocMLIR's i8 attention with one step changed ---------------------------------------------
def quantized_variant(*, accumulate: Literal["i32", "i16"] = "i32", scale_times: int = 1, bias: bool = True,
                      zero_point: bool = True, softmax: Literal["f32", "f16"] = "f32",
                      fma: bool = False) -> Callable[..., object]:
    """rocMLIR's quantized attention (kernels.quantized_attention's steps) with one step changed: a 16-bit
    accumulator (accumulate "i16"), quant_scale applied scale_times, the score bias or the zero point left out,
    the softmax in f16, or the score scale and bias in one f32 step (fma)."""
    def kernel(q, k, v, *, scale, causal=False, align="top-left", window=None, kv_lengths=None, prefix_offset=None,
               score_scale=None, score_bias=None, return_lse=False, quant_bias=None, quant_scale=None, look_back=None):
        params = contract_params(q, k, v, scale, causal, align, window, kv_lengths, prefix_offset, look_back)
        allowed = allowed_keys(params, q.device)
        products = torch.matmul(q.double(), expand_kv(k, params.group).double().mT)
        if accumulate == "i16":  # a 16-bit accumulator wraps
            low = torch.round(products).to(torch.int64) & 0xFFFF
            integer = torch.where(low >= 2 ** 15, low - 2 ** 16, low).double()
        else:
            integer = wrap_to_int32(products).double()
        if zero_point:
            integer = integer - quant_bias.double()
        scores = integer.half()
        for _ in range(scale_times):
            scores = scores * quant_scale
        if fma:  # score_scale and score_bias in one f32 step, one rounding to f16 (rocMLIR's newer host reference)
            wide = scores.float()
            if score_scale is not None:
                wide = wide * score_scale.float()
            if score_bias is not None and bias:
                wide = wide + score_bias.float()
            scores = wide.half()
        else:
            if score_scale is not None:
                scores = scores * score_scale
            if score_bias is not None and bias:
                scores = scores + score_bias
        work = torch.float32 if softmax == "f32" else torch.float16
        scores = scores.to(work)
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        row_max = scores.amax(dim=-1, keepdim=True)
        weights = torch.exp(scores - row_max)
        if softmax == "f32":
            row_sum = weights.sum(dim=-1, keepdim=True)
        else:  # a running sum held in f16, as an online softmax in f16 keeps it
            row_sum = torch.zeros_like(row_max)
            for key in range(weights.shape[-1]):
                row_sum = row_sum + weights[..., key:key + 1]
        p = weights / row_sum
        o = torch.matmul(p.half().float(), expand_kv(v, params.group).float()).half()
        lse = (row_max + torch.log(row_sum)).squeeze(-1)
        return (o, lse.half()) if return_lse else o

    return kernel


QUANTIZED: dict[str, Callable[..., object]] = {
    "like_rocmlir": quantized_variant(),
    "fma_scale_bias": quantized_variant(fma=True),
    "i16_accumulator": quantized_variant(accumulate="i16"),
    "quant_scale_twice": quantized_variant(scale_times=2),
    "quant_scale_missing": quantized_variant(scale_times=0),
    "bias_missing": quantized_variant(bias=False),
    "zero_point_missing": quantized_variant(zero_point=False),
    "softmax_in_f16": quantized_variant(softmax="f16"),
}
like_rocmlir = QUANTIZED["like_rocmlir"]
fma_scale_bias = QUANTIZED["fma_scale_bias"]
i16_accumulator = QUANTIZED["i16_accumulator"]
quant_scale_twice = QUANTIZED["quant_scale_twice"]
quant_scale_missing = QUANTIZED["quant_scale_missing"]
bias_missing = QUANTIZED["bias_missing"]
zero_point_missing = QUANTIZED["zero_point_missing"]
softmax_in_f16 = QUANTIZED["softmax_in_f16"]


# -- FP8 ------------------------------------------------------------------------------------------------------
def fp8_k_read_as_e5m2(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **keywords: object) -> object:
    """K's bytes read as the other fp8 format: a wrong fp8 kernel."""
    return torch_attention(q, k.view(torch.uint8).view(torch.float8_e5m2), v, **keywords)
