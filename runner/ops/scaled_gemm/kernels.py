"""torch's own scaled gemm, the default kernel of scaled_gemm.

torch._scaled_mm where torch has the recipe (tensor-wise and row-wise f32 scales on 2-d OCP or FNUZ fp8:
on the CPU, and on CUDA GPUs with fp8 tensor cores); elsewhere (block scales, MX, fp4, batches) an f32
emulation: each operand dequantized in f32 (element · scale: exact for e8m0 scales, one rounding for
f32 ones), one f32 matmul, the result converted to out_dtype. The emulation is what a kernel that
dequantizes in its prologue computes; the bound covers both (runner/ops/scaled_gemm/bound.py).
"""
from __future__ import annotations

import torch

from e2egen.runner import fp4
from e2egen.runner.lowbit import FLOAT8_STORAGE
from e2egen.runner.ops.scaled_gemm.scaling import Blocks, operand_blocks



def torch_scaled_gemm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, *,
                      out_dtype: torch.dtype, scaling: str, block: int) -> torch.Tensor:
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


def _scaled_mm_applies(a, b, scale_a, scale_b, scaling: str) -> bool:
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
    full = blocks.expand(scales.to(torch.float32))
    short_rows, short_cols = blocks.rows - full.shape[-2], blocks.cols - full.shape[-1]
    if short_rows or short_cols:  # an odd K's fp4 padding (a zero element) may lie past the last block
        full = torch.nn.functional.pad(full, (0, short_cols, 0, short_rows), value=1.0)
    return values * full
