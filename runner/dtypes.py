"""The data types a case can run in, and what each means for torch.

tf32 is not a storage format: its tensors are f32 and the kernel (cuBLAS,
cuDNN on Ampere and later) rounds the inputs of each product to 10 mantissa
bits. So its inputs are drawn as f32 and its output is f32.

f4e2m1 (OCP MX fp4) has no one-element torch dtype: the runner holds its values as their 4-bit codes,
one a byte (uint8), and a kernel receives them packed two a byte along the reduction dim
(torch.float4_e2m1fn_x2; runner/fp4.py). e8m0 (the MX scale) is stored as torch.float8_e8m0fnu.

Low-bit dtypes: the fp8 formats (OCP f8e4m3fn and f8e5m2; AMD's FNUZ variants f8e4m3fnuz
and f8e5m2fnuz, which rocMLIR's fp8/bf8 mean on older chips) take f32 outputs, as
fp8 tensor cores accumulate and write f32; i8 takes i32 outputs (integer
accumulation). A pair "A_B" (rocMLIR's fp8_bf8) gives the first input of a
product A's format and the second B's.

torch is imported when a case runs, so generating a suite stays fast: only
`storage_dtype` needs it; the rest is derived from the formats' widths.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from e2egen.metrics.formats import get_format

if TYPE_CHECKING:
    import torch

FLOAT8 = ("f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz")
FLOAT8_PAIRS = ("f8e4m3fn_f8e5m2", "f8e5m2_f8e4m3fn", "f8e4m3fnuz_f8e5m2fnuz", "f8e5m2fnuz_f8e4m3fnuz")
FLOAT4 = ("f4e2m1",)
INTEGER_DTYPES = ("i8",)
FLOAT_DTYPES = ("f32", "tf32", "f16", "bf16")
DTYPES = (*FLOAT_DTYPES, *FLOAT8, *FLOAT8_PAIRS, *FLOAT4, *INTEGER_DTYPES)
LOW_BIT = (*FLOAT8, *FLOAT8_PAIRS, *FLOAT4, *INTEGER_DTYPES)
# The formats a low-bit float op may write instead of f32 (catalogue key `out_dtype`): what fp8 tensor-core
# epilogues convert to. An fp8 output saturates: the result rounded to nearest even, then held to ± the
# format's largest finite value (cuBLASLt's and Transformer Engine's satfinite conversion), where an
# unsaturated conversion gives NaN (e4m3fn has no inf) or inf (e5m2).
SATURATING_OUT_DTYPES = ("f8e4m3fn", "f8e5m2")
OUT_DTYPES = ("f32", "bf16", "f16", *SATURATING_OUT_DTYPES)
SCALE_DTYPES = ("e8m0", "f32")  # block and tensor scales: OCP MX's E8M0 or plain f32


@functools.cache
def _storage() -> dict[str, torch.dtype]:
    import torch

    return {"f32": torch.float32, "tf32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
            "f8e4m3fn": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2, "f8e4m3fnuz": torch.float8_e4m3fnuz,
            "f8e5m2fnuz": torch.float8_e5m2fnuz, "i8": torch.int8, "i32": torch.int32,
            "f4e2m1": torch.uint8, "e8m0": torch.float8_e8m0fnu}


def storage_dtype(dtype: str) -> torch.dtype:
    """The torch dtype of a tensor stored in a format (a case dtype's operand format or an output format);
    f4e2m1's codes, one a byte, are uint8."""
    return _storage()[dtype]


def operand_formats(dtype: str) -> tuple[str, str]:
    """(A's format, B's format): the first and second input of a product; both the dtype's unless a pair."""
    if dtype in FLOAT8_PAIRS:
        first, second = dtype.split("_")
        return first, second
    fmt = input_format_name(dtype)
    return fmt, fmt


def is_low_bit(dtype: str) -> bool:
    return dtype in LOW_BIT


def output_dtype_name(dtype: str) -> str:
    """The format of the kernel's output: f32 for tf32 and fp8, i32 for i8, else the dtype itself."""
    if dtype == "tf32" or (is_low_bit(dtype) and dtype not in INTEGER_DTYPES):
        return "f32"
    if dtype in INTEGER_DTYPES:
        return "i32"
    return dtype


def input_format_name(dtype: str) -> str:
    """The format the inputs are rounded to when drawn (tf32 inputs are f32 values; a pair: A's)."""
    if dtype in FLOAT8_PAIRS:
        return dtype.split("_")[0]
    return "f32" if dtype == "tf32" else dtype


def element_size(dtype: str) -> int:
    """Bytes a stored input element takes (tf32 is stored as f32; a pair: the wider; fp4's codes a byte)."""
    return -(-max(get_format(fmt).bits for fmt in operand_formats(dtype)) // 8)


def largest_finite(dtype: str) -> float:
    """The largest finite value every input format holds (tf32's is f32's; a pair: the smaller)."""
    return min(get_format(fmt).max for fmt in operand_formats(dtype))
