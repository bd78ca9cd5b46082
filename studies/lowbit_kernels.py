"""Plain fp8 and i8 gemm kernels for the low-bit evidence (studies/lowbit_evidence.py), through gemm's plug-in
contract f(a, b) or f(a, b, out_dtype=...) with fp8 or i8 tensors (runner/ops/product_sum/gemm.py). The scaled
gemm's kernels live in their family, runner/ops/scaled_gemm/kernels.py.

CORRECT (another order or structure of the same arithmetic):
    fp8_f32                 plain fp8 gemm: one f32 matmul (the fp8 wrong kernels' bug-free twin)
    fp8_split_k             plain fp8 gemm: K cut in 4 slices, each an f32 matmul, the slices added in f32
    i8_int32, i8_int64      plain i8 gemm: an int32 accumulator (torch's integer matmul), or int64
                            then converted to int32

WRONG (one bug each):
    fp8_fnuz_read_as_fn     FNUZ elements decoded with the OCP format's rules and the bias fixed by a factor
                            1/2: right except the codes the OCP format reserves
    fp8_f16_accumulator     the products added one by one into an f16 running sum
    i8_i16_accumulator      plain i8 gemm with an i16 accumulator (wraps modulo 2^16)
"""
from __future__ import annotations

import torch

from e2egen.runner import fp4

F32 = torch.float32
_FNUZ_AS_OCP = {torch.float8_e4m3fnuz: torch.float8_e4m3fn, torch.float8_e5m2fnuz: torch.float8_e5m2}


def _elements(x: torch.Tensor, k_dim: int, *, fnuz_as_fn: bool = False) -> torch.Tensor:
    """The elements' values in f32 (exact), logical shape; fp4 unpacked along K."""
    if x.dtype == fp4.PACKED:
        return fp4.unpack_along(x, k_dim)
    if fnuz_as_fn and x.dtype in _FNUZ_AS_OCP:
        # the OCP twin's decode: the bias is one smaller, so every value reads twice too large; halve it
        return x.view(torch.uint8).view(_FNUZ_AS_OCP[x.dtype]).to(F32) * 0.5
    return x.to(F32)


def _f16_running_sum(a32: torch.Tensor, b32: torch.Tensor) -> torch.Tensor:
    """Each product (exact in f32 for fp8) rounded to f16 and added to an f16 running sum."""
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
