"""Alternate kernels for validation studies, following the runner's kernel contract.

The seed compared three validation methods: the kernel under test (xdlops)
against a CPU reference, against another GPU kernel, and a second algorithm
(non-xdlops: convolution as a gemm without mfma) against the CPU. These give
a study the same axes on any machine:

    im2col   the convolution lowered to a batched matrix product (the op's lowered form, OpNumerics.lowered:
             im2col and transposes) computed in f32 from the upcast inputs, rounded once to the
             output dtype. A gemm is the f32 matmul. Its own summation order, f32 accumulation.
    f32      the inputs upcast to f32, torch's own f32 kernel (oneDNN on the CPU, cuDNN on CUDA),
             rounded once.
    native   (CUDA only) torch's kernel with cuDNN disabled: torch's own CUDA convolution, the
             counterpart of the seed's "non-xdlops" GPU path. On the CPU torch's half-precision
             convolutions use no library, so this would repeat "torch": a study marks it skipped.

Names for a study's `kernel = ...`: BUILTIN maps each to its "module:function" per op and direction.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch

from e2egen import runner
from e2egen.runner.ops import numerics_of
from e2egen.runner.ops.numerics import Kernel

_DTYPE_NAMES = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}
_SPATIAL_KEYS = {1: "w", 2: "hw", 3: "dhw"}
BUILTIN = ("im2col", "f32", "native")
CUDA_ONLY = {"native": "torch's CPU convolutions use no cuDNN/oneDNN path for half precision, so 'native' "
                       "would repeat 'torch'; it needs CUDA (cuDNN disabled)"}


def impl_for(name: str, op: str, direction: str) -> str:
    """The "module:function" of built-in kernel `name` for an op and direction."""
    kind = "gemm" if op == "gemm" else "conv"
    return f"{__name__}:{name}_{kind}_{direction}"


def _problem(op: str, direction: str, dtype: torch.dtype, params: Mapping[str, Any]) -> runner.Problem:
    return runner.make_problem(op, direction, _DTYPE_NAMES[dtype], "nchw", params, (-1.0, 1.0), 0)


def _conv_params(x_shape: Sequence[int], w_shape: Sequence[int], stride: Sequence[int], padding: Sequence[Any],
                 dilation: Sequence[int], groups: int) -> tuple[str, dict[str, Any]]:
    dims = len(x_shape) - 2
    return f"conv{dims}d", {
        "n": x_shape[0], "c": x_shape[1], "k": w_shape[0], _SPATIAL_KEYS[dims]: list(x_shape[2:]),
        "kernel": list(w_shape[2:]), "stride": list(stride), "pad": list(padding), "dilation": list(dilation),
        "groups": groups,
    }


def _im2col(op: str, direction: str, dtype: torch.dtype, params: Mapping[str, Any],
            tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
    problem = _problem(op, direction, dtype, params)
    form = problem.numerics.lowered(problem, {name: t.float() for name, t in tensors.items()})
    return form.fold(torch.bmm(form.lhs.contiguous(), form.rhs.contiguous())).to(dtype)


# -- im2col + f32 matmul ---------------------------------------------------------------------
def im2col_conv_fwd(x, w, *, stride, padding, dilation, groups):
    op, params = _conv_params(x.shape, w.shape, stride, padding, dilation, groups)
    return _im2col(op, "fwd", x.dtype, params, {"x": x, "w": w})


def im2col_conv_bwd_data(dy, w, *, input_shape, stride, padding, dilation, groups):
    op, params = _conv_params(input_shape, w.shape, stride, padding, dilation, groups)
    return _im2col(op, "bwd_data", dy.dtype, params, {"dy": dy, "w": w})


def im2col_conv_bwd_weight(x, dy, *, weight_shape, stride, padding, dilation, groups):
    op, params = _conv_params(x.shape, weight_shape, stride, padding, dilation, groups)
    return _im2col(op, "bwd_weight", x.dtype, params, {"x": x, "dy": dy})


def im2col_gemm_fwd(a, b):
    return torch.matmul(a.float(), b.float()).to(a.dtype)


def _torch_conv(direction: str, geometry: Mapping[str, Any]) -> Kernel:
    """torch's convolution kernel for that many spatial dims: the conv op's own default (its numerics)."""
    return numerics_of(f"conv{len(geometry['stride'])}d").default_kernel(direction)


# -- torch's f32 kernel, rounded once -----------------------------------------------------------
def f32_conv_fwd(x, w, **geometry):
    return _torch_conv("fwd", geometry)(x.float(), w.float(), **geometry).to(x.dtype)


def f32_conv_bwd_data(dy, w, **geometry):
    return _torch_conv("bwd_data", geometry)(dy.float(), w.float(), **geometry).to(dy.dtype)


def f32_conv_bwd_weight(x, dy, **geometry):
    return _torch_conv("bwd_weight", geometry)(x.float(), dy.float(), **geometry).to(x.dtype)


def f32_gemm_fwd(a, b):
    return torch.matmul(a.float(), b.float()).to(a.dtype)


# -- torch without cuDNN (CUDA) ----------------------------------------------------------------
def native_conv_fwd(x, w, **geometry):
    with torch.backends.cudnn.flags(enabled=False):
        return _torch_conv("fwd", geometry)(x, w, **geometry)


def native_conv_bwd_data(dy, w, **geometry):
    with torch.backends.cudnn.flags(enabled=False):
        return _torch_conv("bwd_data", geometry)(dy, w, **geometry)


def native_conv_bwd_weight(x, dy, **geometry):
    with torch.backends.cudnn.flags(enabled=False):
        return _torch_conv("bwd_weight", geometry)(x, dy, **geometry)


def native_gemm_fwd(a, b):
    return a @ b
