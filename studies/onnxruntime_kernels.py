"""ONNX Runtime's own kernels (its CPU execution provider) behind e2egen's kernel contract
(docs/reference/kernel-contract.md): correct kernels nobody here wrote, for studies/onnxruntime_evidence.py. Each
builds a one-node ONNX model of the standard operator a user would export (opset 23), runs it in an
InferenceSession at the default graph optimisations, on the case's dtype, and converts the result back.
ONNX Runtime's CPU provider has no bf16 kernels for these operators and runs some f16 ones through casts it
inserts itself; what it cannot run is declined, as a library's kernel would. Not a dependency of e2egen:
`pip install onnxruntime onnx` first.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from e2egen.runner.errors import KernelDeclined

OPSET = 23  # RMSNormalization and Attention are opset 23's


@functools.cache
def _onnx() -> tuple[Any, Any, Any]:
    import onnx
    import onnxruntime

    return onnx, onnx.helper, onnxruntime


def _element_type(dtype: torch.dtype) -> int:
    onnx, _, _ = _onnx()
    types = {torch.float32: onnx.TensorProto.FLOAT, torch.float16: onnx.TensorProto.FLOAT16}
    if dtype not in types:
        raise KernelDeclined(f"ONNX Runtime's CPU provider has no {dtype} kernels for this operator")
    return types[dtype]


@functools.cache
def _session(op: str, element_type: int, inputs: tuple[str, ...], attributes: tuple[tuple[str, Any], ...] = (),
             constants: tuple[tuple[str, tuple[int, ...]], ...] = ()) -> Any:
    """One node of `op` on inputs of `element_type` (constants: int64 initializers, e.g. axes), its output of that
    type; an InferenceSession on the CPU provider."""
    onnx, helper, onnxruntime = _onnx()
    graph_inputs = [helper.make_tensor_value_info(name, element_type, None) for name in inputs]
    initializers = [helper.make_tensor(name, onnx.TensorProto.INT64, [len(values)], list(values))
                    for name, values in constants]
    node = helper.make_node(op, [*inputs, *(name for name, _ in constants)], ["y0"], **dict(attributes))
    graph = helper.make_graph([node], op, graph_inputs, [helper.make_tensor_value_info("y0", element_type, None)],
                              initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    try:
        return onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as err:  # no kernel for the type: ORT says NOT_IMPLEMENTED or INVALID_GRAPH (a type error)
        raise KernelDeclined(f"ONNX Runtime cannot run {op} on {element_type}: {str(err).splitlines()[0][:200]}") from err


def _run(op: str, tensors: dict[str, torch.Tensor], **options: Any) -> torch.Tensor:
    """`op` on the tensors (their logical values, any strides), every one in the first's dtype."""
    dtype = next(iter(tensors.values())).dtype
    session = _session(op, _element_type(dtype), tuple(tensors), **options)
    feeds = {name: tensor.detach().cpu().contiguous().numpy() for name, tensor in tensors.items()}
    return torch.from_numpy(np.ascontiguousarray(session.run(["y0"], feeds)[0]))


# -- element-wise -----------------------------------------------------------------------------------------------
def _unary(name: str, op: str, attributes: tuple[tuple[str, Any], ...] = ()):
    def call(x: torch.Tensor) -> torch.Tensor:
        return _run(op, {"x": x}, attributes=attributes)

    call.__name__ = call.__qualname__ = f"ort_{name}"
    return call


ort_exp, ort_log, ort_tanh, ort_sigmoid, ort_sqrt, ort_relu, ort_gelu, ort_gelu_tanh = (
    _unary(name, op, attributes) for name, op, attributes in (
        ("exp", "Exp", ()), ("log", "Log", ()), ("tanh", "Tanh", ()), ("sigmoid", "Sigmoid", ()), ("sqrt", "Sqrt", ()),
        ("relu", "Relu", ()), ("gelu", "Gelu", ()), ("gelu_tanh", "Gelu", (("approximate", "tanh"),))))


def ort_square(x: torch.Tensor) -> torch.Tensor:
    """x·x: ONNX's Mul of the tensor by itself (ONNX has no Square)."""
    return _run("Mul", {"x": x, "x2": x})


