"""A per-element rounding-error bound for ops that sum products.

For an output element that sums K products a_i·b_i, computed with inputs in
the case's format, products accumulated in format `acc` and the result
stored in the output format T:

    B = (lam · g(K) · u_acc + u_in) · Σ|a_i·b_i|  +  c_out · ulp_T(ref)

Σ|a_i·b_i|  the same op on the absolute values of the inputs, in float64
            (conv(|x|,|w|), conv_input(|w|,|dy|), conv_weight(|x|,|dy|), |a|@|b|).
g(K)        sqrt(K) by default: rounding errors of a long sum behave like a
            random walk, so their typical growth is sqrt(K) (Higham & Mary,
            "A new approach to probabilistic rounding error analysis", 2019);
            K with strict=True, the worst-case deterministic bound to first
            order (Higham, Accuracy and Stability of Numerical Algorithms, ch. 3).
K           problem.reduction_size.
u_acc       unit roundoff of the accumulator, 2^-(p) for a p-bit significand:
            f32 2^-24, f16 2^-11, bf16 2^-8 (from torch.finfo(...).eps / 2).
u_in        2 · 2^-11 for tf32 (the kernel rounds each input of a product to
            10 mantissa bits, so each product is off by up to two tf32 unit
            roundoffs), 0 otherwise (the inputs already are in their format).
lam         a safety factor on the probabilistic term (5 by default).
c_out       output ulps allowed for the final rounding to T (1 by default:
            round to nearest needs 1/2, 1 also accepts faithful rounding).
ulp_T(ref)  metrics.ulp of the reference in the output format (f32 for tf32).

An error within B means "as accurate as the arithmetic allows";
metrics' bound_ratio = max |ref − out| / B.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import torch

from e2egen import metrics

from .errors import ProblemError
from .problem import Problem
from .reference import apply_op

ACCUMULATORS = ("f32", "f16", "bf16")
_ACCUMULATOR_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
TF32_MANTISSA_BITS = 10  # tf32: 1 sign, 8 exponent, 10 mantissa bits


@dataclass(frozen=True)
class BoundModel:
    lam: float = 5.0
    acc: str = "f32"
    strict: bool = False
    c_out: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.lam, bool) or not isinstance(self.lam, (int, float)) or not self.lam > 0 or not math.isfinite(self.lam):
            raise ProblemError("bound.lambda", self.lam, f"expected a positive number, got {self.lam!r}")
        if self.acc not in ACCUMULATORS:
            raise ProblemError.unknown("bound.acc", self.acc, ACCUMULATORS, what="accumulator format")
        if not isinstance(self.strict, bool):
            raise ProblemError("bound.strict", self.strict, f"expected true or false, got {self.strict!r}")
        if isinstance(self.c_out, bool) or not isinstance(self.c_out, (int, float)) or not self.c_out >= 0 or not math.isfinite(self.c_out):
            raise ProblemError("bound.c_out", self.c_out, f"expected a number >= 0, got {self.c_out!r}")


def unit_roundoff(fmt: str) -> float:
    """Half the gap between 1 and the next value of the format."""
    if fmt == "tf32":
        return math.ldexp(1.0, -(TF32_MANTISSA_BITS + 1))
    return torch.finfo(_ACCUMULATOR_DTYPES[fmt]).eps / 2


def input_rounding(dtype: str) -> float:
    """Relative error of a product whose inputs the kernel rounds itself (tf32 only)."""
    return 2 * unit_roundoff("tf32") if dtype == "tf32" else 0.0


def growth(reduction_size: int, strict: bool) -> float:
    return float(reduction_size) if strict else math.sqrt(reduction_size)


def relative_factor(problem: Problem, model: BoundModel) -> float:
    """lam · g(K) · u_acc + u_in: the bound's multiplier of Σ|a_i·b_i|."""
    return model.lam * growth(problem.reduction_size, model.strict) * unit_roundoff(model.acc) + input_rounding(problem.dtype)


def magnitude(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Σ|a_i·b_i| for every output element: the op on |inputs|, in float64."""
    return apply_op(problem, {name: t.abs() for name, t in inputs64.items()})


def compute_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor], ref: torch.Tensor, model: BoundModel) -> torch.Tensor:
    """B per element (float64, logical shape, on the inputs' device)."""
    bound = magnitude(problem, inputs64)
    bound.mul_(relative_factor(problem, model))
    if model.c_out:
        bound.add_(metrics.ulp(ref, problem.out_dtype), alpha=model.c_out)
    return bound
