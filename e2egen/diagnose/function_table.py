"""The math functions of the low-precision guide's error table (shared/seeds/004, section 3.3), for the
`function_errors` study kind (function_errors.py).

Each function has its torch form (run once on f32 inputs and once on f16 inputs: torch's CPU f16 kernels
compute in f32 and round, the guide's recommended implementation), its domain (which f16 inputs are
taken), and, where e2egen has an op for it, that op's name and the function as a half-precision kernel
computes it step by step (every elementary step rounded to f16), for the interval verdict.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

F16 = torch.float16


def _h(x: torch.Tensor) -> torch.Tensor:
    """One rounding to f16 (from any wider format), kept as float64 for the next step."""
    return x.to(F16).to(torch.float64)


def _all(x: torch.Tensor) -> torch.Tensor:
    return torch.ones_like(x, dtype=torch.bool)


@dataclass(frozen=True)
class TableFunction:
    name: str
    torch_form: Callable[[torch.Tensor], torch.Tensor]  # on f32 or f16 inputs, same dtype out
    domain: Callable[[torch.Tensor], torch.Tensor]  # float64 inputs -> mask of those in the domain
    op: str | None = None  # e2egen's op for it (runner/ops/math_functions.py), if any
    in_f16: Callable[[torch.Tensor], torch.Tensor] | None = None  # float64 in, the f16-step result (float64)
    in_f16_text: str = ""


def _nn(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: getattr(torch.nn.functional, name)(x)


def _exp_in_f16(x):
    return _h(torch.exp2(_h(x * (1.0 / math.log(2.0)))))


def _sigmoid_in_f16(x):
    return _h(1.0 / _h(1.0 + _h(torch.exp(-x))))


def _tanh_in_f16(x):
    magnitude = _h(1.0 - _h(2.0 / _h(_h(torch.exp(_h(2.0 * x.abs()))) + 1.0)))
    return torch.where(x < 0, -magnitude, magnitude)


FUNCTIONS: dict[str, TableFunction] = {f.name: f for f in (
    TableFunction("sin", torch.sin, _all),
    TableFunction("cos", torch.cos, _all),
    TableFunction("atan", torch.atan, _all),
    TableFunction("acosh", torch.acosh, lambda x: x >= 1),
    TableFunction("asinh", torch.asinh, _all),
    TableFunction("tanh", torch.tanh, _all, "tanh", _tanh_in_f16, "1 − 2/(exp(2|x|) + 1), sign of x"),
    TableFunction("acos", torch.acos, lambda x: x.abs() <= 1),
    TableFunction("asin", torch.asin, lambda x: x.abs() <= 1),
    TableFunction("atanh", torch.atanh, lambda x: x.abs() < 1),
    TableFunction("log2", torch.log2, lambda x: x > 0),
    TableFunction("log10", torch.log10, lambda x: x > 0),
    TableFunction("log1p", torch.log1p, lambda x: x > -1),
    TableFunction("floor", torch.floor, _all),
    TableFunction("round", torch.round, _all),
    TableFunction("relu", torch.relu, _all),
    TableFunction("ceil", torch.ceil, _all),
    TableFunction("sqrt", torch.sqrt, lambda x: x >= 0, "sqrt", lambda x: _h(torch.sqrt(x)), "sqrt (IEEE: correctly rounded)"),
    TableFunction("rsqrt", torch.rsqrt, lambda x: x > 0, "rsqrt", lambda x: _h(1.0 / _h(torch.sqrt(x))), "1 / sqrt(x)"),
    TableFunction("exp", torch.exp, _all, "exp", _exp_in_f16, "2^(x·log2 e), the product rounded to f16"),
    TableFunction("expm1", torch.expm1, _all),
    TableFunction("tan", torch.tan, _all),
    TableFunction("cosh", torch.cosh, _all),
    TableFunction("sinh", torch.sinh, _all),
    TableFunction("reciprocal", torch.reciprocal, lambda x: x != 0, "div", lambda x: _h(1.0 / x),
                  "1 / x (correctly rounded)"),
    TableFunction("square", torch.square, _all, "square", lambda x: _h(x * x), "x · x (correctly rounded)"),
    TableFunction("tanh_shrink", _nn("tanhshrink"), _all),
    TableFunction("logsigmoid", _nn("logsigmoid"), _all),
    TableFunction("sigmoid", torch.sigmoid, _all, "sigmoid", _sigmoid_in_f16, "1 / (1 + exp(−x))"),
    TableFunction("silu", _nn("silu"), _all, "silu", lambda x: _h(x * _sigmoid_in_f16(x)), "x · (1 / (1 + exp(−x)))"),
    TableFunction("softsign", _nn("softsign"), _all),
)}