# -- reductions, scans, row normalisations ------------------------------------------------------------------------
def _reduce(op: str):
    def call(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
        axes = tuple(d % x.dim() for d in dim)
        return _run(op, {"x": x}, attributes=(("keepdims", 0),), constants=(("axes", axes),))

    call.__name__ = call.__qualname__ = f"ort_{op}"
    return call


ort_sum, ort_mean, ort_max = _reduce("ReduceSum"), _reduce("ReduceMean"), _reduce("ReduceMax")


def ort_cumsum(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    return _run("CumSum", {"x": x}, constants=(("axis", (dim % x.dim(),)),))


def ort_softmax(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    return _run("Softmax", {"x": x}, attributes=(("axis", dim % x.dim()),))


def ort_log_softmax(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    return _run("LogSoftmax", {"x": x}, attributes=(("axis", dim % x.dim()),))


def ort_logsumexp(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    return _run("ReduceLogSumExp", {"x": x}, attributes=(("keepdims", 0),), constants=(("axes", (dim % x.dim(),)),))


def ort_layer_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *,
                   normalized_shape: tuple[int, ...], eps: float) -> torch.Tensor:
    """LayerNormalization over the last len(normalized_shape) dims (a scale of ones where the case has none)."""
    scale = weight.reshape(normalized_shape) if weight is not None else torch.ones(normalized_shape, dtype=x.dtype)
    tensors = {"x": x, "scale": scale, **({"bias": bias.reshape(normalized_shape)} if bias is not None else {})}
    return _run("LayerNormalization", tensors, attributes=(("axis", -len(normalized_shape)), ("epsilon", eps)))


def ort_rms_norm(x: torch.Tensor, weight: torch.Tensor | None, *, normalized_shape: tuple[int, ...],
                 eps: float) -> torch.Tensor:
    scale = weight.reshape(normalized_shape) if weight is not None else torch.ones(normalized_shape, dtype=x.dtype)
    return _run("RMSNormalization", {"x": x, "scale": scale},
                attributes=(("axis", -len(normalized_shape)), ("epsilon", eps)))


# -- product sums ---------------------------------------------------------------------------------------------------
def ort_gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _run("MatMul", {"a": a, "b": b})


def ort_conv_fwd(x: torch.Tensor, w: torch.Tensor, *, stride, padding, dilation, groups: int) -> torch.Tensor:
    """Conv on NCHW and OIHW, as the ONNX operator takes them."""
    spatial = x.dim() - 2
    pairs = [(p, p) if isinstance(p, int) else tuple(p) for p in
             (padding if isinstance(padding, (tuple, list)) else [padding] * spatial)]
    pads = tuple(lo for lo, _ in pairs) + tuple(hi for _, hi in pairs)
    return _run("Conv", {"x": x, "w": w}, attributes=(("strides", tuple(stride)), ("pads", pads),
                                                      ("dilations", tuple(dilation)), ("group", groups)))


# -- attention ------------------------------------------------------------------------------------------------------
def ort_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float, causal: bool = False,
                  align: str = "top-left", window=None, kv_lengths=None, prefix_offset=None, score_scale=None,
                  score_bias=None, return_lse: bool = False, **rest: Any) -> torch.Tensor:
    """ONNX's Attention (opset 23) on (batch, heads, seq, dim) tensors: plain or top-left causal attention, grouped
    heads included; what it cannot express it declines."""
    if (window is not None or kv_lengths is not None or prefix_offset is not None or score_scale is not None
            or score_bias is not None or return_lse or rest.get("look_back") is not None
            or (causal and align != "top-left" and q.shape[2] != k.shape[2])):
        raise KernelDeclined("ONNX Attention: plain or top-left causal attention only")
    return _run("Attention", {"q": q, "k": k, "v": v}, attributes=(("is_causal", int(causal)), ("scale", scale)))


KERNELS = {
    **{op: f"ort_{op}" for op in ("exp", "log", "tanh", "sqrt", "square", "sigmoid", "relu", "gelu", "gelu_tanh",
                                  "sum", "mean", "max", "cumsum", "softmax", "log_softmax", "logsumexp", "layer_norm",
                                  "rms_norm", "gemm")},
    "conv2d": "ort_conv_fwd",
    "attention": "ort_attention",
}
assert all(name in globals() for name in KERNELS.values()), "a KERNELS entry names no kernel here"
