"""The point-wise family's alternate and planted-bug kernels, through the plug-in contract f(x) -> y or
f(x, y) -> z (runner/ops/pointwise/spec.py): tensors in the case's dtype, result in it too. torch's own
kernel is the default (runner/ops/math_functions.py); studies/elementwise_evidence.py and the family's
tests run these by impl string, "e2egen.runner.ops.pointwise.kernels:NAME".

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
    log1p_as_log       log(1 + x) in f32: 1 + x drops x's low bits, so near 0 it is far off relatively
"""
from __future__ import annotations

import math

import torch

from e2egen.runner.ops.math_functions import torch_rsqrt_backward

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
def exp_via_exp2(x: torch.Tensor) -> torch.Tensor:
    return torch.exp2(_f32(x) * LOG2E).to(x.dtype)


def exp_2ulp(x: torch.Tensor) -> torch.Tensor:
    result = torch.exp2(_f32(x) * LOG2E)
    return _ulps_off(result.double(), 2, F32, _alternating(result)).to(x.dtype)


def silu_div(x: torch.Tensor) -> torch.Tensor:
    x32 = _f32(x)
    return (x32 / (1.0 + torch.exp(-x32))).to(x.dtype)


def rsqrt_newton(x: torch.Tensor) -> torch.Tensor:
    x32 = _f32(x)
    # the hardware approximation: 12 good bits, modelled as the exact value off by 1.5·2^-12 relative
    approx = (torch.rsqrt(x32.double()) * (1.0 + 1.5 * 2.0 ** -12 * _alternating(x32))).to(F32)
    return (approx * (1.5 - 0.5 * x32 * approx * approx)).to(x.dtype)


