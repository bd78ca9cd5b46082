"""Kernels for the low-bit evidence (studies/lowbit_evidence.py), each through the op's plug-in contract.

scaled_gemm (runner/ops/scaled_gemm/spec.py): f(a, b, scale_a, scale_b, *, out_dtype, scaling, block) -> c. The
elements are fp8 tensors or fp4 packed two a byte along K; the scales e8m0 (torch.float8_e8m0fnu) or f32, of
the logical shapes in the op's table, in whatever storage the layout gives them. gemm: f(a, b) or
f(a, b, out_dtype=...) with fp8 or i8 tensors.

CORRECT (another order or structure of the same arithmetic):
    scaled_f32_dequant      each operand dequantized in f32, one f32 matmul (the wrong kernels' bug-free twin)
    scaled_f32_reordered    each operand dequantized in f32, then K summed in chunks of 24 in f32, the
                            chunks added last first (chunk edges straddle the scale blocks)
    scaled_promoted_blocks  the DeepSeek-V3 "promotion" structure: each K block's partial sum of raw
                            element products in f32, multiplied by sa·sb (f32), added to an f32 total
    fp8_f32                 plain fp8 gemm: one f32 matmul (the fp8 wrong kernels' bug-free twin)
    fp8_split_k             plain fp8 gemm: K cut in 4 slices, each an f32 matmul, the slices added in f32
    i8_int32, i8_int64      plain i8 gemm: an int32 accumulator (torch's integer matmul), or int64
                            then converted to int32

WRONG (one bug each):
    scaled_scales_swapped   the epilogue applies scale_b per output row and scale_a per output column
                            (the per-row/per-column mix-up; the shapes only broadcast when m = n)
    scaled_next_block_scale A's K block j takes the scale of block j + 1 (the last wraps to block 0)
    scaled_block_edge_off_by_one  element k takes the scale of block (k + 1) // blk (clamped to the last):
                            the last element of every block reads the next block's scale (A and B)
    scaled_e8m0_bias_126    E8M0 scales decoded as 2^(code - 126): every e8m0 scale doubled
    scaled_fnuz_read_as_fn  FNUZ elements decoded with the OCP format's rules and the bias fixed by a
                            factor 1/2: right everywhere except the codes the OCP format reserves (e4m3:
                            ±max = 0x7F/0xFF read as NaN; e5m2: the top binade read as inf/NaN)
    scaled_f16_dequant      element · scale dequantized into f16 (an f16 MMA prologue) with no range
                            handling: exact for e8m0 scales inside f16's range, inf beyond 65504 (the
                            conversion that gives inf where the exact value is finite)
    scaled_f16_accumulator  the dequantized products added one by one into an f16 running sum
    fp8_fnuz_read_as_fn, fp8_f16_accumulator   the same two bugs in a plain fp8 gemm
    i8_i16_accumulator      plain i8 gemm with an i16 accumulator (wraps modulo 2^16)
"""
from __future__ import annotations

import torch

from e2egen.runner import fp4

F32 = torch.float32
_FNUZ_AS_OCP = {torch.float8_e4m3fnuz: torch.float8_e4m3fn, torch.float8_e5m2fnuz: torch.float8_e5m2}


# -- reading the operands ------------------------------------------------------------------------------
def _elements(x: torch.Tensor, k_dim: int, *, fnuz_as_fn: bool = False) -> torch.Tensor:
    """The elements' values in f32 (exact), logical shape; fp4 unpacked along K."""
    if x.dtype == fp4.PACKED:
        return fp4.unpack_along(x, k_dim)
    if fnuz_as_fn and x.dtype in _FNUZ_AS_OCP:
        # the OCP twin's decode: the bias is one smaller, so every value reads twice too large; halve it
        return x.view(torch.uint8).view(_FNUZ_AS_OCP[x.dtype]).to(F32) * 0.5
    return x.to(F32)


def _scales(s: torch.Tensor, *, e8m0_bias: int = 127) -> torch.Tensor:
    """The scales' values in f32 (logical shape, whatever the storage)."""
    if s.dtype == torch.float8_e8m0fnu and e8m0_bias != 127:
        codes = s.view(torch.uint8).to(torch.int32)
        return torch.ldexp(torch.ones(s.shape, dtype=F32), (codes - e8m0_bias).to(F32))
    return s.to(F32)


def _block_shape(scaling: str, block: int, operand: str, rows: int, cols: int) -> tuple[int, int]:
    """(rows, cols) of the elements one scale covers (the op's table)."""
    if scaling == "tensor":
        return rows, cols
    if scaling == "rowwise":
        return (1, cols) if operand == "a" else (rows, 1)
    if scaling == "blockwise":
        return (1, block) if operand == "a" else (block, block)
    return (1, block) if operand == "a" else (block, 1)


