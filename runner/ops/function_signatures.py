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


# The backward (bwd_data) of the unary functions whose torch autograd holds to f32 steps: grad_x = grad_y·f'(·), from
# grad_y and what torch's autograd saves, the forward's output y or its input x. Left out: log1p's and rsqrt's (torch's
# f16/bf16 backward rounds 1 + x, or y³ and its product, to the input format before the last step), sigmoid's
# (torch's computes in f16 for f16, 2.2-4 ulps off, and at bound_ratio 6 in f32), and the gelus' and silu's.
BACKWARD_SAVES = {"exp": "y", "tanh": "y", "relu": "y", "sqrt": "y", "log": "x", "square": "x"}
BACKWARD_SIGNATURES: Mapping[str, FunctionSignature] = {
    name: FunctionSignature(f"{name}_backward", ("grad_y", saved), "y > 0" if name == "sqrt" else _DOMAINS.get(name, ""))
    for name, saved in BACKWARD_SAVES.items()}
