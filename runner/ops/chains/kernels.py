"""The fused chains' kernels, following the contract (gemm_gemm.py, conv_gemm.py): torch's own, which the
runner calls by default, and the alternates and planted bugs studies/fused_evidence.py plugs in by impl
string, e.g. impl="e2egen.runner.ops.chains.kernels:gg_blocked".

torch's kernels:
    torch_gemm_gemm  A·B in the dtype (rounded), the element-wise step in f32 when there is one, then ·C
    torch_conv_gemm  conv2d's torch kernel (the conv2d op's default, through the registry) in the dtype
                     (rounded), viewed as rows, then ·C

Alternates (correct) and planted bugs:
    gg_blocked          A·B in two k-halves in f32, rounded once: correct
    gg_c_transposed     reads C's memory transposed
    gg_unrounded_scale  the result 0.4 % too large
    gg_dropped_last_k   the first product leaves out its last k
    gg_intermediate_bf16    A·B rounded to bf16, not the dtype, before ·C
    gg_first_sum_in_dtype   A·B's running sum kept in the dtype (f16, bf16)
    gg_second_sum_in_dtype  R(A·B)·C's running sum kept in the dtype
    cg_intermediate_bf16    the conv output rounded to bf16, not the dtype, before ·C
    cg_second_sum_in_dtype  R(Y)·C's running sum kept in the dtype
    cg_rows_shifted     the conv output's rows shifted by one before the gemm
    cg_nchw_view        the conv output's NCHW memory read as (n·ho·wo, k) rows
"""
from __future__ import annotations

from typing import Sequence

import torch

from e2egen.runner.ops import numerics_of
from e2egen.runner.ops.chains.gemm_gemm import IDENTITY
from e2egen.runner.ops.math_functions import FUNCTIONS

Padding = Sequence[int] | Sequence[Sequence[int]]  # an int per spatial dim, or (begin, end) pairs


def as_matrix(y: torch.Tensor) -> torch.Tensor:
    """(n, k, ho, wo) -> (n·ho·wo, k)."""
    return y.permute(0, 2, 3, 1).reshape(-1, y.shape[1])


def conv2d_fwd(x: torch.Tensor, w: torch.Tensor, *, stride: Sequence[int], padding: Padding,
               dilation: Sequence[int], groups: int = 1) -> torch.Tensor:
    """torch's 2-d convolution: the conv2d op's own kernel, from its numerics (the registry)."""
    return numerics_of("conv2d").default_kernel("fwd")(x, w, stride=stride, padding=padding, dilation=dilation,
                                                       groups=groups)


def torch_gemm_gemm(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, *, scale: float = 1.0,
                    between: str = IDENTITY) -> torch.Tensor:
    product = torch.matmul(a, b)  # comes back in the dtype: rounded
    if scale != 1.0 or between != IDENTITY:
        stepped = product.float() * scale
        if between != IDENTITY:
            stepped = FUNCTIONS[between].kernel(stepped)
        product = stepped.to(a.dtype)
    return torch.matmul(product, c)


def torch_conv_gemm(x: torch.Tensor, w: torch.Tensor, c: torch.Tensor, *, stride: Sequence[int], padding: Padding,
                    dilation: Sequence[int]) -> torch.Tensor:
    y = conv2d_fwd(x, w, stride=stride, padding=padding, dilation=dilation, groups=1)  # in the dtype: rounded
    return torch.matmul(as_matrix(y), c)


