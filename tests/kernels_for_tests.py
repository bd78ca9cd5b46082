"""Small plug-in kernels for the runner's tests: well-behaved ones that check
the contract's arguments, and broken ones that break it in one way each."""
from __future__ import annotations

import torch
import torch.nn.functional as F

NOT_CALLABLE = 42
received: list[dict] = []  # what record_conv_fwd saw, for layout tests (tests clear it)

_CONV = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}


def _conv(x, w, stride, padding, dilation, groups):
    return _CONV[x.dim()](x, w, None, stride, padding, dilation, groups)


def _check_geometry(stride, padding, dilation, groups):
    for value in (stride, padding, dilation):
        if not (isinstance(value, tuple) and all(isinstance(v, int) for v in value)):
            raise TypeError(f"geometry must be tuples of ints, got {value!r}")
    if not isinstance(groups, int):
        raise TypeError(f"groups must be an int, got {groups!r}")


def conv_fwd(x, w, *, stride, padding, dilation, groups):
    _check_geometry(stride, padding, dilation, groups)
    return _conv(x, w, stride, padding, dilation, groups)


def conv_bwd_data(dy, w, *, input_shape, stride, padding, dilation, groups):
    _check_geometry(stride, padding, dilation, groups)
    if not isinstance(input_shape, tuple):
        raise TypeError(f"input_shape must be a tuple, got {input_shape!r}")
    x = torch.zeros(input_shape, dtype=dy.dtype, device=dy.device, requires_grad=True)
    with torch.enable_grad():
        y = _conv(x, w, stride, padding, dilation, groups)
        (dx,) = torch.autograd.grad(y, x, dy)
    return dx


def conv_bwd_weight(x, dy, *, weight_shape, stride, padding, dilation, groups):
    _check_geometry(stride, padding, dilation, groups)
    w = torch.zeros(weight_shape, dtype=x.dtype, device=x.device, requires_grad=True)
    with torch.enable_grad():
        y = _conv(x, w, stride, padding, dilation, groups)
        (dw,) = torch.autograd.grad(y, w, dy)
    return dw


def gemm(a, b):
    return a @ b


def record_conv_fwd(x, w, **geometry):
    received.append({"x": x.clone(memory_format=torch.preserve_format), "w": w.clone(memory_format=torch.preserve_format)})
    return _conv(x, w, **geometry)


def wrong_shape_conv_fwd(x, w, **geometry):
    return _conv(x, w, **geometry)[..., 1:]


def wrong_dtype_conv_fwd(x, w, **geometry):
    return _conv(x, w, **geometry).to(torch.float64)


def wrong_device_gemm(a, b):
    return torch.empty((*a.shape[:-1], b.shape[-1]), dtype=a.dtype, device="meta")


def returns_list_gemm(a, b):
    return (a @ b).tolist()


def raises_gemm(a, b):
    raise RuntimeError("boom: tile size 0 is not a valid configuration\nsecond line of detail")


def out_of_memory_gemm(a, b):
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")


def nan_gemm(a, b):
    return torch.full((*a.shape[:-1], b.shape[-1]), float("nan"), dtype=a.dtype, device=a.device)
