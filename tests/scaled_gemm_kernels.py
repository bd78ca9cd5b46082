"""Scaled-gemm kernels for tests/test_scaled_gemm.py: a correct one that sums in another order, and
wrong ones with the indexing bugs structured inputs are there to catch. Each follows the contract of
runner/ops/scaled_gemm/spec.py: f(a, b, scale_a, scale_b, *, out_dtype, scaling, block)."""
from __future__ import annotations

import torch

from e2egen.runner import fp4


def _values(elements: torch.Tensor, k_dim: int) -> torch.Tensor:
    return fp4.unpack_along(elements, k_dim).double() if elements.dtype == fp4.PACKED else elements.double()


def _expand(scales: torch.Tensor, rows: int, cols: int, block_rows: int, block_cols: int) -> torch.Tensor:
    full = scales.double().repeat_interleave(block_rows, -2).repeat_interleave(block_cols, -1)
    return full[..., :rows, :cols]


def _blocks(scaling: str, block: int, m: int, n: int, k: int) -> tuple[tuple[int, int], tuple[int, int]]:
    return {"tensor": ((m, k), (k, n)), "rowwise": ((1, k), (k, 1)), "blockwise": ((1, block), (block, block)),
            "mx": ((1, block), (block, 1))}[scaling]


def _scaled(a, b, scale_a, scale_b, scaling, block, *, shift_a_blocks=0):
    a64, b64 = _values(a, -1), _values(b, -2)
    m, k = a64.shape[-2:]
    n = b64.shape[-1]
    block_a, block_b = _blocks(scaling, block, m, n, k)
    if shift_a_blocks:
        scale_a = torch.roll(scale_a.double(), shift_a_blocks, dims=-1)
    return a64 * _expand(scale_a, m, k, *block_a), b64 * _expand(scale_b, k, n, *block_b)


def blocked_in_reverse(a, b, scale_a, scale_b, *, out_dtype, scaling, block):
    """Correct: per-block partial sums in f32, scaled, then added last block first."""
    a64, b64 = _scaled(a, b, scale_a, scale_b, scaling, block)
    a32, b32 = a64.float(), b64.float()
    k = a32.shape[-1]
    step = block or 32
    total = torch.zeros((*a32.shape[:-1], b32.shape[-1]), dtype=torch.float32)
    for start in reversed(range(0, k, step)):
        total += a32[..., start:start + step] @ b32[..., start:start + step, :]
    return total.to(out_dtype)


def wrong_block_scale(a, b, scale_a, scale_b, *, out_dtype, scaling, block):
    """A's scales read one block along K too far (the classic block -> scale indexing bug)."""
    a64, b64 = _scaled(a, b, scale_a, scale_b, scaling, block, shift_a_blocks=1)
    return (a64.float() @ b64.float()).to(out_dtype)


def scale_b_untransposed(a, b, scale_a, scale_b, *, out_dtype, scaling, block):
    """B's scales read as if stored K-contiguous (n, ⌈k/blk⌉) whatever their strides say: right for the
    default storage, wrong for a row-major scale_b (rocMLIR's -transScaleB)."""
    memory = scale_b.double().reshape(-1) if scale_b.is_contiguous() else scale_b.double().mT.contiguous().reshape(-1)
    blocks_k, n = scale_b.shape[-2:]
    misread = memory.view(n, blocks_k).mT
    a64, b64 = _scaled(a, b, scale_a, misread, scaling, block)
    return (a64.float() @ b64.float()).to(out_dtype)


def e8m0_bias_off_by_one(a, b, scale_a, scale_b, *, out_dtype, scaling, block):
    """E8M0 codes decoded with bias 126 instead of 127 (every scale doubled)."""
    def decode(scales):
        if scales.dtype != torch.float8_e8m0fnu:
            return scales
        return torch.ldexp(torch.ones(scales.shape, dtype=torch.float64), scales.view(torch.uint8).to(torch.int64) - 126)
    a64, b64 = _scaled(a, b, decode(scale_a), decode(scale_b), scaling, block)
    return (a64.float() @ b64.float()).to(out_dtype)


def accumulates_in_f16(a, b, scale_a, scale_b, *, out_dtype, scaling, block):
    """Each term rounded to f16 and added to an f16 running sum (what an f16 accumulator does)."""
    a64, b64 = _scaled(a, b, scale_a, scale_b, scaling, block)
    total = torch.zeros((*a64.shape[:-1], b64.shape[-1]), dtype=torch.float16)
    for kk in range(a64.shape[-1]):
        total = (total.double() + (a64[..., kk:kk + 1] * b64[..., kk:kk + 1, :]).half().double()).half()
    return total.to(out_dtype)