def _expanded(scales: torch.Tensor, rows: int, cols: int, block_rows: int, block_cols: int) -> torch.Tensor:
    full = scales.repeat_interleave(block_rows, dim=-2).repeat_interleave(block_cols, dim=-1)
    return full[..., :rows, :cols]


def _dequantized(a, b, scale_a, scale_b, scaling, block, *, dtype=F32, fnuz_as_fn=False, e8m0_bias=127,
                 a_block_of_k=None, b_block_of_k=None):
    """A ⊙ scale_a and B ⊙ scale_b, each product computed in f32 then stored in `dtype`.
    a_block_of_k / b_block_of_k: a function k -> the K block whose scale element k takes (a bug's hook)."""
    a_el, b_el = _elements(a, -1, fnuz_as_fn=fnuz_as_fn), _elements(b, -2, fnuz_as_fn=fnuz_as_fn)
    sa, sb = _scales(scale_a, e8m0_bias=e8m0_bias), _scales(scale_b, e8m0_bias=e8m0_bias)
    m, k = a_el.shape[-2:]
    n = b_el.shape[-1]
    a_rows, a_cols = _block_shape(scaling, block, "a", m, k)
    b_rows, b_cols = _block_shape(scaling, block, "b", k, n)
    if a_block_of_k is None:
        full_a = _expanded(sa, m, k, a_rows, a_cols)
    else:
        full_a = _expanded(sa[..., a_block_of_k(k, sa.shape[-1], a_cols)], m, k, a_rows, 1)
    if b_block_of_k is None:
        full_b = _expanded(sb, k, n, b_rows, b_cols)
    else:
        full_b = _expanded(sb[..., b_block_of_k(k, sb.shape[-2], b_rows), :], k, n, 1, b_cols)
    return (a_el * full_a).to(dtype), (b_el * full_b).to(dtype)


def _k_block(scaling: str, block: int, k: int) -> int:
    """The length along K that shares one scale (K itself for tensor and row scales)."""
    return block if scaling in ("blockwise", "mx") else k


# -- scaled_gemm: correct -------------------------------------------------------------------------------
def scaled_f32_dequant(a, b, scale_a, scale_b, *, out_dtype, scaling, block):
    a32, b32 = _dequantized(a, b, scale_a, scale_b, scaling, block)
    return (a32 @ b32).to(out_dtype)


def scaled_f32_reordered(a, b, scale_a, scale_b, *, out_dtype, scaling, block):
    a32, b32 = _dequantized(a, b, scale_a, scale_b, scaling, block)
    k = a32.shape[-1]
    total = torch.zeros((*a32.shape[:-1], b32.shape[-1]), dtype=F32)
    for start in reversed(range(0, k, 24)):
        total += a32[..., start:start + 24] @ b32[..., start:start + 24, :]
    return total.to(out_dtype)


def _promoted(a, b, scale_a, scale_b, scaling, block, *, swapped=False):
    """Σ over K blocks of (raw partial sum) · sa · sb, all in f32; swapped: sa per column, sb per row."""
    a_el, b_el = _elements(a, -1), _elements(b, -2)
    sa, sb = _scales(scale_a), _scales(scale_b)
    m, k = a_el.shape[-2:]
    n = b_el.shape[-1]
    a_rows, _ = _block_shape(scaling, block, "a", m, k)
    _, b_cols = _block_shape(scaling, block, "b", k, n)
    step = _k_block(scaling, block, k)
    total = torch.zeros((*a_el.shape[:-1], n), dtype=F32)
    for j, start in enumerate(range(0, k, step)):
        partial = a_el[..., start:start + step] @ b_el[..., start:start + step, :]
        row = sa[..., :, j:j + 1].repeat_interleave(a_rows, dim=-2)[..., :m, :]  # (…, m, 1)
        col = sb[..., j:j + 1, :].repeat_interleave(b_cols, dim=-1)[..., :, :n]  # (…, 1, n)
        if swapped:  # the epilogue indexes scale_a by the output column and scale_b by the output row
            row, col = col.mT, row.mT
        total += partial * (row * col)
    return total


def scaled_promoted_blocks(a, b, scale_a, scale_b, *, out_dtype, scaling, block):
    return _promoted(a, b, scale_a, scale_b, scaling, block).to(out_dtype)


