"""torch's own kernels for the low-bit dtypes, where torch has none.

torch has no fp8 or i8 convolution and no general fp8/i8 matmul on the CPU (its fp8 gemm,
torch._scaled_mm, needs a recent GPU and scales). The default kernel of an fp8 or i8 case therefore
computes on widened inputs with torch's own op: fp8 inputs widened to f32 (exact), products and sums in
f32, an f32 output — what an fp8 tensor core with an f32 accumulator computes; i8 inputs widened to
float64 (every sum of i8 products below 2^53 is exact), the result wrapped to i32 as an i32 accumulator
wraps. So the CPU CI runs every low-bit path through torch; a team's own kernel replaces it. An op whose
default kernel takes the low-bit tensors itself (scaled_gemm: torch._scaled_mm where torch has it) sets
`Op.torch_kernel_widens = False`.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from e2egen.runner import fp4
from e2egen.runner.dtypes import INTEGER_DTYPES, is_low_bit
from e2egen.runner.ops.base import Op


def widened_kernel(kernel: Callable[..., Any], dtype: str, op: Op) -> Callable[..., Any]:
    """The kernel run on widened inputs, its output in the dtype's output format (f32, or i32 wrapped)."""
    if not is_low_bit(dtype) or not op.torch_kernel_widens:
        return kernel
    integer = dtype in INTEGER_DTYPES
    wide = torch.float64 if integer else torch.float32

    @functools.wraps(kernel)
    def run(*tensors: Any, **keywords: Any) -> Any:
        widened = [t.to(wide) if isinstance(t, torch.Tensor) and t.dtype in _WIDENED else t for t in tensors]
        result = kernel(*widened, **keywords)
        if integer:
            return wrap_to_int32(result)
        return result

    return run


FLOAT8_STORAGE = (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)
_WIDENED = (*FLOAT8_STORAGE, torch.int8)
# fp4 (packed along K) and e8m0 scales are left to the op's own default kernel, which knows their dims.


def to_output(result: torch.Tensor, out_dtype: torch.dtype | None) -> torch.Tensor:
    """A kernel's result in the case's out_dtype (None: as it is): an fp8 output saturated to ± its largest
    finite value before the conversion rounds it (dtypes.SATURATING_OUT_DTYPES), as the contract says."""
    if out_dtype is None:
        return result
    if out_dtype in FLOAT8_STORAGE:
        largest = torch.finfo(out_dtype).max
        return result.clamp(-largest, largest).to(out_dtype)
    return result.to(out_dtype)


def wrap_to_int32(values: torch.Tensor) -> torch.Tensor:
    """Exact integers (float64) to i32 with two's complement wrap-around, as an i32 accumulator does."""
    as_int64 = torch.round(values).to(torch.int64)
    low = as_int64 & 0xFFFFFFFF
    return torch.where(low >= 2 ** 31, low - 2 ** 32, low).to(torch.int32)


# -- reading low-bit operands, for the alternate and planted-bug kernels of gemm and scaled gemm ----------------
_FNUZ_AS_OCP = {torch.float8_e4m3fnuz: torch.float8_e4m3fn, torch.float8_e5m2fnuz: torch.float8_e5m2}


def elements_f32(x: torch.Tensor, k_dim: int, *, fnuz_as_fn: bool = False) -> torch.Tensor:
    """The elements' values in f32 (exact), logical shape; fp4 unpacked along K. fnuz_as_fn: an FNUZ tensor
    decoded with its OCP twin's rules (a planted bug: right except the codes the OCP format reserves)."""
    if x.dtype == fp4.PACKED:
        return fp4.unpack_along(x, k_dim)
    if fnuz_as_fn and x.dtype in _FNUZ_AS_OCP:
        # the OCP twin's decode: the bias is one smaller, so every value reads twice too large; halve it
        return x.view(torch.uint8).view(_FNUZ_AS_OCP[x.dtype]).to(torch.float32) * 0.5
    return x.to(torch.float32)


def f16_running_sum(a32: torch.Tensor, b32: torch.Tensor) -> torch.Tensor:
    """a32 @ b32 with each product (exact in f32 for fp8 values) rounded to f16 and added to an f16 running sum:
    the planted f16 accumulator."""
    total = torch.zeros((*a32.shape[:-1], b32.shape[-1]), dtype=torch.float16)
    for kk in range(a32.shape[-1]):
        term = (a32[..., kk:kk + 1] * b32[..., kk:kk + 1, :]).to(torch.float16)
        total = total + term  # f16 + f16 rounds to f16
    return total

