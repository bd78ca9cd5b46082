"""OpenVINO's own kernels (its CPU plugin) behind e2egen's kernel contract (docs/reference/kernel-contract.md):
correct kernels nobody here wrote, for studies/openvino_evidence.py. Each builds an OpenVINO model of the opset
operations its frontends produce for the op (MVN and an affine step for layer_norm; x·rsqrt(mean(x²) + eps) for
rms_norm), compiles it for the CPU with the inference precision hint f32 (as a user who needs f32 results sets it:
the plugin's default on a CPU with AVX-512 bf16 is bf16, which runs f32 models in bf16), runs it on the case's
dtype, and converts the result back. What it cannot express it declines. Not a dependency of e2egen:
`pip install openvino` first.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np
import torch

from e2egen.runner.errors import KernelDeclined

CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}


@functools.cache
def _openvino() -> tuple[Any, Any, Any]:
    import openvino
    import openvino.opset13 as opset

    return openvino, opset, openvino.Core()


def _element_type(dtype: torch.dtype) -> Any:
    openvino, _, _ = _openvino()
    types = {torch.float32: openvino.Type.f32, torch.float16: openvino.Type.f16, torch.bfloat16: openvino.Type.bf16}
    if dtype not in types:
        raise KernelDeclined(f"OpenVINO: no {dtype} inputs here")
    return types[dtype]


def _to_openvino(tensor: torch.Tensor) -> Any:
    """The tensor's values (logical order) as an OpenVINO tensor of its format (bf16 bit for bit)."""
    openvino, _, _ = _openvino()
    values = tensor.detach().cpu().contiguous()
    if values.dtype != torch.bfloat16:
        return openvino.Tensor(values.numpy())
    out = openvino.Tensor(openvino.Type.bf16, openvino.Shape(list(values.shape)))
    out.data[...] = values.view(torch.int16).numpy().view(out.data.dtype)  # the plugin hands bf16 as 16-bit words
    return out


