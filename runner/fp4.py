"""fp4 (f4e2m1) operands as a kernel receives them: packed two a byte along the reduction dim.

The runner holds fp4 values as their codes, one a byte (uint8, runner/dtypes.py). A kernel gets
torch.float4_e2m1fn_x2 tensors whose packed dim is the reduction dim K, as MX hardware and
torch._scaled_mm read them: A (…, m, k/2), B (…, k/2, n); element 2i of K in the low nibble, 2i+1 in
the high one. The layout letter then decides only how the packed bytes lie in memory (row- or
column-major), as for every other dtype. An odd K takes ⌈k/2⌉ bytes: the last byte's high nibble is
a zero (code 0), in A and in B alike, so a kernel that multiplies the padding adds 0·0.
"""
from __future__ import annotations

import torch

from e2egen.metrics.encoding import decode, pack_fp4, unpack_fp4

PACKED = torch.float4_e2m1fn_x2


def is_codes(tensor: torch.Tensor) -> bool:
    """An fp4 operand as the runner holds it (codes, one a byte)."""
    return tensor.dtype == torch.uint8


def pack_along(codes: torch.Tensor, dim: int) -> torch.Tensor:
    """Codes (one a byte) -> packed pairs along `dim` (uint8, that dim halved, rounded up), contiguous."""
    moved = codes.movedim(dim, -1)
    if moved.shape[-1] % 2:
        moved = torch.cat((moved, moved.new_zeros((*moved.shape[:-1], 1))), dim=-1)
    return pack_fp4(moved).movedim(-1, dim).contiguous()


def unpack_along(packed: torch.Tensor, dim: int) -> torch.Tensor:
    """Packed fp4 (float4_e2m1fn_x2 or uint8) -> its float32 values, `dim` doubled (exact; an odd K's
    padding comes back as a trailing 0)."""
    raw = packed.view(torch.uint8) if packed.dtype == PACKED else packed
    codes = unpack_fp4(raw.movedim(dim, -1).contiguous()).movedim(-1, dim)
    return decode(codes, "f4e2m1").to(torch.float32)


def as_packed(packed_bytes: torch.Tensor) -> torch.Tensor:
    """uint8 bytes (any strides) viewed as torch's packed fp4 dtype."""
    return packed_bytes.view(PACKED)
