"""The data types a case can run in, and what each means for torch.

tf32 is not a storage format: its tensors are f32 and the kernel (cuBLAS,
cuDNN on Ampere and later) rounds the inputs of each product to 10 mantissa
bits. So its inputs are drawn as f32 and its output is f32.

torch is imported when a case runs, so generating a suite stays fast: only
`storage_dtype` needs it; the rest is derived from the formats' widths.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from e2egen.metrics.formats import get_format

if TYPE_CHECKING:
    import torch

DTYPES = ("f32", "tf32", "f16", "bf16")


@functools.cache
def _storage() -> dict[str, torch.dtype]:
    import torch

    return {"f32": torch.float32, "tf32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
            "i8": torch.int8, "i32": torch.int32}


def storage_dtype(dtype: str) -> torch.dtype:
    """The torch dtype of a tensor stored in a case dtype or an output format (i32 for integer outputs)."""
    return _storage()[dtype]


def output_dtype_name(dtype: str) -> str:
    """The format of the kernel's output: f32 for tf32, else the dtype itself."""
    return "f32" if dtype == "tf32" else dtype


def input_format_name(dtype: str) -> str:
    """The format the inputs are rounded to when drawn (tf32 inputs are f32 values)."""
    return "f32" if dtype == "tf32" else dtype


def element_size(dtype: str) -> int:
    """Bytes a stored element takes (tf32 is stored as f32)."""
    return get_format(input_format_name(dtype)).bits // 8


def largest_finite(dtype: str) -> float:
    """The largest finite value of the storage format (tf32's is f32's)."""
    return get_format(input_format_name(dtype)).max