def _to_torch(array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    values = np.ascontiguousarray(array)
    if dtype == torch.bfloat16:
        return torch.from_numpy(values.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(values.copy())


@functools.cache
def _compiled(build: Callable[..., Any], element_type: Any, shapes: tuple[tuple[int, ...], ...], options: tuple) -> Any:
    openvino, opset, core = _openvino()
    parameters = [opset.parameter(list(shape), element_type) for shape in shapes]
    result = build(opset, *parameters, **dict(options))
    return core.compile_model(openvino.Model([result], parameters), "CPU", CONFIG)


def _run(build: Callable[..., Any], *tensors: torch.Tensor, **options: Any) -> torch.Tensor:
    """build(opset, *parameters, **options) on the tensors (every one in the first's dtype), compiled once per
    dtype, shapes and options."""
    dtype = tensors[0].dtype
    compiled = _compiled(build, _element_type(dtype), tuple(tuple(t.shape) for t in tensors),
                         tuple(sorted(options.items())))
    return _to_torch(compiled([_to_openvino(t) for t in tensors])[0], dtype)


# -- element-wise -----------------------------------------------------------------------------------------------
def _unary(name: str, build: Callable[..., Any]):
    def call(x: torch.Tensor) -> torch.Tensor:
        return _run(build, x)

    call.__name__ = call.__qualname__ = f"ov_{name}"
    return call


ov_exp = _unary("exp", lambda ops, x: ops.exp(x))
ov_log = _unary("log", lambda ops, x: ops.log(x))
ov_tanh = _unary("tanh", lambda ops, x: ops.tanh(x))
ov_sigmoid = _unary("sigmoid", lambda ops, x: ops.sigmoid(x))
ov_sqrt = _unary("sqrt", lambda ops, x: ops.sqrt(x))
ov_relu = _unary("relu", lambda ops, x: ops.relu(x))
ov_silu = _unary("silu", lambda ops, x: ops.swish(x, ops.convert_like(ops.constant(np.float32(1.0)), x)))
ov_square = _unary("square", lambda ops, x: ops.multiply(x, x))
ov_gelu = _unary("gelu", lambda ops, x: ops.gelu(x, "erf"))
ov_gelu_tanh = _unary("gelu_tanh", lambda ops, x: ops.gelu(x, "tanh"))


# -- reductions, scans, row normalisations --------------------------------------------------------------------------
def _axes(ops, axes: tuple[int, ...]) -> Any:
    return ops.constant(np.array(axes, dtype=np.int64))


def _reduce(name: str, reduce: str):
    def call(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
        return _run(lambda ops, t, axes: getattr(ops, reduce)(t, _axes(ops, axes), False), x,
                    axes=tuple(d % x.dim() for d in dim))

    call.__name__ = call.__qualname__ = f"ov_{name}"
    return call


ov_sum, ov_mean, ov_max = _reduce("sum", "reduce_sum"), _reduce("mean", "reduce_mean"), _reduce("max", "reduce_max")


def ov_cumsum(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    return _run(lambda ops, t, axis: ops.cumsum(t, ops.constant(np.int64(axis))), x, axis=dim % x.dim())


def ov_softmax(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    return _run(lambda ops, t, axis: ops.softmax(t, axis), x, axis=dim % x.dim())


def ov_log_softmax(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    return _run(lambda ops, t, axis: ops.log_softmax(t, axis), x, axis=dim % x.dim())


def _layer_norm(ops, x, weight=None, bias=None, *, axes: tuple[int, ...], eps: float):
    y = ops.mvn(x, _axes(ops, axes), True, eps, "inside_sqrt")
    if weight is not None:
        y = ops.multiply(y, weight)
    return ops.add(y, bias) if bias is not None else y


def ov_layer_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *,
                  normalized_shape: tuple[int, ...], eps: float) -> torch.Tensor:
    """MVN over the normalised dims, then the weight and bias, as OpenVINO's frontends write layer_norm."""
    axes = tuple(range(x.dim() - len(normalized_shape), x.dim()))
    affine = [t.reshape(normalized_shape).to(x.dtype) for t in (weight, bias) if t is not None]
    if weight is None and bias is not None:
        raise KernelDeclined("OpenVINO study kernel: layer_norm with a bias and no weight is not built here")
    return _run(_layer_norm, x, *affine, axes=axes, eps=eps)


def _rms_norm(ops, x, weight=None, *, axes: tuple[int, ...], eps: float):
    mean_square = ops.reduce_mean(ops.multiply(x, x), _axes(ops, axes), True)
    eps_constant = ops.convert_like(ops.constant(np.float32(eps)), x)
    y = ops.multiply(x, ops.power(ops.add(mean_square, eps_constant),
                                  ops.convert_like(ops.constant(np.float32(-0.5)), x)))
    return ops.multiply(y, weight) if weight is not None else y


def ov_rms_norm(x: torch.Tensor, weight: torch.Tensor | None, *, normalized_shape: tuple[int, ...],
                eps: float) -> torch.Tensor:
    """x·(mean(x²) + eps)^-½·w, the decomposition OpenVINO's frontends produce (its plugin fuses it)."""
    axes = tuple(range(x.dim() - len(normalized_shape), x.dim()))
    tensors = [x] + ([weight.reshape(normalized_shape).to(x.dtype)] if weight is not None else [])
    return _run(_rms_norm, *tensors, axes=axes, eps=eps)


# -- product sums ---------------------------------------------------------------------------------------------------
def ov_gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _run(lambda ops, left, right: ops.matmul(left, right, False, False), a, b)


def ov_conv_fwd(x: torch.Tensor, w: torch.Tensor, *, stride, padding, dilation, groups: int) -> torch.Tensor:
    """Convolution on NCHW and OIHW, as the operation takes them (groups of one)."""
    if groups != 1:
        raise KernelDeclined("OpenVINO study kernel: grouped convolution is not built here")
    spatial = x.dim() - 2
    pairs = [(p, p) if isinstance(p, int) else tuple(p) for p in
             (padding if isinstance(padding, (tuple, list)) else [padding] * spatial)]
    return _run(lambda ops, t, f, strides, begin, end, dilations: ops.convolution(t, f, list(strides), list(begin),
                                                                                 list(end), list(dilations)),
                x, w, strides=tuple(stride), begin=tuple(lo for lo, _ in pairs), end=tuple(hi for _, hi in pairs),
                dilations=tuple(dilation))


# -- attention ------------------------------------------------------------------------------------------------------
def _sdpa(ops, q, k, v, *, scale: float, causal: bool):
    return ops.scaled_dot_product_attention(q, k, v, scale=ops.convert_like(ops.constant(np.float32(scale)), q),
                                            causal=causal)


def ov_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float, causal: bool = False,
                 align: str = "top-left", window=None, kv_lengths=None, prefix_offset=None, score_scale=None,
                 score_bias=None, return_lse: bool = False, **rest: Any) -> torch.Tensor:
    """ScaledDotProductAttention (opset 13) on (batch, heads, seq, dim) tensors: plain or top-left causal
    attention, every q head with its own kv head; what it cannot express it declines."""
    if (window is not None or kv_lengths is not None or prefix_offset is not None or score_scale is not None
            or score_bias is not None or return_lse or rest.get("look_back") is not None or q.shape[1] != k.shape[1]
            or (causal and align != "top-left" and q.shape[2] != k.shape[2])):
        raise KernelDeclined("OpenVINO ScaledDotProductAttention: plain or top-left causal attention, "
                             "as many kv heads as q heads")
    return _run(_sdpa, q, k, v, scale=scale, causal=causal)


KERNELS = {
    **{op: f"ov_{op}" for op in ("exp", "log", "tanh", "sqrt", "square", "sigmoid", "silu", "relu", "gelu", "gelu_tanh",
                                 "sum", "mean", "max", "cumsum", "softmax", "log_softmax", "layer_norm", "rms_norm",
                                 "gemm")},
    "conv2d": "ov_conv_fwd",
    "attention": "ov_attention",
}
assert all(name in globals() for name in KERNELS.values()), "a KERNELS entry names no kernel here"
