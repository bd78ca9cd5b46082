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
from e2egen.runner.f32_copies import on_f32_copies
from e2egen.runner.ops.function_signatures import BACKWARD_SIGNATURES, SIGNATURES, FunctionSignature


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



# -- backward: grad_x = grad_y·f'(·) from grad_y and what torch's autograd saves (function_signatures.BACKWARD_SAVES) --
def _one(like: Interval, c: IntervalContext) -> Interval:
    return iv.constant(1.0, like.lo, c)


def _exp_backward(g: Interval, y: Interval, c: IntervalContext) -> Interval:
    return iv.mul(g, y, c)


def _tanh_backward(g: Interval, y: Interval, c: IntervalContext) -> Interval:
    """g·(1 - y²), with 1 - y² by either formula kernels use: 1 - y·y (torch's), or (1 - y)(1 + y), which does
    not cancel near |y| = 1 but rounds once more where y is small: the hull of the two."""
    one = _one(y, c)
    squared = iv.add(one, iv.negate(iv.mul(y, y, c)), c)
    factored = iv.mul(iv.add(one, iv.negate(y), c), iv.add(one, y, c), c)
    either = Interval(torch.minimum(squared.lo, factored.lo), torch.maximum(squared.hi, factored.hi))
    return iv.mul(g, either, c)


def _relu_backward(g: Interval, y: Interval, c: IntervalContext) -> Interval:
    passes = (y.lo > 0).to(g.lo.dtype)  # exact: grad_y where y > 0, else 0
    return Interval(g.lo * passes, g.hi * passes)


def _sqrt_backward(g: Interval, y: Interval, c: IntervalContext) -> Interval:
    return iv.div(g, iv.mul(iv.constant(2.0, y.lo, c), y, c), c)


def _log_backward(g: Interval, x: Interval, c: IntervalContext) -> Interval:
    return iv.div(g, x, c)


def _square_backward(g: Interval, x: Interval, c: IntervalContext) -> Interval:
    return iv.mul(iv.constant(2.0, x.lo, c), iv.mul(g, x, c), c)


def _hull(*intervals: Interval) -> Interval:
    """The smallest interval holding each: a product of three factors rounds differently in each order a kernel may
    multiply them in (torch's sigmoid backward is (g·(1 - y))·y), and each order's interval holds only its own."""
    return Interval(torch.stack([i.lo for i in intervals]).amin(0), torch.stack([i.hi for i in intervals]).amax(0))


def _sigmoid_backward(g: Interval, y: Interval, c: IntervalContext) -> Interval:
    """g·y·(1 - y), in any of the three orders of its products."""
    complement = iv.add(_one(y, c), iv.negate(y), c)
    return _hull(iv.mul(iv.mul(g, complement, c), y, c), iv.mul(iv.mul(g, y, c), complement, c),
                 iv.mul(g, iv.mul(y, complement, c), c))


def _rsqrt_backward(g: Interval, y: Interval, c: IntervalContext) -> Interval:
    """-0.5·g·y³: y³ first (torch's, y.pow(3)) or y multiplied in one factor at a time."""
    half = iv.constant(-0.5, y.lo, c)
    cube_first = iv.mul(half, iv.mul(g, iv.mul(iv.mul(y, y, c), y, c), c), c)
    one_at_a_time = iv.mul(half, iv.mul(iv.mul(iv.mul(g, y, c), y, c), y, c), c)
    return _hull(cube_first, one_at_a_time)


def _log1p_backward(g: Interval, x: Interval, c: IntervalContext) -> Interval:
    return iv.div(g, iv.add(_one(x, c), x, c), c)


def _three_factor_product(a: Interval, b: Interval, d: Interval, c: IntervalContext) -> Interval:
    """a·b·d in any of the orders a kernel may take its two products in."""
    return _hull(iv.mul(iv.mul(a, b, c), d, c), iv.mul(a, iv.mul(b, d, c), c), iv.mul(iv.mul(a, d, c), b, c))


def _silu_backward(g: Interval, x: Interval, c: IntervalContext) -> Interval:
    """g·s·(1 + x·(1 - s)), s = sigmoid(x) (torch's silu_backward)."""
    s = _sigmoid_interval(x, c)
    t = iv.add(_one(x, c), iv.mul(x, iv.add(_one(x, c), iv.negate(s), c), c), c)
    return _three_factor_product(g, s, t, c)


def _gelu_backward(g: Interval, x: Interval, c: IntervalContext) -> Interval:
    """g·(Φ(x) + x·φ(x)), Φ = (1 + erf(x/√2))/2, φ = exp(-x²/2)/√(2π) (torch's gelu_backward): the product x·φ
    taken as x·(φ's constant·exp) or (x·constant)·exp."""
    cdf = iv.mul(iv.constant(0.5, x.lo, c), iv.add(_one(x, c), iv.erf(iv.mul(x, iv.constant(1 / math.sqrt(2.0), x.lo, c), c), c), c), c)
    density = iv.exp(iv.mul(iv.constant(-0.5, x.lo, c), iv.mul(x, x, c), c), c)
    beta = iv.constant(1 / math.sqrt(2 * math.pi), x.lo, c)
    x_pdf = _hull(iv.mul(x, iv.mul(beta, density, c), c), iv.mul(iv.mul(x, beta, c), density, c))
    return iv.mul(g, iv.add(cdf, x_pdf, c), c)