# -- scaled_gemm: wrong ----------------------------------------------------------------------------------
def scaled_scales_swapped(a, b, scale_a, scale_b, *, out_dtype, scaling, block):
    return _promoted(a, b, scale_a, scale_b, scaling, block, swapped=True).to(out_dtype)


def _next_block(k: int, blocks: int, per: int) -> torch.Tensor:
    return (torch.arange(k) // per + 1) % blocks


def _edge_off_by_one(k: int, blocks: int, per: int) -> torch.Tensor:
    return ((torch.arange(k) + 1) // per).clamp(max=blocks - 1)


def scaled_next_block_scale(a, b, scale_a, scale_b, *, out_dtype, scaling, block):
    a32, b32 = _dequantized(a, b, scale_a, scale_b, scaling, block, a_block_of_k=_next_block)
    return (a32 @ b32).to(out_dtype)


def scaled_block_edge_off_by_one(a, b, scale_a, scale_b, *, out_dtype, scaling, block):
    a32, b32 = _dequantized(a, b, scale_a, scale_b, scaling, block, a_block_of_k=_edge_off_by_one,
                            b_block_of_k=_edge_off_by_one)
    return (a32 @ b32).to(out_dtype)


def scaled_e8m0_bias_126(a, b, scale_a, scale_b, *, out_dtype, scaling, block):
    a32, b32 = _dequantized(a, b, scale_a, scale_b, scaling, block, e8m0_bias=126)
    return (a32 @ b32).to(out_dtype)


def scaled_fnuz_read_as_fn(a, b, scale_a, scale_b, *, out_dtype, scaling, block):
    a32, b32 = _dequantized(a, b, scale_a, scale_b, scaling, block, fnuz_as_fn=True)
    return (a32 @ b32).to(out_dtype)


def scaled_f16_dequant(a, b, scale_a, scale_b, *, out_dtype, scaling, block):
    a16, b16 = _dequantized(a, b, scale_a, scale_b, scaling, block, dtype=torch.float16)
    return (a16.to(F32) @ b16.to(F32)).to(out_dtype)  # f16 operands, f32 accumulation


def scaled_f16_accumulator(a, b, scale_a, scale_b, *, out_dtype, scaling, block):
    a32, b32 = _dequantized(a, b, scale_a, scale_b, scaling, block)
    return _f16_running_sum(a32, b32).to(out_dtype)


def _f16_running_sum(a32: torch.Tensor, b32: torch.Tensor) -> torch.Tensor:
    """Each product (exact in f32 for fp8 × e8m0) rounded to f16 and added to an f16 running sum."""
    total = torch.zeros((*a32.shape[:-1], b32.shape[-1]), dtype=torch.float16)
    for kk in range(a32.shape[-1]):
        term = (a32[..., kk:kk + 1] * b32[..., kk:kk + 1, :]).to(torch.float16)
        total = total + term  # f16 + f16 rounds to f16
    return total


# -- plain fp8 gemm ----------------------------------------------------------------------------------------
def _gemm_out(c: torch.Tensor, out_dtype) -> torch.Tensor:
    return c if out_dtype is None else c.to(out_dtype)


def fp8_f32(a, b, out_dtype=None):
    return _gemm_out(_elements(a, -1) @ _elements(b, -2), out_dtype)


def fp8_split_k(a, b, out_dtype=None):
    a32, b32 = _elements(a, -1), _elements(b, -2)
    k = a32.shape[-1]
    step = -(-k // 4)
    slices = [a32[..., s:s + step] @ b32[..., s:s + step, :] for s in range(0, k, step)]
    total = slices[0]
    for part in slices[1:]:
        total = total + part
    return _gemm_out(total, out_dtype)


def fp8_fnuz_read_as_fn(a, b, out_dtype=None):
    return _gemm_out(_elements(a, -1, fnuz_as_fn=True) @ _elements(b, -2, fnuz_as_fn=True), out_dtype)


def fp8_f16_accumulator(a, b, out_dtype=None):
    return _gemm_out(_f16_running_sum(_elements(a, -1), _elements(b, -2)).to(F32), out_dtype)


# -- plain i8 gemm -----------------------------------------------------------------------------------------
def i8_int32(a, b):
    return a.to(torch.int32) @ b.to(torch.int32)


def i8_int64(a, b):
    return (a.to(torch.int64) @ b.to(torch.int64)).to(torch.int32)


def i8_i16_accumulator(a, b):
    total = torch.zeros((*a.shape[:-1], b.shape[-1]), dtype=torch.int16)
    for kk in range(a.shape[-1]):
        total = total + a[..., kk:kk + 1].to(torch.int16) * b[..., kk:kk + 1, :].to(torch.int16)  # wraps
    return total.to(torch.int32)
