"""Per-element rounding-error bounds, composed from pieces.

An op's bound is a sum of pieces, each with its own tested formula, each a
function of the error model (`BoundModel`: lambda, accumulator, growth,
output ulps). Ops build their bound from these pieces (`Op.error_bound`);
the verdict, `explain`, `study` and the evidence scripts all evaluate the
same objects (under the case's model or any other), so the formula below is
written once.

For an output element that sums K products a_i·b_i, computed with inputs in
the case's format, products accumulated in format `acc` and the result
stored in the output format T:

    B = (lam · g(K) · u_acc + u_in) · Σ|a_i·b_i|  +  c_out · ulp_T(ref)
        └──────── ProductSumError ────────────┘     └─ OutputRounding ─┘

Σ|a_i·b_i|  the same op on the absolute values of the inputs, in float64
            (conv(|x|,|w|), conv_input(|w|,|dy|), conv_weight(|x|,|dy|), |a|@|b|).
g(K)        sqrt(K) by default: rounding errors of a long sum behave like a
            random walk, so their typical growth is sqrt(K) (Higham & Mary,
            "A new approach to probabilistic rounding error analysis", 2019);
            K with strict=True, the worst-case deterministic bound to first
            order (Higham, Accuracy and Stability of Numerical Algorithms, ch. 3).
K           problem.reduction_size.
u_acc       unit roundoff of the accumulator, 2^-(p) for a p-bit significand:
            f32 2^-24, f16 2^-11, bf16 2^-8 (from the format's bits).
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
from typing import Mapping, Protocol

import torch

from e2egen import metrics

from .options import ACCUMULATORS, BoundModel
from .problem import Problem

TF32_MANTISSA_BITS = 10  # tf32: 1 sign, 8 exponent, 10 mantissa bits

__all__ = ["ACCUMULATORS", "BoundModel", "ErrorBound", "OutputRounding", "ProductSumError", "SumOfBounds",
           "compute_bound", "error_bounds", "growth", "input_rounding", "magnitude", "product_sum_bound", "product_sum_parts",
           "relative_factor", "unit_roundoff"]


# -- the model's numbers ------------------------------------------------------------
def unit_roundoff(fmt: str) -> float:
    """Half the gap between 1 and the next value of the format."""
    if fmt == "tf32":
        return math.ldexp(1.0, -(TF32_MANTISSA_BITS + 1))
    return metrics.get_format(fmt).eps / 2


def input_rounding(dtype: str) -> float:
    """Relative error of a product whose inputs the kernel rounds itself (tf32 only)."""
    return 2 * unit_roundoff("tf32") if dtype == "tf32" else 0.0


def growth(reduction_size: int, strict: bool) -> float:
    return float(reduction_size) if strict else math.sqrt(reduction_size)


def product_sum_factor(reduction_size: int, dtype: str, model: BoundModel) -> float:
    """lam · g(K) · u_acc + u_in: the multiplier of Σ|a_i·b_i|."""
    return model.lam * growth(reduction_size, model.strict) * unit_roundoff(model.acc) + input_rounding(dtype)


# -- pieces --------------------------------------------------------------------------
class ErrorBound(Protocol):
    """A per-element bound (float64, the output's logical shape) under an error model.

    `evaluate` returns a new tensor, which the caller may modify in place.
    """

    def evaluate(self, model: BoundModel, ref: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True, eq=False)
class ProductSumError:
    """The error of summing `reduction_size` products per element: (lam·g(K)·u_acc + u_in)·Σ|a·b|."""

    magnitude: torch.Tensor  # Σ|a_i·b_i| per element, float64
    reduction_size: int
    dtype: str  # the case's dtype (tf32 adds the input rounding term)

    def factor(self, model: BoundModel) -> float:
        return product_sum_factor(self.reduction_size, self.dtype, model)

    def evaluate(self, model: BoundModel, ref: torch.Tensor | None = None) -> torch.Tensor:
        return self.magnitude * self.factor(model)


@dataclass(frozen=True, eq=False)
class OutputRounding:
    """The final rounding to the output format: c_out · ulp_T(ref)."""

    out_dtype: str

    def evaluate(self, model: BoundModel, ref: torch.Tensor) -> torch.Tensor:
        if not model.c_out:
            return torch.zeros_like(ref)
        return metrics.ulp(ref, self.out_dtype).mul_(model.c_out)


@dataclass(frozen=True, eq=False)
class SumOfBounds:
    """Independent error sources of one output add up (first order)."""

    parts: tuple[ErrorBound, ...]

    def evaluate(self, model: BoundModel, ref: torch.Tensor) -> torch.Tensor:
        total = self.parts[0].evaluate(model, ref)
        for part in self.parts[1:]:
            total.add_(part.evaluate(model, ref))
        return total

    def part(self, kind: type) -> ErrorBound:
        """The first part of a kind (e.g. ProductSumError), for analyses that look inside."""
        return next(p for p in self.parts if isinstance(p, kind))


# -- the bounds of product-sum ops (conv, gemm) -------------------------------------
def magnitude(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Σ|a_i·b_i| for every output element: the op on |inputs|, in float64."""
    from .reference import apply_op

    return apply_op(problem, {name: t.abs() for name, t in inputs64.items()})


def product_sum_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> SumOfBounds:
    """An op whose output sums products of its inputs, then rounds to the output format."""
    return product_sum_parts(problem, magnitude(problem, inputs64))


def product_sum_parts(problem: Problem, terms: torch.Tensor) -> SumOfBounds:
    """The product-sum bound for given Σ|a·b| (all elements, or a sample of them)."""
    return SumOfBounds((ProductSumError(terms, problem.reduction_size, problem.dtype), OutputRounding(problem.out_dtype)))


def relative_factor(problem: Problem, model: BoundModel) -> float:
    """lam · g(K) · u_acc + u_in for a product-sum problem."""
    return product_sum_factor(problem.reduction_size, problem.dtype, model)


# -- entry points -------------------------------------------------------------------
def error_bounds(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, ErrorBound]:
    """Each output's bound, from the op (model-independent parts computed once)."""
    return problem.spec.error_bound(problem, inputs64)


def compute_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor], ref: torch.Tensor, model: BoundModel) -> torch.Tensor:
    """B per element of the primary output (float64, logical shape, on the inputs' device)."""
    bound = error_bounds(problem, inputs64)[problem.primary_output]
    return bound.evaluate(model, ref)