def _gelu_tanh_backward(g: Interval, x: Interval, c: IntervalContext) -> Interval:
    """torch's gelu_backward with approximate="tanh": inner = β(x + κx³), t = tanh(inner),
    g·(½(1 + t) + ½x·(1 - t²)·β(1 + 3κx²)), β = √(2/π), κ = 0.044715; 1 - t² as 1 - t·t or (1 - t)(1 + t)."""
    one = _one(x, c)
    beta, kappa = iv.constant(math.sqrt(2 / math.pi), x.lo, c), iv.constant(0.044715, x.lo, c)
    square = iv.mul(x, x, c)
    inner = iv.mul(beta, iv.add(x, iv.mul(kappa, iv.mul(square, x, c), c), c), c)
    t = iv.tanh(inner, c)
    left_derivative = iv.mul(iv.constant(0.5, x.lo, c), iv.add(one, t, c), c)
    sech_squared = _hull(iv.add(one, iv.negate(iv.mul(t, t, c)), c), iv.mul(iv.add(one, iv.negate(t), c), iv.add(one, t, c), c))
    slope = iv.mul(beta, iv.add(one, iv.mul(iv.constant(3 * 0.044715, x.lo, c), square, c), c), c)
    half_x = iv.mul(iv.constant(0.5, x.lo, c), x, c)
    right_derivative = _three_factor_product(half_x, sech_squared, slope, c)
    return iv.mul(g, iv.add(left_derivative, right_derivative, c), c)


def _aten(name: str) -> Callable[..., torch.Tensor]:
    def call(grad_y: torch.Tensor, saved: torch.Tensor) -> torch.Tensor:
        return getattr(torch.ops.aten, name)(grad_y, saved)

    call.__name__ = f"torch_{name}"
    return call


def _autograd(forward: Callable[[torch.Tensor], torch.Tensor]) -> Callable[..., torch.Tensor]:
    """torch's autograd of `forward` at x (the backwards that save x)."""
    def call(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        leaf = x.detach().requires_grad_()
        with torch.enable_grad():
            y = forward(leaf)
        return torch.autograd.grad(y, leaf, grad_y)[0]

    call.__name__ = f"torch_{forward.__name__}_backward"
    return call


def torch_exp_backward(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return grad_y * y  # exp's autograd formula: grad · result


def torch_sqrt_backward(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return grad_y / (2 * y)  # sqrt's autograd formula: grad / (2 · result)


def torch_relu_backward(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.threshold_backward(grad_y, y, 0)


def torch_rsqrt_backward(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return -0.5 * grad_y * y.pow(3)  # rsqrt's autograd formula: -0.5 · grad · result³, in the input format


def torch_gelu_backward(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.gelu_backward(grad_y, x)


def torch_gelu_tanh_backward(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.gelu_backward(grad_y, x, approximate="tanh")


def _exact_silu_backward(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(x)
    return g * s * (1 + x * (1 - s))


def _exact_gelu_backward(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return g * (0.5 * (1 + torch.erf(x / math.sqrt(2.0))) + x * torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))


def _exact_gelu_tanh_backward(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    beta, kappa = math.sqrt(2 / math.pi), 0.044715
    t = torch.tanh(beta * (x + kappa * x ** 3))
    return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * beta * (1 + 3 * kappa * x * x))


BACKWARD_FUNCTIONS: Mapping[str, MathFunction] = {name: MathFunction(BACKWARD_SIGNATURES[name], *parts) for name, parts in (
    ("exp", (lambda g, y: g * y, _exp_backward, torch_exp_backward)),
    ("tanh", (lambda g, y: g * (1 - y * y), _tanh_backward, _aten("tanh_backward"))),
    ("relu", (lambda g, y: g * (y > 0), _relu_backward, torch_relu_backward)),
    ("sqrt", (lambda g, y: g / (2 * y), _sqrt_backward, torch_sqrt_backward)),
    ("log", (lambda g, x: g / x, _log_backward, _autograd(torch.log))),
    ("square", (lambda g, x: 2 * g * x, _square_backward, _autograd(_square))),
    ("sigmoid", (lambda g, y: g * y * (1 - y), _sigmoid_backward, on_f32_copies(_aten("sigmoid_backward")))),
    ("rsqrt", (lambda g, y: -0.5 * g * y ** 3, _rsqrt_backward, on_f32_copies(torch_rsqrt_backward))),
    ("log1p", (lambda g, x: g / (1 + x), _log1p_backward, on_f32_copies(_autograd(torch.log1p)))),
    ("silu", (_exact_silu_backward, _silu_backward, _aten("silu_backward"))),
    ("gelu", (_exact_gelu_backward, _gelu_backward, torch_gelu_backward)),
    ("gelu_tanh", (_exact_gelu_tanh_backward, _gelu_tanh_backward, torch_gelu_tanh_backward)),
)}
