"""The element-wise math functions e2egen tests, by name: their inputs and domain, without torch (the catalogue
and the point-wise ops' specs read these), and their backward's; runner/ops/math_functions.py defines each one's
values."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class FunctionSignature:
    name: str
    inputs: tuple[str, ...]
    domain: str  # where the function is defined, in words ("" for every real)


UNARY = ("exp", "log", "log1p", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh", "rsqrt", "sqrt", "square", "relu")
_DOMAINS = {"log": "x > 0", "log1p": "x > -1", "rsqrt": "x > 0", "sqrt": "x > 0", "div": "y != 0", "pow": "x > 0"}
SIGNATURES: Mapping[str, FunctionSignature] = {
    **{name: FunctionSignature(name, ("x",), _DOMAINS.get(name, "")) for name in UNARY},
    **{name: FunctionSignature(name, ("x", "y"), _DOMAINS[name]) for name in ("div", "pow")},
}


# The backward (bwd_data) of the unary functions: grad_x = grad_y·f'(·), from grad_y and what torch's autograd saves,
# the forward's output y or its input x (the gelus' and silu's recompute their forward inside the derivative).
BACKWARD_SAVES = {"exp": "y", "tanh": "y", "relu": "y", "sqrt": "y", "log": "x", "square": "x", "sigmoid": "y",
                  "rsqrt": "y", "log1p": "x", "silu": "x", "gelu": "x", "gelu_tanh": "x"}
_BACKWARD_DOMAINS = {"sqrt": "y > 0", "rsqrt": "y > 0"}  # their y = f(x) of x > 0
BACKWARD_SIGNATURES: Mapping[str, FunctionSignature] = {
    name: FunctionSignature(f"{name}_backward", ("grad_y", saved), _BACKWARD_DOMAINS.get(name, _DOMAINS.get(name, "")))
    for name, saved in BACKWARD_SAVES.items()}
