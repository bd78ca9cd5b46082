"""The scaled gemm's kernels: torch's own (the default kernel), and the alternates and planted bugs that
studies/lowbit_evidence.py and the family's tests run by impl string
("e2egen.runner.ops.scaled_gemm.kernels:NAME"). Each follows the contract of runner/ops/scaled_gemm/spec.py:
f(a, b, scale_a, scale_b, *, out_dtype, scaling, block) -> c. The elements are fp8 tensors or fp4 packed
two a byte along K; the scales e8m0 (torch.float8_e8m0fnu) or f32, of the logical shapes in the op's
table, in whatever storage the layout gives them.

torch's own scaled gemm (torch_scaled_gemm):

torch._scaled_mm where torch has the recipe (tensor-wise and row-wise f32 scales on 2-d OCP or FNUZ fp8:
on the CPU, and on CUDA GPUs with fp8 tensor cores); elsewhere (block scales, MX, fp4, batches) an f32
emulation: each operand dequantized in f32 (element · scale: exact for e8m0 scales, one rounding for
f32 ones), one f32 matmul, the result converted to out_dtype. The emulation is what a kernel that
dequantizes in its prologue computes; the bound covers both (runner/ops/scaled_gemm/bound.py).

The others read the operands on their own (not through scaling.py), as a team's kernel would:

CORRECT (another order or structure of the same arithmetic):
    scaled_f32_dequant      each operand dequantized in f32, one f32 matmul (the wrong kernels' bug-free twin)
    scaled_f32_reordered    each operand dequantized in f32, then K summed in chunks of 24 in f32, the
                            chunks added last first (chunk edges straddle the scale blocks)
    scaled_promoted_blocks  the DeepSeek-V3 "promotion" structure: each K block's partial sum of raw
                            element products in f32, multiplied by sa·sb (f32), added to an f32 total
    blocked_in_reverse      per-block partial sums in f32, scaled, then added last block first

WRONG (one bug each):
    scaled_scales_swapped   the epilogue applies scale_b per output row and scale_a per output column
                            (the per-row/per-column mix-up; the shapes only broadcast when m = n)
    scaled_next_block_scale A's K block j takes the scale of block j + 1 (the last wraps to block 0)
    wrong_block_scale       A's scales read one block along K off (block j takes block j - 1's, the first
                            the last's)
    scaled_block_edge_off_by_one  element k takes the scale of block (k + 1) // blk (clamped to the last):
                            the last element of every block reads the next block's scale (A and B)
    scale_b_untransposed    B's scales read as if stored K-contiguous whatever their strides say (right for
                            the default storage, wrong for a row-major scale_b: rocMLIR's -transScaleB)
    scaled_e8m0_bias_126    E8M0 scales decoded as 2^(code - 126) in f32: every e8m0 scale doubled
    e8m0_bias_off_by_one    the same decoded in float64 (no overflow past f32's range)
    scaled_fnuz_read_as_fn  FNUZ elements decoded with the OCP format's rules and the bias fixed by a
                            factor 1/2: right everywhere except the codes the OCP format reserves (e4m3:
                            ±max = 0x7F/0xFF read as NaN; e5m2: the top binade read as inf/NaN)
    scaled_f16_dequant      element · scale dequantized into f16 (an f16 MMA prologue) with no range
                            handling: exact for e8m0 scales inside f16's range, inf beyond 65504 (the
                            conversion that gives inf where the exact value is finite)
    scaled_f16_accumulator  the dequantized products (f32) added one by one into an f16 running sum
    accumulates_in_f16      each term (float64) rounded to f16 and added to an f16 running sum
"""
from __future__ import annotations

from typing import Callable

import torch

from e2egen.runner import fp4
from e2egen.runner.lowbit import FLOAT8_STORAGE, elements_f32, f16_running_sum
from e2egen.runner.ops.scaled_gemm.scaling import expand_scales
from e2egen.runner.ops.scaled_gemm.spec import Blocks, Scaling, operand_blocks