# -- alternates and planted bugs (studies/fused_evidence.py) ---------------------------------------
def gg_blocked(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """A·B in two k-halves in f32, rounded once: correct."""
    half = a.shape[-1] // 2
    first = torch.matmul(a[..., :half].float(), b[..., :half, :].float()) + torch.matmul(a[..., half:].float(), b[..., half:, :].float())
    return torch.matmul(first.to(a.dtype).float(), c.float()).to(a.dtype)


def gg_c_transposed(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return torch.matmul(torch.matmul(a, b), c.mT.contiguous().view(c.shape))


def gg_unrounded_scale(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return (torch.matmul(torch.matmul(a, b), c).float() * 1.004).to(a.dtype)


def gg_one_element_off(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """torch's chain with one output element moved by 0.3 % of the output's largest magnitude."""
    out = torch.matmul(torch.matmul(a, b), c).float()
    out[..., 0, 0] += 0.003 * out.abs().max()
    return out.to(a.dtype)


def gg_dropped_last_k(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return torch.matmul(torch.matmul(a[..., :-1], b[..., :-1, :]), c)


def cg_rows_shifted(x: torch.Tensor, w: torch.Tensor, c: torch.Tensor, *, stride: Sequence[int], padding: Padding,
                    dilation: Sequence[int]) -> torch.Tensor:
    y = conv2d_fwd(x, w, stride=stride, padding=padding, dilation=dilation, groups=1)
    rows = y.permute(0, 2, 3, 1).reshape(-1, y.shape[1])
    return torch.matmul(torch.roll(rows, 1, dims=0), c)


def cg_nchw_view(x: torch.Tensor, w: torch.Tensor, c: torch.Tensor, *, stride: Sequence[int], padding: Padding,
                 dilation: Sequence[int]) -> torch.Tensor:
    y = conv2d_fwd(x, w, stride=stride, padding=padding, dilation=dilation, groups=1)
    return torch.matmul(y.reshape(-1, y.shape[1]), c)


def gg_intermediate_bf16(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """A·B rounded to bf16 (not the dtype) before ·C."""
    product = torch.matmul(a.float(), b.float()).to(torch.bfloat16)
    return torch.matmul(product.float(), c.float()).to(a.dtype)


def gg_second_sum_in_dtype(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """R(A·B)·C with its running sum over n kept in the dtype (f16 or bf16 cases), one term after the other."""
    product = torch.matmul(a, b)
    total = torch.zeros(*product.shape[:-1], c.shape[-1], dtype=a.dtype, device=a.device)
    for index in range(product.shape[-1]):
        total = total + (product[..., index:index + 1].float() * c[..., index:index + 1, :].float()).to(a.dtype)
    return total


def gg_first_sum_in_dtype(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """A·B with its running sum over k kept in the dtype, one term after the other."""
    total = torch.zeros(*a.shape[:-1], b.shape[-1], dtype=a.dtype, device=a.device)
    for index in range(a.shape[-1]):
        total = total + (a[..., index:index + 1].float() * b[..., index:index + 1, :].float()).to(a.dtype)
    return torch.matmul(total, c)


def cg_intermediate_bf16(x: torch.Tensor, w: torch.Tensor, c: torch.Tensor, *, stride: Sequence[int], padding: Padding,
                         dilation: Sequence[int]) -> torch.Tensor:
    """The conv output rounded to bf16 (not the dtype) before ·C."""
    y = conv2d_fwd(x.float(), w.float(), stride=stride, padding=padding, dilation=dilation, groups=1).to(torch.bfloat16)
    return torch.matmul(as_matrix(y).float(), c.float()).to(x.dtype)


def cg_second_sum_in_dtype(x: torch.Tensor, w: torch.Tensor, c: torch.Tensor, *, stride: Sequence[int], padding: Padding,
                           dilation: Sequence[int]) -> torch.Tensor:
    """R(Y)·C with its running sum over k kept in the dtype, one term after the other."""
    y = as_matrix(conv2d_fwd(x, w, stride=stride, padding=padding, dilation=dilation, groups=1))
    total = torch.zeros(y.shape[0], c.shape[-1], dtype=x.dtype, device=x.device)
    for index in range(y.shape[-1]):
        total = total + (y[:, index:index + 1].float() * c[index:index + 1, :].float()).to(x.dtype)
    return total
