"""Kernels for the element-wise evidence (studies/elementwise_evidence.py), through the plug-in contract
f(x) -> y or f(x, y) -> z (runner/ops/pointwise/spec.py): tensors in the case's dtype, result in it too.

CORRECT on paper (another formula, order or a fast approximation; the evidence checks each is really
inside the acceptance interval and says where it is not):
    exp_via_exp2       2^(x·log2 e), every step in f32
    exp_2ulp           an __expf-like exp: 2^(x·log2 e) in f32, then 2 f32 ulps off (alternating sign)
    silu_div           x / (1 + exp(-x)) in f32
    rsqrt_newton       a 12-bit approximation (rsqrtss-like, relative error 1.5·2^-12) and one Newton step in f32
    div_reciprocal     x · (1 / y) in f32
    sqrt_x_rsqrt       x · rsqrt(x) in f32
    gelu_erfc          x/2 · erfc(-x/√2) in f32
    sigmoid_tanh       0.5 + 0.5·tanh(x/2) in f32 (cancels for x << 0: loses f32's relative accuracy)
    tanh_exp           1 - 2 / (exp(2x) + 1) in f32 (cancels near 0: loses relative accuracy there)

WRONG (one bug each):
    exp_f16            the argument x·log2 e rounded to the input format before exp2 (computes in f16/bf16)
    rsqrt_4ulp         the correctly rounded rsqrt moved 4 ulps of the output format up (2 are allowed)
    gelu_tanh_form     GELU's tanh approximation where the erf form is asked
    sigmoid_overflow   exp(x) / (1 + exp(x)): inf / inf = NaN once exp(x) overflows f32 (x > 88.7)
    softmax_no_max     softmax without subtracting the row's max (overflows on large rows)
    layer_norm_unbiased layer_norm dividing the variance by n - 1 instead of n
"""
from __future__ import annotations

import math

import torch

LOG2E = 1.0 / math.log(2.0)
F32 = torch.float32


def _f32(x: torch.Tensor) -> torch.Tensor:
    return x.to(F32)


def _alternating(like: torch.Tensor) -> torch.Tensor:
    """+1, -1, +1, ... over the elements in logical order: errors of both signs, deterministic."""
    signs = 1.0 - 2.0 * (torch.arange(like.numel(), device=like.device) % 2).to(torch.float64)
    return signs.reshape(like.shape)


def _ulps_off(exact64: torch.Tensor, ulps: int, dtype: torch.dtype, signs: torch.Tensor | None = None) -> torch.Tensor:
    """exact64 rounded to dtype, then moved `ulps` steps of dtype (up, or by `signs` per element)."""
    value = exact64.to(dtype)
    up = torch.full_like(value, math.inf)
    down = torch.full_like(value, -math.inf)
    target = up if signs is None else torch.where(signs > 0, up, down)
    for _ in range(ulps):
        value = torch.nextafter(value, target)
    return value


# -- correct on paper --------------------------------------------------------------------------------
def exp_via_exp2(x):
    return torch.exp2(_f32(x) * LOG2E).to(x.dtype)


def exp_2ulp(x):
    result = torch.exp2(_f32(x) * LOG2E)
    return _ulps_off(result.double(), 2, F32, _alternating(result)).to(x.dtype)


def silu_div(x):
    x32 = _f32(x)
    return (x32 / (1.0 + torch.exp(-x32))).to(x.dtype)


def rsqrt_newton(x):
    x32 = _f32(x)
    # the hardware approximation: 12 good bits, modelled as the exact value off by 1.5·2^-12 relative
    approx = (torch.rsqrt(x32.double()) * (1.0 + 1.5 * 2.0 ** -12 * _alternating(x32))).to(F32)
    return (approx * (1.5 - 0.5 * x32 * approx * approx)).to(x.dtype)


def div_reciprocal(x, y):
    return (_f32(x) * (1.0 / _f32(y))).to(x.dtype)


def sqrt_x_rsqrt(x):
    x32 = _f32(x)
    return (x32 * torch.rsqrt(x32)).to(x.dtype)


def gelu_erfc(x):
    x32 = _f32(x)
    return (0.5 * x32 * torch.erfc(-x32 * (1.0 / math.sqrt(2.0)))).to(x.dtype)


def sigmoid_tanh(x):
    return (0.5 + 0.5 * torch.tanh(0.5 * _f32(x))).to(x.dtype)


def tanh_exp(x):
    x32 = _f32(x)
    return (1.0 - 2.0 / (torch.exp(2.0 * x32) + 1.0)).to(x.dtype)


# -- wrong ---------------------------------------------------------------------------------------------
def exp_f16(x):
    argument = (_f32(x) * LOG2E).to(x.dtype)  # rounded to the input format: ~2^-11 relative of up to 16
    return torch.exp2(_f32(argument)).to(x.dtype)


def rsqrt_4ulp(x):
    return _ulps_off(torch.rsqrt(x.double()), 4, x.dtype)


def gelu_tanh_form(x):
    return torch.nn.functional.gelu(_f32(x), approximate="tanh").to(x.dtype)


def sigmoid_overflow(x):
    e = torch.exp(_f32(x))
    return (e / (1.0 + e)).to(x.dtype)


def softmax_no_max(x, *, dim):
    e = torch.exp(_f32(x))
    return (e / e.sum(dim, keepdim=True)).to(x.dtype)


def layer_norm_unbiased(x, weight, bias, *, normalized_shape, eps):
    dims = tuple(range(x.dim() - len(normalized_shape), x.dim()))
    x32 = _f32(x)
    mean = x32.mean(dims, keepdim=True)
    var = ((x32 - mean) ** 2).sum(dims, keepdim=True) / (math.prod(normalized_shape) - 1)
    y = (x32 - mean) * torch.rsqrt(var + eps)
    if weight is not None:
        y = y * _f32(weight) + _f32(bias)
    return y.to(x.dtype)