def torch_scaled_gemm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                      out_dtype: torch.dtype, scaling: Scaling, block: int) -> torch.Tensor:
    if _scaled_mm_applies(a, b, scale_a, scale_b, scaling):
        b_column_major = b.mT.contiguous().mT  # cuBLAS's fp8 gemm wants B column-major
        try:
            return torch._scaled_mm(a, b_column_major, scale_a.contiguous(), scale_b.contiguous(), out_dtype=out_dtype)
        except RuntimeError:
            # Where torch hands CPU fp8 to oneDNN (AVX-512 FP16 / AMX machines), oneDNN rejects FNUZ fp8
            # ("itensor_view_from_dense expects ... fp8"): torch has no kernel for it there, so emulate as
            # elsewhere. Any other failure is the kernel's own.
            if a.device.type != "cpu" or a.dtype not in _FNUZ:
                raise
    a32 = a.to(torch.float32) if a.dtype != fp4.PACKED else fp4.unpack_along(a, -1)
    b32 = b.to(torch.float32) if b.dtype != fp4.PACKED else fp4.unpack_along(b, -2)
    blocks = operand_blocks(scaling, block, a32.shape[-2], b32.shape[-1], a32.shape[-1])
    return torch.matmul(_scaled(a32, scale_a, blocks["a"]), _scaled(b32, scale_b, blocks["b"])).to(out_dtype)


_FNUZ = (torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)


def _scaled_mm_applies(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                       scaling: Scaling) -> bool:
    if scaling not in ("tensor", "rowwise") or a.dim() != 2:
        return False
    if a.dtype not in FLOAT8_STORAGE or b.dtype not in FLOAT8_STORAGE:
        return False
    if scale_a.dtype != torch.float32 or scale_b.dtype != torch.float32:
        return False
    if a.device.type == "cuda":
        return torch.cuda.get_device_capability(a.device) >= (8, 9) and not torch.version.hip
    return a.device.type == "cpu"


def _scaled(values: torch.Tensor, scales: torch.Tensor, blocks: Blocks) -> torch.Tensor:
    """values · their block's scale, in f32 (exact for e8m0 scales, one rounding for f32 ones)."""
    full = expand_scales(blocks, scales.to(torch.float32))
    short_rows, short_cols = blocks.rows - full.shape[-2], blocks.cols - full.shape[-1]
    if short_rows or short_cols:  # an odd K's fp4 padding (a zero element) may lie past the last block
        full = torch.nn.functional.pad(full, (0, short_cols, 0, short_rows), value=1.0)
    return values * full


# -- alternates and planted bugs: reading the operands (f32) -------------------------------------------
F32 = torch.float32
def _scales(s: torch.Tensor, *, e8m0_bias: int = 127) -> torch.Tensor:
    """The scales' values in f32 (logical shape, whatever the storage)."""
    if s.dtype == torch.float8_e8m0fnu and e8m0_bias != 127:
        codes = s.view(torch.uint8).to(torch.int32)
        return torch.ldexp(torch.ones(s.shape, dtype=F32), (codes - e8m0_bias).to(F32))
    return s.to(F32)


def _block_shape(scaling: Scaling, block: int, operand: str, rows: int, cols: int) -> tuple[int, int]:
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


BlockOfK = Callable[[int, int, int], torch.Tensor]  # (k, blocks, per block) -> the K block each element reads


