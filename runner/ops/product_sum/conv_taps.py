"""One tap's share of a convolution: the per-tap partial sums the bound needs when a kernel keeps them
(bound.PartialSums).

Tap t = (r_1, …, r_D) of the window contributes w[:, :, r] times the input positions it meets. That is a
1×1 convolution over channels at the tap's strided offset (fwd), or its transpose scattered back to the
positions the tap reads (bwd_data): 1/window of the whole convolution's work, where convolving with a
weight masked down to one tap costs the whole convolution again for every tap. A 1×1 convolution is a
matrix product per group, (K/g × C/g) by (C/g × positions), and runs as one batched matmul in the inputs'
dtype (f32 where the bound has proven that, else float64): torch's CPU float64 convolutions have no 1×1
fast path (slow_conv_transpose3d took 1.0 ms per tap of a C3D layer where the matmul takes 0.6 ms, and a
grouped one ran group by group: 0.64 against 0.13 ms).
"""
from __future__ import annotations

from typing import Iterator, Mapping, Sequence

import torch

from e2egen.runner.ops.product_sum.conv import ConvParams
from e2egen.runner.ops.product_sum.kernels import pad_explicitly


def tap_offsets(tap: int, kernel: tuple[int, ...]) -> tuple[int, ...]:
    """The window position of tap number `tap`, row-major as the weight stores it."""
    offsets = []
    for size in reversed(kernel):
        tap, offset = divmod(tap, size)
        offsets.append(offset)
    return tuple(reversed(offsets))


def tap_partial(direction: str, params: ConvParams, inputs: Mapping[str, torch.Tensor], tap: int) -> torch.Tensor:
    """Tap `tap`'s partial sum of every output element (the inputs' dtype, logical layout): fwd's y or
    bwd_data's dx."""
    dims = params.spatial_dims
    offsets = tap_offsets(tap, params.kernel)
    w = inputs["w"][(slice(None), slice(None), *offsets)]  # (K, C/groups): the tap's 1×1 weight
    # depthwise (one input and one output channel per group): the 1×1 convolution is a product per channel
    per_channel = w.reshape(1, -1, *([1] * dims)) if params.c == params.k == params.groups else None
    window = params.tap_positions(offsets)
    if direction == "fwd":
        x = pad_explicitly(inputs["x"], params.pads)[(..., *window)]
        if per_channel is not None:
            return x * per_channel
        return _unit_convolution(x, w, params.groups)
    if direction != "bwd_data":
        raise ValueError(f"taps cut fwd and bwd_data, not {direction}")
    if per_channel is not None:
        gathered = inputs["dy"] * per_channel
    else:
        gathered = _unit_convolution(inputs["dy"], w, params.groups, transposed=True)  # (N, C, *out_size)
    return scattered_into_input(gathered, params, window)


def bwd_data_tap_partials(params: ConvParams, inputs: Mapping[str, torch.Tensor],
                          taps: Sequence[int]) -> Iterator[torch.Tensor]:
    """tap_partial("bwd_data", …) of each tap of `taps`, in that order. Every tap multiplies the same dy, so
    one matrix product per group computes them all: (C/g·T × K/g) by (K/g × positions), T times the rows of
    one tap's product (the float64 reference's col2im holds as many values), where a product per tap has
    too few rows to run at the matmul's speed (a ResNet stem's 3 input channels: 49 products of 3 rows)."""
    if params.c == params.k == params.groups:  # depthwise: a product per channel, nothing to stack
        yield from (tap_partial("bwd_data", params, inputs, tap) for tap in taps)
        return
    groups, count = params.groups, len(taps)
    k_group, c_group = params.k // groups, params.c // groups
    weights = [inputs["w"][(slice(None), slice(None), *tap_offsets(tap, params.kernel))] for tap in taps]  # (K, C/g)
    # rows ordered (channel, tap), so that one tap's rows of every group read as (N, C, *out_size) in place
    blocks = torch.stack([w.reshape(groups, k_group, c_group).mT for w in weights], dim=2)  # (g, C/g, T, K/g)
    columns = inputs["dy"].reshape(params.n, groups, k_group, -1)
    products = torch.matmul(blocks.reshape(groups, c_group * count, k_group), columns)
    products = products.view(params.n, groups, c_group, count, *params.out_size)
    for index, tap in enumerate(taps):
        gathered = products[:, :, :, index].reshape(params.n, params.c, *params.out_size)  # a view
        yield scattered_into_input(gathered, params, params.tap_positions(tap_offsets(tap, params.kernel)))


def _unit_convolution(x: torch.Tensor, w: torch.Tensor, groups: int, transposed: bool = False) -> torch.Tensor:
    """x (N, C_in, *spatial) convolved with the 1×1 weight w (K, C/groups), contiguous: a batched matmul per
    group. C_in = C, out K channels; `transposed` (conv_transpose's direction): C_in = K, out C channels."""
    n, channels, *spatial = x.shape
    blocks = w.reshape(groups, w.shape[0] // groups, w.shape[1])  # (groups, K/groups, C/groups)
    if transposed:
        blocks = blocks.mT
    blocks = blocks.contiguous()  # a tap's weight is a strided view, which BLAS would not take as it is
    columns = x.reshape(n, groups, channels // groups, -1)  # a copy where x is a strided window
    return torch.matmul(blocks, columns).reshape(n, blocks.shape[1] * groups, *spatial)


def scattered_into_input(gathered: torch.Tensor, params: ConvParams, window: tuple[slice, ...]) -> torch.Tensor:
    """gathered (N, C, *out_size) placed at the padded input's positions `window`, as a contiguous tensor of
    the unpadded input's shape: each dimension's positions moved by its begin padding and cut to the
    input (padding positions are dropped), zeros elsewhere. A padded tensor and the view of it that the
    input is would cost an allocation the size of the padded input and strided arithmetic downstream."""
    result = gathered.new_zeros((params.n, params.c, *params.size))
    source, target = [], []
    for positions, count, size, (begin, _) in zip(window, params.out_size, params.size, params.pads):
        start, step = positions.start, positions.step
        first = max(0, -((start - begin) // step))  # the first position at or after the input's start
        last = min(count - 1, (begin + size - 1 - start) // step)  # the last one before its end
        if last < first:
            return result  # this tap meets only padding
        source.append(slice(first, last + 1))
        target.append(slice(start + first * step - begin, start + last * step - begin + 1, step))
    result[(..., *target)] = gathered[(..., *source)]
    return result


__all__ = ["bwd_data_tap_partials", "scattered_into_input", "tap_offsets", "tap_partial"]
