"""A 3-d convolution as 2-d convolutions, one per depth tap: the reference's (and the bound's Σ|x|·|w|)
way to run conv3d on the CPU where that is faster than torch's conv3d (by_depth_is_faster).

Depth tap t of the kernel meets input depth od·s + t·d for output depth od, so the output depths stack
as a batch of 2-d problems: N·D_out images of C channels, convolved with the weight's depth slice t,
summed over t. The sums run in another order than conv3d's, which moves the float64 result by a few
float64 ulps (the reference's own error, far below any bound it meets).
"""
from __future__ import annotations

from typing import Mapping

import torch
import torch.nn.functional as F
from torch.nn import grad

from e2egen.runner.ops.product_sum.conv import ConvParams
from e2egen.runner.ops.product_sum.kernels import pad_explicitly, unpadded


def _depth_rows(params: ConvParams, tap: int) -> slice:
    """The padded input depths that depth tap `tap` meets, one per output depth."""
    return params.tap_positions((tap, 0, 0))[0]


def _as_images(volume: torch.Tensor) -> torch.Tensor:
    """(N, C, D, H, W) -> (N·D, C, H, W): each depth an image."""
    n, c, d, h, w = volume.shape
    return volume.transpose(1, 2).reshape(n * d, c, h, w)


def _as_volume(images: torch.Tensor, n: int) -> torch.Tensor:
    """(N·D, C, H, W) -> (N, C, D, H, W), a view."""
    nd, c, h, w = images.shape
    return images.view(n, nd // n, c, h, w).transpose(1, 2)


def by_depth_is_faster(params: ConvParams, direction: str, dtype: torch.dtype) -> bool:
    """Where the depth taps beat torch's CPU conv3d, as measured (benchmarks/bench_conv3d.py: C3D 64→64,
    8×28×28, 3×3×3, torch 2.13, 2 cores): one sample, whose 3-d windows torch unfolds (vol2col) 1.7–3.7×
    slower, and float64 bwd_data at any batch (col2vol: 2.5×). Larger f32 batches go to oneDNN and larger
    float64 fwd and bwd_weight batches to torch's batched path, both faster than the taps (0.7–0.9×); a
    depth-1 kernel has no taps to gain from."""
    if params.kernel[0] == 1:
        return False
    return params.n == 1 or (dtype == torch.float64 and direction == "bwd_data")


def conv3d_by_depth(direction: str, params: ConvParams, tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """conv3d's output for `direction` (y, dx or dw, logical layout) from logical tensors x, w, dy."""
    plane = {"stride": params.stride[1:], "dilation": params.dilation[1:], "groups": params.groups}
    depth_taps, n = params.kernel[0], params.n
    if direction == "fwd":
        x = pad_explicitly(tensors["x"], params.pads)
        w = tensors["w"]
        total = None
        for tap in range(depth_taps):
            part = F.conv2d(_as_images(x[:, :, _depth_rows(params, tap)]), w[:, :, tap], **plane)
            total = part if total is None else total.add_(part)
        return _as_volume(total, n)
    dy_images = _as_images(tensors["dy"])
    if direction == "bwd_data":
        w = tensors["w"]
        dx = dy_images.new_zeros((n, params.c, *params.padded_size))
        image_shape = (dy_images.shape[0], params.c, *params.padded_size[1:])
        for tap in range(depth_taps):
            part = grad.conv2d_input(image_shape, w[:, :, tap], dy_images, padding=0, **plane)
            dx[:, :, _depth_rows(params, tap)] += _as_volume(part, n)
        return unpadded(dx, params.size, params.pads)
    if direction != "bwd_weight":
        raise ValueError(f"a convolution's direction is fwd, bwd_data or bwd_weight, not {direction!r}")
    x = pad_explicitly(tensors["x"], params.pads)
    plane_weight = (params.k, params.c // params.groups, *params.kernel[1:])
    parts = [grad.conv2d_weight(_as_images(x[:, :, _depth_rows(params, tap)]), plane_weight, dy_images, padding=0, **plane)
             for tap in range(depth_taps)]
    return torch.stack(parts, dim=2)


__all__ = ["by_depth_is_faster", "conv3d_by_depth"]
