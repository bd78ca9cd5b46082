"""Every product-sum op and direction as one batched matrix product (runner/gemm_form.py's GemmForm), for
references that model how a kernel accumulates.

`lower(problem, inputs)` returns a `GemmForm`: lhs [G, M, R] and rhs
[G, R, Ncol] in float64 with `fold(lhs @ rhs)` equal to the op's logical
output. R is the reduction, in this order:

    conv fwd         (c, r, s, …)    im2col of x (unfold)          × w
    conv bwd_data    (k, r', s', …)  forward conv of dy, zero-inserted by the
                                     stride and padded, with the weight
                                     transposed (k <-> c) and flipped (r' = R−1−r);
                                     the inserted zeros count as products
    conv bwd_weight  (n, p, q, …)    dy × im2col of x
    gemm             (k)             a × b

G is the number of groups (conv) or the batch (gemm, 1 when unbatched); the spec's lowered_dims gives
(G, M, R, Ncol) from the shapes alone. runner/gemm_form.py's accumulate_chunked is the "accumulate k"
reference over this form.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import torch
import torch.nn.functional as F

from e2egen.runner.gemm_form import GemmForm
from e2egen.runner.ops.product_sum.conv import ConvParams
from e2egen.runner.ops.product_sum.gemm import GemmParams
from e2egen.runner.problem import Problem

Pads = Sequence[int] | Sequence[Sequence[int]]  # per spatial dim: an int (both sides alike) or (begin, end)


def lower(problem: Problem, inputs: Mapping[str, torch.Tensor]) -> GemmForm:
    """The problem's float64 logical inputs as lhs @ rhs."""
    p, direction = problem.params, problem.direction
    if isinstance(p, GemmParams):
        return lower_gemm(inputs["a"], inputs["b"], p)
    if direction == "fwd":
        return lower_conv_fwd(inputs["x"], inputs["w"], p.stride, p.pads, p.dilation, p.groups)
    if direction == "bwd_data":
        return lower_conv_bwd_data(inputs["dy"], inputs["w"], p)
    return lower_conv_bwd_weight(inputs["x"], inputs["dy"], p)


# -- gemm ---------------------------------------------------------------------------
def lower_gemm(a: torch.Tensor, b: torch.Tensor, p: GemmParams) -> GemmForm:
    batch = max(p.batch, 1)
    shape = p.c_shape
    return GemmForm(a.reshape(batch, p.m, p.k), b.reshape(batch, p.k, p.n), lambda out: out.reshape(shape))


# -- conv ---------------------------------------------------------------------------
def im2col(x: torch.Tensor, kernel: Sequence[int], stride: Sequence[int], pads: Pads,
           dilation: Sequence[int]) -> torch.Tensor:
    """(N, C, *in) -> (N, C, *out, *kernel): the input value under each kernel tap, for every output."""
    dims = len(kernel)
    pairs = [(q, q) if isinstance(q, int) else tuple(q) for q in pads]  # an int pads both sides alike
    # F.pad lists (before, after) pairs starting from the last dim.
    padded = F.pad(x, [q for d in reversed(range(dims)) for q in pairs[d]])
    for d in range(dims):
        span = dilation[d] * (kernel[d] - 1) + 1
        # unfold replaces dim 2+d by the window count and appends the window.
        padded = padded.unfold(2 + d, span, stride[d])
    return padded[(..., *(slice(None, None, step) for step in dilation))]


def _grouped_columns(x: torch.Tensor, kernel: Sequence[int], stride: Sequence[int], pad: Pads,
                     dilation: Sequence[int], groups: int) -> tuple[torch.Tensor, tuple[int, ...]]:
    """im2col arranged as [G, N·P, C/g·window], with out spatial sizes."""
    n, c = x.shape[:2]
    cols = im2col(x, kernel, stride, pad, dilation)
    out_size = tuple(cols.shape[2:2 + len(kernel)])
    positions, window = math.prod(out_size), math.prod(kernel)
    cols = cols.reshape(n, groups, c // groups, positions, window)
    return cols.permute(1, 0, 3, 2, 4).reshape(groups, n * positions, c // groups * window), out_size


def lower_conv_fwd(x: torch.Tensor, w: torch.Tensor, stride: Sequence[int], pad: Pads, dilation: Sequence[int],
                   groups: int) -> GemmForm:
    n = x.shape[0]
    k, cg = w.shape[:2]
    kernel = tuple(w.shape[2:])
    lhs, out_size = _grouped_columns(x, kernel, stride, pad, dilation, groups)
    rhs = w.reshape(groups, k // groups, cg * math.prod(kernel)).transpose(1, 2)
    positions = math.prod(out_size)

    def fold(out: torch.Tensor) -> torch.Tensor:  # [g, N·P, K/g] -> (N, K, *out)
        return out.reshape(groups, n, positions, k // groups).permute(1, 0, 3, 2).reshape(n, k, *out_size)

    return GemmForm(lhs, rhs, fold)


def lower_conv_bwd_weight(x: torch.Tensor, dy: torch.Tensor, p: ConvParams) -> GemmForm:
    g, kg = p.groups, p.k // p.groups
    rhs, out_size = _grouped_columns(x, p.kernel, p.stride, p.pads, p.dilation, g)
    positions = math.prod(out_size)
    lhs = dy.reshape(p.n, g, kg, positions).permute(1, 2, 0, 3).reshape(g, kg, p.n * positions)
    w_shape = p.w_shape
    return GemmForm(lhs, rhs, lambda out: out.reshape(w_shape))


def lower_conv_bwd_data(dy: torch.Tensor, w: torch.Tensor, p: ConvParams) -> GemmForm:
    dims, g = p.spatial_dims, p.groups
    # Zero-insert dy by the stride: dy[o] lands at o·stride.
    dilated_size = [(o - 1) * s + 1 for o, s in zip(p.out_size, p.stride)]
    spread = dy.new_zeros((p.n, p.k, *dilated_size))
    spread[(..., *(slice(None, None, s) for s in p.stride))] = dy
    # Pad so that a stride-1 conv with the same dilation gives dx's size; the
    # amounts may be negative (padding wider than the dilated kernel): F.pad crops.
    pads = []
    for d in reversed(range(dims)):
        reach = p.dilation[d] * (p.kernel[d] - 1)
        before = reach - p.pad[d]
        after = p.size[d] + reach - dilated_size[d] - before
        pads += [before, after]
    spread = F.pad(spread, pads)
    # w (K, C/g, *R) -> (C, K/g, *R) per group, flipped along every spatial dim.
    cg, kg = p.c // g, p.k // g
    w_t = (w.reshape(g, kg, cg, *p.kernel).transpose(1, 2).reshape(p.c, kg, *p.kernel)
           .flip(tuple(range(2, 2 + dims))))
    return lower_conv_fwd(spread, w_t, (1,) * dims, ((0, 0),) * dims, p.dilation, g)
