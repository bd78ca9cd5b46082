"""The element-wise math functions e2egen tests, each defined three times: exactly (float64), as an
acceptance interval built from runner.intervals' primitives (how the CTS composes inherited
accuracies), and as torch's own kernel (the default kernel).

Inherited definitions follow the usual formulas: sigmoid(x) = 1 / (1 + exp(-x)); silu(x) = x·sigmoid(x);
gelu(x) = x/2·(1 + erf(x/√2)); gelu_tanh(x) = x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³))); sqrt(x) =
1 / rsqrt(x) and pow(x, y) = exp(y·log x) (as the CTS defines them). A kernel computing another correct
formula (sigmoid through tanh, silu as x / (1 + exp(-x))) lands inside where its steps are as accurate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import torch

from e2egen.runner import intervals as iv
from e2egen.runner.intervals import Interval, IntervalContext
from e2egen.runner.ops.function_signatures import SIGNATURES, FunctionSignature


@dataclass(frozen=True)
class MathFunction:
    signature: FunctionSignature
    exact: Callable[..., torch.Tensor]  # float64 in, float64 out
    interval: Callable[..., Interval]  # (*argument intervals, context) -> Interval
    kernel: Callable[..., torch.Tensor]  # torch's own, on the case's dtype

    @property
    def name(self) -> str:
        return self.signature.name

    @property
    def inputs(self) -> tuple[str, ...]:
        return self.signature.inputs

    @property
    def domain(self) -> str:
        return self.signature.domain


def _sigmoid_interval(x: Interval, c: IntervalContext) -> Interval:
    one = iv.constant(1.0, x.lo, c)
    return iv.div(one, iv.add(one, iv.exp(iv.negate(x), c), c), c)


def _silu_interval(x: Interval, c: IntervalContext) -> Interval:
    return iv.mul(x, _sigmoid_interval(x, c), c)


def _gelu_interval(x: Interval, c: IntervalContext) -> Interval:
    half_x = iv.mul(iv.constant(0.5, x.lo, c), x, c)
    erf_term = iv.erf(iv.mul(x, iv.constant(1 / math.sqrt(2.0), x.lo, c), c), c)
    return iv.mul(half_x, iv.add(iv.constant(1.0, x.lo, c), erf_term, c), c)


def _gelu_tanh_interval(x: Interval, c: IntervalContext) -> Interval:
    cube = iv.mul(x, iv.mul(x, x, c), c)
    inner = iv.add(x, iv.mul(iv.constant(0.044715, x.lo, c), cube, c), c)
    tanh_term = iv.tanh(iv.mul(iv.constant(math.sqrt(2.0 / math.pi), x.lo, c), inner, c), c)
    half_x = iv.mul(iv.constant(0.5, x.lo, c), x, c)
    return iv.mul(half_x, iv.add(iv.constant(1.0, x.lo, c), tanh_term, c), c)


def _sqrt_interval(x: Interval, c: IntervalContext) -> Interval:
    return iv.div(iv.constant(1.0, x.lo, c), iv.rsqrt(x, c), c)


def _pow_interval(x: Interval, y: Interval, c: IntervalContext) -> Interval:
    return iv.exp(iv.mul(y, iv.log(x, c), c), c)


def _primitive(name: str) -> Callable[..., Interval]:
    def interval(x: Interval, c: IntervalContext) -> Interval:
        return getattr(iv, name)(x, c)

    return interval


def _square_interval(x: Interval, c: IntervalContext) -> Interval:
    return iv.mul(x, x, c)


def _div_interval(x: Interval, y: Interval, c: IntervalContext) -> Interval:
    return iv.div(x, y, c)


def _torch(name: str) -> Callable[..., torch.Tensor]:
    def call(*tensors: torch.Tensor) -> torch.Tensor:
        return getattr(torch, name)(*tensors)

    call.__name__ = f"torch_{name}"
    return call


def _gelu(approximate: str) -> Callable[..., torch.Tensor]:
    def call(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x, approximate=approximate)

    call.__name__ = "torch_gelu" if approximate == "none" else "torch_gelu_tanh"
    return call


def _silu(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(x)


def _square(x: torch.Tensor) -> torch.Tensor:
    return x * x


FUNCTIONS: Mapping[str, MathFunction] = {name: MathFunction(SIGNATURES[name], *parts) for name, parts in (
    ("exp", (_torch("exp"), _primitive("exp"), _torch("exp"))),
    ("log", (_torch("log"), _primitive("log"), _torch("log"))),
    ("log1p", (_torch("log1p"), _primitive("log1p"), _torch("log1p"))),
    ("tanh", (_torch("tanh"), _primitive("tanh"), _torch("tanh"))),
    ("sigmoid", (_torch("sigmoid"), _sigmoid_interval, _torch("sigmoid"))),
    ("silu", (_silu, _silu_interval, _silu)),
    ("gelu", (_gelu("none"), _gelu_interval, _gelu("none"))),
    ("gelu_tanh", (_gelu("tanh"), _gelu_tanh_interval, _gelu("tanh"))),
    ("rsqrt", (_torch("rsqrt"), _primitive("rsqrt"), _torch("rsqrt"))),
    ("sqrt", (_torch("sqrt"), _sqrt_interval, _torch("sqrt"))),
    ("square", (_square, _square_interval, _square)),
    ("relu", (_torch("relu"), _primitive("relu"), _torch("relu"))),
    ("div", (_torch("div"), _div_interval, _torch("div"))),
    ("pow", (_torch("pow"), _pow_interval, _torch("pow"))),
)}