def _dequantized(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, scaling: Scaling,
                 block: int, *, dtype: torch.dtype = F32, fnuz_as_fn: bool = False, e8m0_bias: int = 127,
                 a_block_of_k: BlockOfK | None = None,
                 b_block_of_k: BlockOfK | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """A ⊙ scale_a and B ⊙ scale_b, each product computed in f32 then stored in `dtype`.
    a_block_of_k / b_block_of_k: a function k -> the K block whose scale element k takes (a bug's hook)."""
    a_el, b_el = elements_f32(a, -1, fnuz_as_fn=fnuz_as_fn), elements_f32(b, -2, fnuz_as_fn=fnuz_as_fn)
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


def _k_block(scaling: Scaling, block: int, k: int) -> int:
    """The length along K that shares one scale (K itself for tensor and row scales)."""
    return block if scaling in ("blockwise", "mx") else k


# -- scaled_gemm: correct -------------------------------------------------------------------------------
def scaled_f32_dequant(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                       out_dtype: torch.dtype, scaling: Scaling, block: int) -> torch.Tensor:
    a32, b32 = _dequantized(a, b, scale_a, scale_b, scaling, block)
    return (a32 @ b32).to(out_dtype)


def scaled_f32_reordered(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                         out_dtype: torch.dtype, scaling: Scaling, block: int) -> torch.Tensor:
    a32, b32 = _dequantized(a, b, scale_a, scale_b, scaling, block)
    k = a32.shape[-1]
    total = torch.zeros((*a32.shape[:-1], b32.shape[-1]), dtype=F32)
    for start in reversed(range(0, k, 24)):
        total += a32[..., start:start + 24] @ b32[..., start:start + 24, :]
    return total.to(out_dtype)


def _promoted(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, scaling: Scaling,
              block: int, *, swapped: bool = False) -> torch.Tensor:
    """Σ over K blocks of (raw partial sum) · sa · sb, all in f32; swapped: sa per column, sb per row."""
    a_el, b_el = elements_f32(a, -1), elements_f32(b, -2)
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


def scaled_promoted_blocks(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                           out_dtype: torch.dtype, scaling: Scaling, block: int) -> torch.Tensor:
    return _promoted(a, b, scale_a, scale_b, scaling, block).to(out_dtype)


# -- scaled_gemm: wrong ----------------------------------------------------------------------------------
def scaled_scales_swapped(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                          out_dtype: torch.dtype, scaling: Scaling, block: int) -> torch.Tensor:
    return _promoted(a, b, scale_a, scale_b, scaling, block, swapped=True).to(out_dtype)


def _next_block(k: int, blocks: int, per: int) -> torch.Tensor:
    return (torch.arange(k) // per + 1) % blocks


def _edge_off_by_one(k: int, blocks: int, per: int) -> torch.Tensor:
    return ((torch.arange(k) + 1) // per).clamp(max=blocks - 1)


def scaled_next_block_scale(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                            out_dtype: torch.dtype, scaling: Scaling, block: int) -> torch.Tensor:
    a32, b32 = _dequantized(a, b, scale_a, scale_b, scaling, block, a_block_of_k=_next_block)
    return (a32 @ b32).to(out_dtype)


def scaled_block_edge_off_by_one(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                                 out_dtype: torch.dtype, scaling: Scaling, block: int) -> torch.Tensor:
    a32, b32 = _dequantized(a, b, scale_a, scale_b, scaling, block, a_block_of_k=_edge_off_by_one,
                            b_block_of_k=_edge_off_by_one)
    return (a32 @ b32).to(out_dtype)


def scaled_e8m0_bias_126(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                         out_dtype: torch.dtype, scaling: Scaling, block: int) -> torch.Tensor:
    a32, b32 = _dequantized(a, b, scale_a, scale_b, scaling, block, e8m0_bias=126)
    return (a32 @ b32).to(out_dtype)


def scaled_fnuz_read_as_fn(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                           out_dtype: torch.dtype, scaling: Scaling, block: int) -> torch.Tensor:
    a32, b32 = _dequantized(a, b, scale_a, scale_b, scaling, block, fnuz_as_fn=True)
    return (a32 @ b32).to(out_dtype)


def scaled_f16_dequant(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                       out_dtype: torch.dtype, scaling: Scaling, block: int) -> torch.Tensor:
    a16, b16 = _dequantized(a, b, scale_a, scale_b, scaling, block, dtype=torch.float16)
    return (a16.to(F32) @ b16.to(F32)).to(out_dtype)  # f16 operands, f32 accumulation


def scaled_f16_accumulator(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                           out_dtype: torch.dtype, scaling: Scaling, block: int) -> torch.Tensor:
    a32, b32 = _dequantized(a, b, scale_a, scale_b, scaling, block)
    return f16_running_sum(a32, b32).to(out_dtype)


# -- alternates and planted bugs read in float64 ------------------------------------------------------------
def _values64(elements: torch.Tensor, k_dim: int) -> torch.Tensor:
    return fp4.unpack_along(elements, k_dim).double() if elements.dtype == fp4.PACKED else elements.double()


def _expand64(scales: torch.Tensor, rows: int, cols: int, block_rows: int, block_cols: int) -> torch.Tensor:
    full = scales.double().repeat_interleave(block_rows, -2).repeat_interleave(block_cols, -1)
    return full[..., :rows, :cols]


def _block_shapes(scaling: Scaling, block: int, m: int, n: int, k: int) -> tuple[tuple[int, int], tuple[int, int]]:
    return {"tensor": ((m, k), (k, n)), "rowwise": ((1, k), (k, 1)), "blockwise": ((1, block), (block, block)),
            "mx": ((1, block), (block, 1))}[scaling]


def _scaled64(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, scaling: Scaling,
              block: int, *, shift_a_blocks: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    a64, b64 = _values64(a, -1), _values64(b, -2)
    m, k = a64.shape[-2:]
    n = b64.shape[-1]
    block_a, block_b = _block_shapes(scaling, block, m, n, k)
    if shift_a_blocks:
        scale_a = torch.roll(scale_a.double(), shift_a_blocks, dims=-1)
    return a64 * _expand64(scale_a, m, k, *block_a), b64 * _expand64(scale_b, k, n, *block_b)


def blocked_in_reverse(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                       out_dtype: torch.dtype, scaling: Scaling, block: int) -> torch.Tensor:
    """Correct: per-block partial sums in f32, scaled, then added last block first."""
    a64, b64 = _scaled64(a, b, scale_a, scale_b, scaling, block)
    a32, b32 = a64.float(), b64.float()
    k = a32.shape[-1]
    step = block or 32
    total = torch.zeros((*a32.shape[:-1], b32.shape[-1]), dtype=torch.float32)
    for start in reversed(range(0, k, step)):
        total += a32[..., start:start + step] @ b32[..., start:start + step, :]
    return total.to(out_dtype)


def wrong_block_scale(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                      out_dtype: torch.dtype, scaling: Scaling, block: int) -> torch.Tensor:
    """A's scales read one block along K too far (the classic block -> scale indexing bug)."""
    a64, b64 = _scaled64(a, b, scale_a, scale_b, scaling, block, shift_a_blocks=1)
    return (a64.float() @ b64.float()).to(out_dtype)


def scale_b_untransposed(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                         out_dtype: torch.dtype, scaling: Scaling, block: int) -> torch.Tensor:
    """B's scales read as if stored K-contiguous (n, ⌈k/blk⌉) whatever their strides say: right for the
    default storage, wrong for a row-major scale_b (rocMLIR's -transScaleB)."""
    memory = scale_b.double().reshape(-1) if scale_b.is_contiguous() else scale_b.double().mT.contiguous().reshape(-1)
    blocks_k, n = scale_b.shape[-2:]
    misread = memory.view(n, blocks_k).mT
    a64, b64 = _scaled64(a, b, scale_a, misread, scaling, block)
    return (a64.float() @ b64.float()).to(out_dtype)


def e8m0_bias_off_by_one(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                         out_dtype: torch.dtype, scaling: Scaling, block: int) -> torch.Tensor:
    """E8M0 codes decoded with bias 126 instead of 127 (every scale doubled)."""
    def decode(scales):
        if scales.dtype != torch.float8_e8m0fnu:
            return scales
        return torch.ldexp(torch.ones(scales.shape, dtype=torch.float64), scales.view(torch.uint8).to(torch.int64) - 126)
    a64, b64 = _scaled64(a, b, decode(scale_a), decode(scale_b), scaling, block)
    return (a64.float() @ b64.float()).to(out_dtype)


def accumulates_in_f16(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                       out_dtype: torch.dtype, scaling: Scaling, block: int) -> torch.Tensor:
    """Each term rounded to f16 and added to an f16 running sum (what an f16 accumulator does)."""
    a64, b64 = _scaled64(a, b, scale_a, scale_b, scaling, block)
    total = torch.zeros((*a64.shape[:-1], b64.shape[-1]), dtype=torch.float16)
    for kk in range(a64.shape[-1]):
        total = (total.double() + (a64[..., kk:kk + 1] * b64[..., kk:kk + 1, :]).half().double()).half()
    return total.to(out_dtype)
