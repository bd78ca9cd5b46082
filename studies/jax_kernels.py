"""JAX's own kernels (XLA on the CPU) behind e2egen's kernel contract (docs/reference/kernel-contract.md): correct
kernels nobody here wrote, for studies/third_party_evidence.py. Each converts the torch tensors it is given to JAX
arrays (bf16 through ml_dtypes, bit for bit), calls the library's function as a JAX user would, in the case's
dtype, and converts the result back. JAX is not a dependency of e2egen: `pip install "jax[cpu]"` first.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch


@functools.cache
def _jax() -> tuple[Any, Any, Any]:
    import jax
    import jax.numpy as jnp
    import ml_dtypes

    return jax, jnp, ml_dtypes


def to_jax(tensor: torch.Tensor) -> Any:
    """The tensor's values (logical order; any strides) as a JAX array of the same format."""
    _, jnp, ml_dtypes = _jax()
    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype == torch.bfloat16:
        return jnp.asarray(tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16))
    return jnp.asarray(tensor.numpy())


def to_torch(array: Any) -> torch.Tensor:
    _, _, ml_dtypes = _jax()
    values = np.asarray(array)
    if values.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(values.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(values.copy())


def _unary(name: str):
    def call(x: torch.Tensor) -> torch.Tensor:
        jax, jnp, _ = _jax()
        function = {"exp": jnp.exp, "log": jnp.log, "log1p": jnp.log1p, "tanh": jnp.tanh, "sqrt": jnp.sqrt,
                    "rsqrt": jax.lax.rsqrt, "square": jnp.square, "sigmoid": jax.nn.sigmoid, "silu": jax.nn.silu,
                    "relu": jax.nn.relu, "gelu": functools.partial(jax.nn.gelu, approximate=False),
                    "gelu_tanh": functools.partial(jax.nn.gelu, approximate=True)}[name]
        return to_torch(function(to_jax(x)))

    call.__name__ = call.__qualname__ = f"jax_{name}"
    return call


jax_exp, jax_log, jax_log1p, jax_tanh, jax_sqrt, jax_rsqrt, jax_square, jax_sigmoid, jax_silu, jax_relu, jax_gelu, \
    jax_gelu_tanh = (_unary(name) for name in ("exp", "log", "log1p", "tanh", "sqrt", "rsqrt", "square", "sigmoid",
                                               "silu", "relu", "gelu", "gelu_tanh"))


# -- reductions -------------------------------------------------------------------------------------------------
def jax_sum(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    return to_torch(_jax()[1].sum(to_jax(x), axis=dim))


def jax_mean(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    return to_torch(_jax()[1].mean(to_jax(x), axis=dim))


def jax_max(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    return to_torch(_jax()[1].max(to_jax(x), axis=dim))


def jax_var(x: torch.Tensor, *, dim: tuple[int, ...], correction: int) -> torch.Tensor:
    return to_torch(_jax()[1].var(to_jax(x), axis=dim, ddof=correction))


def jax_cumsum(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    return to_torch(_jax()[1].cumsum(to_jax(x), axis=dim))


# -- normalisations ---------------------------------------------------------------------------------------------
def jax_softmax(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    return to_torch(_jax()[0].nn.softmax(to_jax(x), axis=dim))


def jax_log_softmax(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    return to_torch(_jax()[0].nn.log_softmax(to_jax(x), axis=dim))


def jax_logsumexp(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    return to_torch(_jax()[0].nn.logsumexp(to_jax(x), axis=dim))


def _normalised(x: torch.Tensor, normalized_shape: tuple[int, ...], eps: float, centred: bool) -> Any:
    """As Flax's LayerNorm and RMSNorm compute it: statistics in f32 for a narrow input, the result in its dtype."""
    _, jnp, _ = _jax()
    values = to_jax(x)
    axes = tuple(range(values.ndim - len(normalized_shape), values.ndim))
    wide = values.astype(jnp.float32)
    mean = wide.mean(axis=axes, keepdims=True) if centred else 0.0
    second = jnp.square(wide - mean).mean(axis=axes, keepdims=True)
    return (wide - mean) * _jax()[0].lax.rsqrt(second + eps)


def jax_layer_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *,
                   normalized_shape: tuple[int, ...], eps: float) -> torch.Tensor:
    _, jnp, _ = _jax()
    y = _normalised(x, normalized_shape, eps, centred=True)
    if weight is not None:
        y = y * to_jax(weight).astype(jnp.float32)
    if bias is not None:
        y = y + to_jax(bias).astype(jnp.float32)
    return to_torch(y.astype(to_jax(x).dtype))


def jax_rms_norm(x: torch.Tensor, weight: torch.Tensor | None, *, normalized_shape: tuple[int, ...],
                 eps: float) -> torch.Tensor:
    _, jnp, _ = _jax()
    y = _normalised(x, normalized_shape, eps, centred=False)
    if weight is not None:
        y = y * to_jax(weight).astype(jnp.float32)
    return to_torch(y.astype(to_jax(x).dtype))


# -- product sums -----------------------------------------------------------------------------------------------
def jax_gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """jnp.matmul in the inputs' dtype, as a JAX user writes it."""
    return to_torch(_jax()[1].matmul(to_jax(a), to_jax(b)))


def jax_conv_fwd(x: torch.Tensor, w: torch.Tensor, *, stride, padding, dilation, groups: int) -> torch.Tensor:
    """lax.conv_general_dilated, NCHW and OIHW as torch's, in the inputs' dtype."""
    jax, _, _ = _jax()
    spatial = x.dim() - 2
    pairs = [(p, p) if isinstance(p, int) else tuple(p) for p in
             (padding if isinstance(padding, (tuple, list)) else [padding] * spatial)]
    names = {1: ("NCH", "OIH", "NCH"), 2: ("NCHW", "OIHW", "NCHW"), 3: ("NCDHW", "OIDHW", "NCDHW")}[spatial]
    y = jax.lax.conv_general_dilated(to_jax(x), to_jax(w), window_strides=tuple(stride), padding=pairs,
                                     rhs_dilation=tuple(dilation), dimension_numbers=names,
                                     feature_group_count=groups)
    return to_torch(y)


# -- attention ------------------------------------------------------------------------------------------------
def jax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float, causal: bool = False,
                  align: str = "top-left", window=None, kv_lengths=None, prefix_offset=None, score_scale=None,
                  score_bias=None, return_lse: bool = False, **rest: Any) -> torch.Tensor:
    """jax.nn.dot_product_attention (XLA's implementation) on (batch, heads, seq, dim) tensors: plain or top-left
    causal attention, grouped heads included. What it cannot express it declines, as a library's kernel would."""
    from e2egen.runner.errors import KernelDeclined

    if (window is not None or kv_lengths is not None or prefix_offset is not None or score_scale is not None
            or score_bias is not None or return_lse or rest.get("look_back") is not None or q.dtype not in
            (torch.float32, torch.float16, torch.bfloat16) or (causal and align != "top-left" and q.shape[2] != k.shape[2])):
        raise KernelDeclined("jax.nn.dot_product_attention: plain or top-left causal attention in f32, f16 or bf16 only")
    jax, jnp, _ = _jax()
    heads_last = [jnp.swapaxes(to_jax(t), 1, 2) for t in (q, k, v)]  # (batch, seq, heads, dim), as JAX takes them
    o = jax.nn.dot_product_attention(*heads_last, scale=scale, is_causal=causal, implementation="xla")
    return to_torch(jnp.swapaxes(o, 1, 2))


KERNELS = {
    **{op: f"jax_{op}" for op in ("exp", "log", "log1p", "tanh", "sqrt", "rsqrt", "square", "sigmoid", "silu", "relu",
                                  "gelu", "gelu_tanh", "sum", "mean", "max", "var", "cumsum", "softmax", "log_softmax",
                                  "logsumexp", "layer_norm", "rms_norm", "gemm")},
    "conv2d": "jax_conv_fwd",
    "attention": "jax_attention",
}
assert all(name in globals() for name in KERNELS.values()), "a KERNELS entry names no kernel here"