def div_reciprocal(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (_f32(x) * (1.0 / _f32(y))).to(x.dtype)


def sqrt_x_rsqrt(x: torch.Tensor) -> torch.Tensor:
    x32 = _f32(x)
    return (x32 * torch.rsqrt(x32)).to(x.dtype)


def gelu_erfc(x: torch.Tensor) -> torch.Tensor:
    x32 = _f32(x)
    return (0.5 * x32 * torch.erfc(-x32 * (1.0 / math.sqrt(2.0)))).to(x.dtype)


def sigmoid_tanh(x: torch.Tensor) -> torch.Tensor:
    return (0.5 + 0.5 * torch.tanh(0.5 * _f32(x))).to(x.dtype)


def tanh_exp(x: torch.Tensor) -> torch.Tensor:
    x32 = _f32(x)
    return (1.0 - 2.0 / (torch.exp(2.0 * x32) + 1.0)).to(x.dtype)


# -- wrong ---------------------------------------------------------------------------------------------
def exp_f16(x: torch.Tensor) -> torch.Tensor:
    argument = (_f32(x) * LOG2E).to(x.dtype)  # rounded to the input format: ~2^-11 relative of up to 16
    return torch.exp2(_f32(argument)).to(x.dtype)


def rsqrt_4ulp(x: torch.Tensor) -> torch.Tensor:
    return _ulps_off(torch.rsqrt(x.double()), 4, x.dtype)


def gelu_tanh_form(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(_f32(x), approximate="tanh").to(x.dtype)


def sigmoid_overflow(x: torch.Tensor) -> torch.Tensor:
    e = torch.exp(_f32(x))
    return (e / (1.0 + e)).to(x.dtype)


def log1p_as_log(x: torch.Tensor) -> torch.Tensor:
    """log(1 + x) in f32: loses x's low bits in 1 + x, so near 0 it is off by up to 2^-24/|x| relative."""
    return torch.log(1.0 + _f32(x)).to(x.dtype)


# -- backward (bwd_data): f(grad_y, y) -> grad_x for exp, tanh, relu, sqrt; f(grad_y, x) for log, square ----------
def exp_backward_f32(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """CORRECT: grad_y · y in f32."""
    return (_f32(grad_y) * _f32(y)).to(y.dtype)


def tanh_backward_factored(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """CORRECT: grad_y · (1 - y)(1 + y) in f32 (no cancellation of y² near |y| = 1)."""
    y32 = _f32(y)
    return (_f32(grad_y) * ((1.0 - y32) * (1.0 + y32))).to(y.dtype)


def relu_backward_where(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """CORRECT: grad_y where y > 0, else 0."""
    return torch.where(y > 0, grad_y, torch.zeros_like(grad_y))


def sqrt_backward_half(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """CORRECT: 0.5 · grad_y / y in f32."""
    return (0.5 * _f32(grad_y) / _f32(y)).to(y.dtype)


def log_backward_f32(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """CORRECT: grad_y / x in f32."""
    return (_f32(grad_y) / _f32(x)).to(x.dtype)


def square_backward_f32(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """CORRECT: 2 · grad_y · x in f32."""
    return (2.0 * _f32(grad_y) * _f32(x)).to(x.dtype)


def sigmoid_backward_f32(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """CORRECT: grad_y · (y · (1 - y)) in f32 (torch's multiplies (grad_y · (1 - y)) · y)."""
    y32 = _f32(y)
    return (_f32(grad_y) * (y32 * (1.0 - y32))).to(y.dtype)


def rsqrt_backward_f32(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """CORRECT: -0.5 · grad_y · y · y · y in f32, one factor at a time."""
    y32 = _f32(y)
    return (-0.5 * _f32(grad_y) * y32 * y32 * y32).to(y.dtype)


def log1p_backward_f32(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """CORRECT: grad_y / (1 + x) in f32."""
    return (_f32(grad_y) / (1.0 + _f32(x))).to(x.dtype)


def _sigmoid_f32(x: torch.Tensor) -> torch.Tensor:
    return 1.0 / (1.0 + torch.exp(-_f32(x)))


def silu_backward_f32(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """CORRECT: (grad_y · (1 + x(1 - s))) · s in f32, s = 1 / (1 + exp(-x)) (torch's multiplies grad_y · s first)."""
    x32, s = _f32(x), _sigmoid_f32(x)
    return ((_f32(grad_y) * (1.0 + x32 * (1.0 - s))) * s).to(x.dtype)


_SQRT_HALF, _INV_SQRT_2PI = 1 / math.sqrt(2.0), 1 / math.sqrt(2 * math.pi)


def gelu_backward_f32(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """CORRECT: grad_y · (Φ(x) + (x/√(2π))·exp(-x²/2)) in f32."""
    x32 = _f32(x)
    cdf = 0.5 * (1.0 + torch.erf(x32 * _SQRT_HALF))
    return (_f32(grad_y) * (cdf + (x32 * _INV_SQRT_2PI) * torch.exp(-0.5 * (x32 * x32)))).to(x.dtype)


_BETA, _KAPPA = math.sqrt(2 / math.pi), 0.044715


def _gelu_tanh_parts(x32: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    square = x32 * x32
    return torch.tanh(_BETA * (x32 + _KAPPA * (square * x32))), square


def gelu_tanh_backward_factored(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """CORRECT: torch's formula in f32 with 1 - t² as (1 - t)(1 + t)."""
    x32 = _f32(x)
    t, square = _gelu_tanh_parts(x32)
    right = (0.5 * x32) * ((1.0 - t) * (1.0 + t)) * (_BETA * (1.0 + 3 * _KAPPA * square))
    return (_f32(grad_y) * (0.5 * (1.0 + t) + right)).to(x.dtype)


CORRECT_BACKWARD = {"exp": ("exp_backward_f32",), "tanh": ("tanh_backward_factored",), "relu": ("relu_backward_where",),
                    "sqrt": ("sqrt_backward_half",), "log": ("log_backward_f32",), "square": ("square_backward_f32",),
                    "sigmoid": ("sigmoid_backward_f32",), "rsqrt": ("rsqrt_backward_f32",), "log1p": ("log1p_backward_f32",),
                    "silu": ("silu_backward_f32",), "gelu": ("gelu_backward_f32",), "gelu_tanh": ("gelu_tanh_backward_factored",)}


def tanh_backward_linear(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """WRONG: grad_y · (1 - y), the square forgotten."""
    return (_f32(grad_y) * (1.0 - _f32(y))).to(y.dtype)


def tanh_backward_in_format(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """WRONG for f16/bf16: y², 1 - y² and the product each rounded to the input format (1 - y² cancels near 1)."""
    square = (_f32(y) * _f32(y)).to(y.dtype)
    return (_f32(grad_y) * _f32((1.0 - _f32(square)).to(y.dtype))).to(y.dtype)


def relu_backward_at_zero(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """WRONG: grad_y passes where y >= 0, so also where relu clipped x to 0."""
    return torch.where(y >= 0, grad_y, torch.zeros_like(grad_y))


def sqrt_backward_no_half(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """WRONG: grad_y / y, the 1/2 forgotten."""
    return (_f32(grad_y) / _f32(y)).to(y.dtype)


def log_backward_reciprocal_in_format(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """WRONG for f16/bf16: 1/x rounded to the input format, then the product: two roundings in the format."""
    reciprocal = (1.0 / _f32(x)).to(x.dtype)
    return (_f32(grad_y) * _f32(reciprocal)).to(x.dtype)


def square_backward_no_two(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """WRONG: grad_y · x, the 2 forgotten."""
    return (_f32(grad_y) * _f32(x)).to(x.dtype)


def torch_sigmoid_backward(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """WRONG for f16/bf16: torch's own CPU sigmoid_backward, which computes in the input format."""
    return torch.ops.aten.sigmoid_backward(grad_y, y)


def sigmoid_backward_no_complement(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """WRONG: grad_y · y · y, the 1 - y written as y."""
    y32 = _f32(y)
    return (_f32(grad_y) * y32 * y32).to(y.dtype)


def torch_rsqrt_backward_native(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """WRONG for f16/bf16: torch's own autograd formula, -0.5 · grad · y³ with y³ and each product in the input format."""
    return torch_rsqrt_backward(grad_y, y)


def rsqrt_backward_square(grad_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """WRONG: -0.5 · grad_y · y², the cube taken as a square."""
    y32 = _f32(y)
    return (-0.5 * _f32(grad_y) * y32 * y32).to(y.dtype)


def log1p_backward_as_log(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """WRONG: grad_y / x, log's derivative where log1p's is 1 / (1 + x)."""
    return (_f32(grad_y) / _f32(x)).to(x.dtype)


def log1p_backward_sum_in_format(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """WRONG for f16/bf16: 1 + x rounded to the input format first (torch's own autograd does), which near x = -1
    loses x's low bits."""
    return (_f32(grad_y) / _f32((1.0 + _f32(x)).to(x.dtype))).to(x.dtype)


def silu_backward_sigmoid_only(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """WRONG: grad_y · s, x·s·(1 - s) forgotten (silu's derivative taken as sigmoid's value)."""
    return (_f32(grad_y) * _sigmoid_f32(x)).to(x.dtype)


def silu_backward_in_format(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """WRONG for f16/bf16: every step rounded to the input format."""
    s = torch.sigmoid(x)
    return grad_y * s * (1 + x * (1 - s))


def gelu_backward_tanh_for_erf(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """WRONG: the tanh approximation's derivative where the case is the exact (erf) gelu's."""
    return torch.ops.aten.gelu_backward(_f32(grad_y), _f32(x), approximate="tanh").to(x.dtype)


def gelu_backward_cdf_only(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """WRONG: grad_y · Φ(x), the x·φ(x) term forgotten."""
    return (_f32(grad_y) * (0.5 * (1.0 + torch.erf(_f32(x) * _SQRT_HALF)))).to(x.dtype)


def gelu_tanh_backward_erf_for_tanh(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """WRONG: the exact (erf) gelu's derivative where the case is the tanh approximation's."""
    return gelu_backward_f32(grad_y, x)


def gelu_tanh_backward_no_three(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """WRONG: the inner derivative β(1 + κx²), its 3 forgotten."""
    x32 = _f32(x)
    t, square = _gelu_tanh_parts(x32)
    right = (0.5 * x32) * (1.0 - t * t) * (_BETA * (1.0 + _KAPPA * square))
    return (_f32(grad_y) * (0.5 * (1.0 + t) + right)).to(x.dtype)


WRONG_BACKWARD = {"tanh": ("tanh_backward_linear", "tanh_backward_in_format"), "relu": ("relu_backward_at_zero",),
                  "sqrt": ("sqrt_backward_no_half",), "log": ("log_backward_reciprocal_in_format",),
                  "square": ("square_backward_no_two",),
                  "sigmoid": ("torch_sigmoid_backward", "sigmoid_backward_no_complement"),
                  "rsqrt": ("torch_rsqrt_backward_native", "rsqrt_backward_square"),
                  "log1p": ("log1p_backward_as_log", "log1p_backward_sum_in_format"),
                  "silu": ("silu_backward_sigmoid_only", "silu_backward_in_format"),
                  "gelu": ("gelu_backward_tanh_for_erf", "gelu_backward_cdf_only"),
                  "gelu_tanh": ("gelu_tanh_backward_erf_for_tanh", "gelu_tanh_backward_no_three")}
