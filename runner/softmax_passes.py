"""Attention's bound, per score, in one numba pass; runner/ops/attention/bound.py's torch ops are its definition.

For every score j of a row (query i of one head: p_j its exact softmax weight, s_j its score, -inf where
masked, m the row's largest score), the bound needs two score errors (docs/concepts/attention-bound.md, step 1)

    E1_j = (((Ŝ_j + a)·W)·c)·|τ_j|     the Q·Kᵀ product sum's: upper_matmul's sum Ŝ before its widening (+a,
                                      ·W), times |scale| and the score scale's |τ_j| (1 without one); or given
                                      as it is (quantized attention's change factors: a = 0, W = c = 1)
    E2_j = ((|s_j| + |β_j|)·k + 2·((|s_j| + 2|m|) + log seq_k)) + 2·EXP_ULPS     the roundings: k of them
                                      in the scores (scale, score scale, bias β_j, 0 without one), |s_j| 0
                                      where masked

and from them p_j·E1_j, p_j·E2_j, p_j and p_j², each rounded up to f32 for its product with |V| (V² for
p²: upper_matmul), and per row Σ p·E1, Σ p·E2, Σ p² and the least allowed score. In torch's ops that is
about twenty passes over the (batch, heads_q, seq_q, seq_k) scores with their float64 temporaries; here
one pass, which writes only the four f32 operands. The three that meet |V| are stacked as rows of one
matrix per kv head (`stacked`: the rows of the q heads that read a kv head, as ops.attention.attention_math.matmul_kv
stacks them, then the same for E2, then for p), so that one product serves all three.

Every element is the torch definition's float64 operations in its order, so the operands are the same bits
(tests/ops/attention/test_softmax_passes.py). The row sums are added in another order than torch's sum: each is a float64
sum of at most seq_k non-negative terms, within seq_k·2^-53 of the exact one either way, as the torch path's;
the bound takes them as they are, a second-order term beside the errors it bounds.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from e2egen.metrics import numba_kernels, threads
from e2egen.metrics.backend import numba_path

__all__ = ["WeightTerms", "weight_terms"]

if numba_kernels.AVAILABLE:
    import numba

    from e2egen.metrics.numba_kernels import (
        align_stack as _align_stack, as_int64 as _bits, as_float64 as _float, as_float32 as _float32)

    from e2egen.runner.upper_matmul import round_up_pattern

    _F64_MAX = np.finfo(np.float64).max
    _MAGNITUDE = (1 << 63) - 1

    @numba.njit(error_model="numpy", fastmath=False)
    def _score_terms(p, s, raw, tau, beta, twice_max, allowance, widening, scale, score_ops, log_keys,
                     argument_roundings, exp_term):
        """(p·E1, p·E2, p², the score as the least-score search reads it) at one score, in the torch
        definition's operations and order. Compiled without the row kernel's reassoc flag, which would be
        free to regroup these products; LLVM inlines it with its flags kept per instruction (as
        fused_numba._scaled_plus_ulp)."""
        finite = 0.0 if s != s else (_F64_MAX if s == np.inf else s)  # torch.nan_to_num's NaN and +inf
        magnitude = 0.0 if s == -np.inf else abs(finite)  # nan_to_num(neginf=0).abs()
        lowest = np.inf if s == -np.inf else finite  # nan_to_num(neginf=inf)
        first = (((np.float64(raw) + allowance) * widening) * scale) * tau  # tau 1 without a score scale: exact
        # beta 0 without a bias: exact; torch's add_(x, alpha=2) may fuse 2·x into the add: exact either way
        second = ((magnitude + beta) * score_ops + ((magnitude + twice_max) + log_keys) * argument_roundings) + exp_term
        return p * first, p * second, p * p, _ordered(lowest)

    @numba.njit(inline="always", error_model="numpy")
    def _flipped(bits):
        """Float bits <-> an int64 in the order of the values (for no NaN): the magnitude bits of a negative
        value inverted; its own inverse."""
        return bits ^ ((bits >> 63) & _MAGNITUDE)

    @numba.njit(inline="always", error_model="numpy")
    def _ordered(x):
        """x as an int64 key in the order of the values. A float minimum in the loop kept LLVM from
        vectorising it (NaN's semantics); an integer one does not."""
        return _flipped(_bits(x))

    @numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc"})
    def _rows(p, scores, row_max, raw, score_scale, bias, stacked, squared, sums, lowest, lo, hi, per_kv, allowance,
              widening, scale, score_ops, log_keys, argument_roundings, exp_term):
        """Rows lo..hi of the module docstring's pass; the largest operand's f32 bits. score_scale and bias may
        be None: numba compiles a version without them, its branches on them pruned (a choice in the loop
        read both arrays, 12 % slower). reassoc lets the row sums vectorise; every other float operation is
        _score_terms' own."""
        _align_stack()
        largest = 0
        for r in range(lo, hi):
            base = (r // per_kv) * 2 * per_kv + r  # its kv head's block of 3·per_kv rows, then its row there
            first, second, weights = stacked[base], stacked[base + per_kv], stacked[base + 2 * per_kv]
            p_r, s_r, raw_r, squared_r = p[r], scores[r], raw[r], squared[r]
            if score_scale is not None:
                tau_r = score_scale[r]
            if bias is not None:
                beta_r = bias[r]
            twice_max = 2.0 * abs(row_max[r])
            sum_first = sum_second = sum_squared = 0.0
            least = _ordered(np.inf)
            for j in range(p_r.shape[0]):
                tau = 1.0
                if score_scale is not None:
                    tau = abs(tau_r[j])
                beta = 0.0
                if bias is not None:
                    beta = abs(beta_r[j])
                by_first, by_second, p_squared, score = _score_terms(
                    p_r[j], s_r[j], raw_r[j], tau, beta, twice_max, allowance, widening, scale, score_ops, log_keys,
                    argument_roundings, exp_term)
                bits_first, bits_second = round_up_pattern(by_first), round_up_pattern(by_second)
                bits_weight, bits_squared = round_up_pattern(p_r[j]), round_up_pattern(p_squared)
                first[j], second[j] = _float32(bits_first), _float32(bits_second)
                weights[j], squared_r[j] = _float32(bits_weight), _float32(bits_squared)
                largest = max(largest, max(max(bits_first, bits_second), max(bits_weight, bits_squared)))
                sum_first += by_first
                sum_second += by_second
                sum_squared += p_squared
                least = min(least, score)
            sums[r, 0], sums[r, 1], sums[r, 2] = sum_first, sum_second, sum_squared
            lowest[r] = _float(_flipped(least))
        return largest


@dataclass(frozen=True, eq=False)
class WeightTerms:
    """What the pass leaves, the shapes those of the scores (b, hq, sq, sk) but for the stacking."""

    stacked: torch.Tensor  # f32 (b, hkv, 3·group·sq, sk): p·E1, p·E2 and p rounded up, by kv head
    squared: torch.Tensor  # f32 (b, hq, sq, sk): p² rounded up
    sum_first: torch.Tensor  # (b, hq, sq, 1) float64: Σ p·E1
    sum_second: torch.Tensor  # Σ p·E2
    sum_squared: torch.Tensor  # Σ p²
    least_score: torch.Tensor  # (b, hq, sq, 1): the least allowed score (+inf where none is)
    largest: float  # the largest f32 operand (NaN or inf where one is)


def weight_terms(p: torch.Tensor, scores: torch.Tensor, row_max: torch.Tensor, raw: torch.Tensor, group: int, *,
                 allowance: float, widening: float, scale: float, score_ops: float, log_keys: float,
                 argument_roundings: float, exp_term: float, score_scale: torch.Tensor | None = None,
                 bias: torch.Tensor | None = None) -> WeightTerms | None:
    """The module docstring's pass, E1 times |score_scale| and |bias| added to |s| in E2 where given; None
    where it does not apply (no numba, not the CPU, E2E_METRICS_BACKEND=torch, or operands not float64
    (raw: f32 or float64) of the scores' shape)."""
    given = [t for t in (score_scale, bias) if t is not None]
    if not (numba_path(p.device) and p.dim() == 4 and p.numel()
            and p.dtype == scores.dtype == row_max.dtype == torch.float64
            and raw.dtype in (torch.float32, torch.float64)
            and p.shape == scores.shape == raw.shape and row_max.shape == p.shape[:-1] + (1,)
            and all(t.dtype == torch.float64 and t.shape == p.shape and t.device == p.device for t in given)):
        return None
    b, hq, sq, sk = p.shape
    rows, per_kv = b * hq * sq, group * sq
    arrays = [t.contiguous().view(rows, sk).numpy() for t in (p, scores, raw)]
    extra = [t.contiguous().view(rows, sk).numpy() if t is not None else None for t in (score_scale, bias)]
    maxima = row_max.contiguous().view(rows).numpy()
    stacked = torch.empty((b, hq // group, 3 * per_kv, sk), dtype=torch.float32)
    squared = torch.empty(p.shape, dtype=torch.float32)
    sums = torch.empty((b, hq, sq, 3), dtype=torch.float64)
    least = torch.empty((b, hq, sq, 1), dtype=torch.float64)
    targets = (stacked.view(-1, sk).numpy(), squared.view(rows, sk).numpy(), sums.view(rows, 3).numpy(),
               least.view(rows).numpy())
    scalars = (per_kv,
               *(float(x) for x in (allowance, widening, scale, score_ops, log_keys, argument_roundings, exp_term)))
    parts = threads.over_chunks(rows, lambda lo, hi: _rows(*arrays[:2], maxima, arrays[2], *extra, *targets, lo, hi,
                                                           *scalars),
                                max(1, threads.SMALLEST_TASK // sk))  # rows of scores per task
    largest = float(np.int32(max(parts)).view(np.float32))
    return WeightTerms(stacked, squared, sums[..., 0:1], sums[..., 1:2], sums[..., 2:3], least, largest)
