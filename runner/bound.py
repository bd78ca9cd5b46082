"""Per-element rounding-error bounds, composed from pieces.

An op's bound is a sum of pieces, each with its own tested formula, each a
function of the error model (`BoundModel`: lambda, growth, output ulps, and
the kernel's arithmetic as the probes measured it, runner/arithmetic). Ops
build their bound from these pieces (`Op.error_bound`); the verdict,
`explain`, `study` and the evidence scripts all evaluate the same objects
(under the case's model or any other), so the formula below is written once.

For an output element that sums K products a_i·b_i and stores the result in
the output format T:

    B = (u_in + A) · Σ|a_i·b_i|  +  c_out · ulp_T(ref)
        └─ ProductSumError ──┘     └─ OutputRounding ─┘

Σ|a_i·b_i|  the same op on the absolute values of the inputs
            (conv(|x|,|w|), conv_input(|w|,|dy|), conv_weight(|x|,|dy|), |a|@|b|),
            in f32 widened by 1/(1 - (K+2)·u_f32) where that is proven an upper
            bound, else in float64 (runner/magnitude.py).
u_in        2·u_F when the kernel rounds each input to a narrower format F
            (tf32, bf16, f16) before multiplying (each product is then off by
            up to two unit roundoffs of F; four toward zero), 0 when the
            products see the inputs as given.
A           the accumulation. With one accumulator of p bits (u = 2^-p):
                A = G(K) · u
            With the reduction cut into P partials of L = ceil(K/P) products
            each (per tap, per sample, per chunk), summed with p_in bits and
            added with p bits:
                A = G(L) · u_in_group + G(P') · u       P' = 2P when each
            partial is rounded before it is added ("stored"), P otherwise.
            For cuts by kernel tap or by sample, the op computes the partial
            sums P_t themselves (in f32 where Σ|a·b|'s f32 premises hold, else
            float64, each computed partial's own error added: PartialSums) and
            the accumulator's term is the first-order bound of exactly that
            computation:
                2 · u · (Σ_t |P_t| [stored only] + Σ_t |S_t|),   S_t = P_1 + … + P_t
            in the kernel's order (×2 more when it truncates). A correct
            kernel can come close to that worst case (one rounding of a
            partial just above a power of two), so the factor 2
            (PARTIAL_SUMS_HEADROOM) keeps its bound_ratio at 0.5 or below. On data of mean
            zero Σ_t |S_t| is about √K times smaller than P·Σ|a·b|, which is
            what keeps this bound near the observed error (PartialSums).
G(n)        lam · sqrt(n) by default: rounding errors of a long sum behave
            like a random walk (Higham & Mary, "A new approach to
            probabilistic rounding error analysis", 2019); n with strict=True
            (the first-order worst case, Higham, Accuracy and Stability of
            Numerical Algorithms, ch. 3; times lam too); 2n when the kernel rounds toward
            zero (or up, or down): every error then has one sign and up to a
            whole ulp, so they add linearly (Fasi et al. found such
            truncation in NVIDIA tensor cores).
lam         a safety factor on the probabilistic term (5 by default).
c_out       output ulps allowed for the final rounding to T (1 by default:
            round to nearest needs 1/2, 1 also accepts faithful rounding).
ulp_T(ref)  metrics.ulp of the reference in the output format (f32 for tf32).

Where the arithmetic was not measured (an analysis without a device), the
bound assumes `assumed_arithmetic`: inputs as the dtype says (tf32 rounds
them), one f32 accumulator rounding to nearest. `bound.acc = "f16"` (or
another format) replaces the measured accumulator by one flat accumulator of
that format.

An error within B means "as accurate as the arithmetic allows";
metrics' bound_ratio = max |ref − out| / B.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal, Mapping, Protocol

import torch

from e2egen import metrics
from e2egen.metrics.rounding import rounding_deviation
from e2egen.metrics.ulp_terms import ScaledPlusUlps, add_ulps, partial_sums_plus_ulps

from e2egen.runner.dtypes import input_format_name
from e2egen.runner.arithmetic.model import FORMAT_BITS, Arithmetic, assumed_arithmetic, with_accumulator
from e2egen.runner.magnitude import (F32_MIN_NORMAL, F32_UNIT_ROUNDOFF, F64_MIN_NORMAL, F64_UNIT_ROUNDOFF, F32Operands, WidenedSum,
                        f32_operands, magnitude, magnitude_bound, signed_sum_error, widened_sum)
from e2egen.runner.ops.base import named_outputs
from e2egen.runner.partial_passes import accumulate, start
from e2egen.runner.options import ACCUMULATORS, MEASURED, BoundModel
from e2egen.runner.problem import Problem
from e2egen.runner.upper_matmul import Magnitudes, upper_matmul

__all__ = ["ACCUMULATORS", "BoundModel", "accumulation_term", "Coefficient", "CommonValueSum", "DrawnSum", "chain_square_sum", "summand_quantum", "ComputeRoundings", "ErrorBound", "ExactWhere", "FormatRounding", "FormatRoundings", "IndependentRoundings", "IntermediateRounding",
           "OutputRounding", "PositiveSumCoefficient", "ProductSumCoefficient", "ProductSumError", "RoundedIntermediate", "ScaledMagnitude",
           "SquaredBound", "SubnormalRounding", "SumOfBounds",
           "accumulation_factor", "compute_bound", "effective_arithmetic", "error_bounds", "growth", "input_rounding",
           "magnitude", "magnitude_bound", "product_sum_bound", "product_sum_parts", "relative_factor", "unit_roundoff"]


# -- the model's numbers ------------------------------------------------------------
def unit_roundoff(fmt: str) -> float:
    """Half the gap between 1 and the next value of the format (2^-p for p significand bits)."""
    return math.ldexp(1.0, -FORMAT_BITS[fmt])


def input_rounding(arithmetic: Arithmetic) -> float:
    """Relative error of a product whose two inputs the kernel rounds itself (0 when it uses them as given)."""
    if arithmetic.inputs == "exact":
        return 0.0
    per_input = unit_roundoff(arithmetic.inputs) * (2 if arithmetic.inputs_rounding == "toward-zero" else 1)
    return 2 * per_input


def growth(count: int, strict: bool, lam: float = 1.0, truncates: bool = False) -> float:
    """G(n): how the errors of n roundings add up."""
    if truncates:
        return 2.0 * count
    return lam * (float(count) if strict else math.sqrt(count))


def effective_arithmetic(model: BoundModel, dtype: str) -> Arithmetic:
    """The arithmetic the bound follows: the measured one, else the dtype's assumed one; `acc` overrides."""
    base = model.arithmetic
    if base is None or base.unexplained:  # findings a bug produced never widen a bound
        base = assumed_arithmetic(dtype)
    return base if model.acc == MEASURED else with_accumulator(base, model.acc)


def accumulation_factor(reduction_size: int, samples: int, taps: int, arithmetic: Arithmetic, model: BoundModel) -> float:
    """A: the relative error the accumulation of K products adds, per the arithmetic's structure."""
    def g(count: int) -> float:
        return growth(count, model.strict, model.lam, arithmetic.truncates)

    partials = arithmetic.group_count(reduction_size, samples, taps)
    if arithmetic.groups == "none":
        return g(reduction_size) * arithmetic.acc_unit_roundoff
    per_partial = math.ceil(reduction_size / partials)
    roundings = 2 * partials if arithmetic.partials == "stored" else partials
    return g(per_partial) * arithmetic.inner_unit_roundoff + g(roundings) * arithmetic.acc_unit_roundoff


def product_sum_factor(reduction_size: int, dtype: str, model: BoundModel, samples: int = 1, taps: int = 1) -> float:
    """u_in + A: the multiplier of Σ|a_i·b_i|."""
    arithmetic = effective_arithmetic(model, dtype)
    return input_rounding(arithmetic) + accumulation_factor(reduction_size, samples, taps, arithmetic, model)


# -- pieces --------------------------------------------------------------------------
class ErrorBound(Protocol):
    """A per-element bound (float64, the output's logical shape) under an error model.

    `evaluate` returns a new tensor, which the caller may modify in place.
    """

    def evaluate(self, model: BoundModel, ref: torch.Tensor) -> torch.Tensor: ...


PartialsKind = Literal["taps", "samples"]  # how a reduction is cut into partial sums (per tap, per sample)
PARTIAL_SUMS_HEADROOM = 2.0  # on the first-order worst case of a cut reduction: a correct kernel stays <= 0.5


@dataclass(frozen=True, eq=False)
class PartialSums:
    """Σ_t |P_t| and Σ_t |S_t| of a reduction cut into partials (by tap or by sample), per element, with the
    partials added in the kernel's order (the documented one, or last first when `reversed`).

    The partials are computed (in f32 where magnitude.f32_operands' premises hold, else in float64), so each
    may be off its exact value by `partial_error` = (relative, absolute): relative · Σ|a·b| of its own
    products + absolute (magnitude.signed_sum_error). Over `count` partials that moves Σ_t |P_t| by at most
    relative · Σ|a·b| + count · absolute, and Σ_t |S_t| by count times that; the accumulation term adds
    both (magnitude_share, and accumulation's constant), so it bounds the exact partials' term."""

    kind: PartialsKind
    reversed: bool
    absolute: torch.Tensor  # Σ_t |P_t|, float64
    running: torch.Tensor  # Σ_t |S_t|
    count: int = 0  # the partials summed
    partial_error: tuple[float, float] = (0.0, 0.0)  # (relative to its products' Σ|a·b|, absolute) per partial

    @classmethod
    def of(cls, kind: str, reverse: bool, partials, partial_error: tuple[float, float] = (0.0, 0.0)) -> "PartialSums | None":
        """One pass over the partials (documented order); only a reversed kernel needs them held at once.
        Partials are added two at a time (partial_passes: one numba pass over the sums per pair on the CPU,
        else torch's ops); the sums are float64 whatever the partials' dtype (an f32 partial widens exactly)."""
        if reverse:
            partials = list(partials)[::-1]
        remaining = iter(partials)
        sums, count = None, 0
        for part in remaining:
            pair = (part,) if (second := next(remaining, None)) is None else (part, second)
            count += len(pair)
            if sums is None:
                sums = start(pair)
            else:
                accumulate(pair, *sums)
        if sums is None:
            return None
        absolute, _, total = sums
        return cls(kind, reverse, absolute, total, count, partial_error)

    def fits(self, arithmetic: Arithmetic) -> bool:
        return arithmetic.groups == self.kind and arithmetic.reversed == self.reversed

    def _unit(self, arithmetic: Arithmetic) -> float:
        return PARTIAL_SUMS_HEADROOM * arithmetic.acc_unit_roundoff * (2 if arithmetic.truncates else 1)

    def _error_count(self, arithmetic: Arithmetic) -> int:
        """How many times one partial's error can enter the sums: once into each running sum S_t (count),
        once more into Σ_t |P_t| when the kernel stores each partial."""
        return self.count + (1 if arithmetic.partials == "stored" else 0)

    def magnitude_share(self, arithmetic: Arithmetic) -> float:
        """The multiple of Σ|a·b| that covers the computed partials' own error in the accumulation term."""
        return self._unit(arithmetic) * self._error_count(arithmetic) * self.partial_error[0]

    def term(self, arithmetic: Arithmetic) -> tuple[float, bool, float]:
        """(unit, stored, constant): the accumulation term on the computed partials is
        unit·(Σ|S_t| + Σ|P_t| where stored) + constant, plus magnitude_share's multiple of Σ|a·b|."""
        unit = self._unit(arithmetic)
        constant = unit * self._error_count(arithmetic) * self.count * self.partial_error[1]
        return unit, arithmetic.partials == "stored", constant

    def accumulation(self, arithmetic: Arithmetic) -> torch.Tensor:
        """term's tensor (magnitude_share's part not included), new, by torch's ops."""
        unit, stored, constant = self.term(arithmetic)
        total = torch.mul(self.running, unit)
        if stored:
            total.add_(self.absolute, alpha=unit)
        if constant:
            total.add_(constant)
        return total


@dataclass(frozen=True, eq=False)
class ProductSumError:
    """The error of summing `reduction_size` products per element: (u_in + A)·Σ|a·b|."""

    sum_bound: "torch.Tensor | WidenedSum"  # Σ|a_i·b_i| per element (an upper bound on it), float64 or as summed
    reduction_size: int
    dtype: str  # the case's dtype (what the arithmetic is assumed to be where it was not measured)
    samples: int = 1  # per-sample partials a kernel may keep (conv bwd_weight: N)
    taps: int = 1  # per-tap partials a kernel may keep (conv fwd / bwd_data: the window)
    partials: PartialSums | None = None  # the partial sums themselves, when the measured arithmetic keeps them

    @property
    def magnitude(self) -> torch.Tensor:
        """Σ|a·b| per element, float64."""
        return self.sum_bound.float64 if isinstance(self.sum_bound, WidenedSum) else self.sum_bound

    def summed_terms(self) -> tuple[torch.Tensor, float]:
        """(Ŝ, W) with Ŝ·W the magnitude: Ŝ f32 or float64, for a pass that widens as it goes."""
        if isinstance(self.sum_bound, WidenedSum):
            return self.sum_bound.summed, self.sum_bound.widening
        return self.sum_bound, 1.0

    def factor(self, model: BoundModel) -> float:
        return product_sum_factor(self.reduction_size, self.dtype, model, self.samples, self.taps)

    def single_factor(self, model: BoundModel) -> float | None:
        """F where the term is F·Σ|a·b|; None where the kernel's partial sums enter it too."""
        arithmetic = effective_arithmetic(model, self.dtype)
        return self.factor(model) if self.partials is None or not self.partials.fits(arithmetic) else None

    def evaluate(self, model: BoundModel, ref: torch.Tensor | None = None) -> torch.Tensor:
        arithmetic = self.partials_arithmetic(model)
        if arithmetic is None:
            return self.magnitude * self.factor(model)
        summed, widening = self.summed_terms()  # Σ|a·b| ≤ Ŝ·W, not written out: (W·within)·Ŝ
        within = self.beside_partials(model, arithmetic)
        return self.partials.accumulation(arithmetic).add_(summed, alpha=widening * within)

    def partials_arithmetic(self, model: BoundModel) -> Arithmetic | None:
        """The arithmetic under `model` where the kernel's partial sums enter the term, else None."""
        arithmetic = effective_arithmetic(model, self.dtype)
        return arithmetic if self.partials is not None and self.partials.fits(arithmetic) else None

    def beside_partials(self, model: BoundModel, arithmetic: Arithmetic) -> float:
        """The multiple of Σ|a·b| beside the partial sums' term: the inputs' rounding, the sums inside each
        partial, and the computed partials' own error (PartialSums.magnitude_share)."""
        count = arithmetic.group_count(self.reduction_size, self.samples, self.taps)
        inner = growth(math.ceil(self.reduction_size / count), model.strict, model.lam, arithmetic.truncates)
        within = input_rounding(arithmetic) + inner * arithmetic.inner_unit_roundoff
        return within + self.partials.magnitude_share(arithmetic)


@dataclass(frozen=True, eq=False)
class OutputRounding:
    """The final rounding to the output format: c_out · ulp_T(ref)."""

    out_dtype: str
    source = "output rounding"

    def evaluate(self, model: BoundModel, ref: torch.Tensor) -> torch.Tensor:
        return self.add_to(torch.zeros_like(ref, dtype=torch.float64), model, ref)

    def add_to(self, total: torch.Tensor, model: BoundModel, ref: torch.Tensor) -> torch.Tensor:
        """total + c_out · ulp_T(ref), in place where total has ref's shape: one pass over the outputs."""
        if not model.c_out:
            return total
        if total.shape != ref.shape or total.dtype != torch.float64 or ref.dtype != torch.float64:
            return total.add_(metrics.ulp(ref, self.out_dtype).mul_(model.c_out))
        return add_ulps(total, ref, self.out_dtype, model.c_out)


@dataclass(frozen=True, eq=False)
class ScaledMagnitude:
    """One error source of a composed bound: coefficient(model) · magnitude, per element.

    The magnitude (float64, the output's shape) is computed once from the exact values; the coefficient
    is one of the pieces below, so the same term can be evaluated under any model."""

    coefficient: "Coefficient"
    magnitude: torch.Tensor
    source: str  # what error it is, for reports and tests

    def evaluate(self, model: BoundModel, ref: torch.Tensor | None = None) -> torch.Tensor:
        return self.magnitude * self.coefficient(model)

    def add_to(self, total: torch.Tensor, model: BoundModel, ref: torch.Tensor | None = None) -> torch.Tensor:
        """total + evaluate(), in place: one pass, no tensor of its own."""
        return total.add_(self.magnitude, alpha=self.coefficient(model))


@dataclass(frozen=True, eq=False)
class IndependentRoundings:
    """Σ_j ρ_j t_j, roundings |ρ_j| <= u of different values, so independent with mean zero: at most
    u·Σ|t_j| (`worst`), and under the probabilistic model (not `strict`) lam·u·sqrt(Σ t_j²) (`rms`)
    when that is smaller (Higham & Mary's argument, as for the product sums' G(n))."""

    coefficient: "Coefficient"  # u
    worst: torch.Tensor  # Σ|t_j| per element
    rms: torch.Tensor  # sqrt(Σ t_j²) per element
    source: str

    def evaluate(self, model: BoundModel, ref: torch.Tensor | None = None) -> torch.Tensor:
        unit = self.coefficient(model)
        if model.strict:
            return self.worst * unit
        return torch.minimum(self.worst, self.rms * model.lam).mul_(unit)


HELD_BITS = 24  # the widest accumulator CommonValueSum._unless_exact names (f32)


def summand_quantum(x: torch.Tensor, absolute_sum: torch.Tensor, dims: int | tuple[int, ...] = -1,
                    keepdim: bool = False, prefix: bool = False) -> torch.Tensor:
    """The largest power of two every element of x (float64) over `dims` is a multiple of (inf where every element
    is 0): each value's lowest set bit, the smallest of them. `prefix`: for each prefix along the one dim `dims`,
    the running one (cumsum's). 0 everywhere when it cannot matter, found from one element per output: a sum
    with Σ|x| (`absolute_sum`) is held only if the quantum is at least q_min = 2^ceil(log2(Σ|x| / 2^HELD_BITS)),
    so an element that is no multiple of q_min (the largest, which drawn reals never are) rules it out."""
    largest = torch.cummax(x, dim=dims).values if prefix else x.amax(dim=dims, keepdim=keepdim)
    least = torch.exp2(torch.ceil(torch.log2(absolute_sum * 2.0 ** -HELD_BITS)))
    if not bool(((absolute_sum == 0) | (torch.remainder(largest, least) == 0)).any()):
        return torch.zeros_like(absolute_sum)
    mantissa, exponent = torch.frexp(x)  # x = mantissa · 2^exponent, |mantissa| in [0.5, 1)
    bits = (mantissa.abs() * 2.0 ** 53).to(torch.int64)  # exact: float64's 53 significand bits as an integer
    lowest = (bits & -bits).clamp_(min=1).to(torch.float64)
    per_value = torch.where(x == 0, math.inf, torch.ldexp(lowest, (exponent - 53).to(torch.int64)))
    if prefix:
        return torch.cummin(per_value, dim=dims).values
    return per_value.amin(dim=dims, keepdim=keepdim)


@dataclass(frozen=True, eq=False)
class CommonValueSum:
    """The share of a sum's rounding errors that the summands' common value can make systematic.

    G(n)'s random walk assumes the roundings are independent with mean zero. Summands that share a large
    common value μ break that: the partial sums grow by about μ at each step, and when the summands' spread is
    below the partial sums' spacing w every rounding drops about the same low part (a sequential f32 sum of
    65,536 values in [1000, 1001] errs by ~N·u·Σx/16, 50x λ√N·u·Σx). Writing each partial sum of n summands
    as n·μ + (its deviations), the first-order error Σ δ·(partial sum) splits into Σ δ·n·μ and the
    deviations' share, which G(n)'s term keeps. The common share is at most u·|μ|·Σ n over the partial sums,
    and Σ n <= N(N+1)/2 in any order (a sequential sum reaches it), so

        proven    u · |Σx| · (N+1)/2

    When the summands were drawn independently at random (`spread` given: max - min of each output's
    summands) and the kernel rounds to nearest even, a rounding of L + x, x a fresh draw with a density at
    most 1/spread, has a mean of at most w²/(8·spread) over the draw (ρ integrates to zero over each period w
    of the grid; what is left of a period is at most w²/8), w <= 2u·Σ|x| the spacing of the largest partial
    sum; the rest is independent with mean zero, which G(n)'s term bounds (Azuma-Hoeffding). Ties round to
    either neighbour as the grid's parity falls, which the draw makes even odds once spread >= 2w. So

        drawn     N · w² / (8·spread)        where spread >= 2w, else the proven term

    and the bound takes the smaller. With the strict growth (λN) or a truncating kernel (2N) the growth term
    is linear already and covers this one: 0 then; 0 too where the sum is exact (_unless_exact).
    docs/concepts/reduction-bound.md derives and tests it."""

    count: "float | torch.Tensor"  # N per output (a tensor for prefix sums)
    dtype: str
    signed_sum: torch.Tensor  # |Σx| per output
    absolute_sum: torch.Tensor  # Σ|x| per output
    spread: torch.Tensor | None  # max - min of the summands per output; None: not drawn independently
    scale: float = 1.0  # what the output is of the sum (1/N for a mean)
    source: str = "the summands' common value"
    quantum: torch.Tensor | None = None  # a power of two every summand is a multiple of, per output (None: unknown)

    @classmethod
    def over(cls, x: torch.Tensor, dims: int | tuple[int, ...], dtype: str, drawn: bool, *, scale: float = 1.0,
             keepdim: bool = False, exact_when_held: bool = True) -> "CommonValueSum":
        """The term of the sum of x (float64) over `dims` per output: its sums, its spread where the elements were
        `drawn` independently, its quantum unless `exact_when_held` is off (summands the kernel computes on no
        known grid, such as deviations from a mean)."""
        absolute = x.abs().sum(dim=dims, keepdim=keepdim)
        spread = x.amax(dim=dims, keepdim=keepdim) - x.amin(dim=dims, keepdim=keepdim) if drawn else None
        count = math.prod(x.shape[d] for d in ((dims,) if isinstance(dims, int) else dims))
        quantum = summand_quantum(x, absolute, dims, keepdim) if exact_when_held else None
        return cls(count, dtype, x.sum(dim=dims, keepdim=keepdim).abs_(), absolute, spread, scale, quantum=quantum)

    def evaluate(self, model: BoundModel, ref: torch.Tensor | None = None) -> torch.Tensor:
        arithmetic = effective_arithmetic(model, self.dtype)
        if model.strict or arithmetic.truncates:
            return torch.zeros_like(self.signed_sum)
        unit = arithmetic.acc_unit_roundoff
        proven = self.signed_sum * ((self.count + 1) / 2 * unit * self.scale)
        if self.spread is None or arithmetic.rounding != "nearest-even":
            return self._unless_exact(proven, arithmetic)
        spacing = self.absolute_sum * (2 * unit)
        wide = (self.spread > 0) & (self.spread >= 2 * spacing)
        drawn = spacing.square().mul_(self.count * self.scale).div_(torch.where(wide, self.spread, 1.0).mul(8))
        return self._unless_exact(torch.where(wide, torch.minimum(proven, drawn), proven), arithmetic)

    def _unless_exact(self, term: torch.Tensor, arithmetic: Arithmetic) -> torch.Tensor:
        """0 where the sum is exact in any order: every partial sum is a multiple of the quantum q at most Σ|x|
        in magnitude, so it is held exactly by an accumulator of p bits when Σ|x| <= q·2^p and q is no finer
        than the accumulator's smallest subnormal (sums of bf16 values near 1000 in f32, a pattern's sums)."""
        fmt = {bits: name for name, bits in FORMAT_BITS.items() if name in ("f32", "f16", "bf16")}.get(arithmetic.acc_bits)
        if self.quantum is None or fmt is None:  # an unnamed width ("at least 29 bits"): not worth the case
            return term
        held = (self.absolute_sum <= self.quantum * 2.0 ** arithmetic.acc_bits) & (  # acc_bits <= HELD_BITS here
            self.quantum >= metrics.get_format(fmt).min_subnormal)
        return term.masked_fill(held, 0.0)


def chain_square_sum(count: "float | torch.Tensor", mean: torch.Tensor, variance: torch.Tensor) -> torch.Tensor:
    """Σ over the partial sums of a sequential sum of `count` summands of E[(partial sum)²], the summands
    exchangeable with this mean and (population) variance: a partial sum of n of them has E = n²μ² + n·σ²·(N-n)/(N-1)
    <= n²μ² + n·σ², summed over n = 1..N. Every summation tree's partial sums are subsets no larger than a
    sequential sum's (N, N-1, ..., 2), so this is the largest of every order."""
    return (mean.square() * (count * (count + 1) * (2 * count + 1) / 6)).add_(variance * (count * (count + 1) / 2))


@dataclass(frozen=True, eq=False)
class DrawnSum:
    """The accumulation error of a sum of summands drawn independently at random, from its partial sums.

    First order, a sum in any order errs by Σ_v δ_v·s_v over its additions v, s_v the exact partial sum and
    |δ_v| <= u; with the roundings independent of mean zero, at most λ·u·sqrt(Σ_v s_v²) (Azuma-Hoeffding:
    Ipsen & Zhou, "Probabilistic error analysis for inner products", 2020). The kernel's order is fixed before
    the data are drawn, so its partial sums are the sums of random subsets of the summands, and Σ_v E[s_v²]
    is largest in a sequential order (`chain_square_sum`). Taken with the summands' own mean and variance it
    is N²σ²/2 + N³μ²/3: on data of mean zero about √N below λ√N·u·Σ|x| (G(N)'s term, which keeps
    Σ|x| for every partial sum), so a dropped element or an output an ulp off stands out of a long sum.
    The expectation over a subset's draw is 3x the sequential sum's own (σ²N²/6 without replacement) and
    covers its spread: over 10^6 sequential f32 sums of 4 to 32,768 uniform values the largest error / W is
    0.55 (docs/evidence/common-value.md). The summands' common value's systematic share is
    CommonValueSum's. Where the premise fails (a pattern, sorted data) the op keeps G(N)'s term; the smaller
    of the two is taken, and G(N)'s alone with `strict` or a truncating kernel (one-signed errors).

    The walk takes u of the measured accumulator but never finer than the dtype's assumed one (f32 below
    f64): the probes sum a few dozen values, and a kernel that scans blocks of 64 in float64 but carries their
    totals in f32 measures ">= 29 bits" there. G(N)'s term at the measured width has the slack for that
    carry; the walk would not."""

    count: "float | torch.Tensor"  # N per output (a tensor for prefix sums)
    dtype: str
    absolute_sum: torch.Tensor  # Σ|x| per output: G(N)'s term
    chain: torch.Tensor  # chain_square_sum per output
    growth_count: int  # the N of G(N)'s term (a prefix sum's row length)
    scale: float = 1.0  # what the output is of the sum (1/N for a mean)
    source: str = "sum"

    @classmethod
    def over(cls, x: torch.Tensor, dims: int | tuple[int, ...], dtype: str, *, scale: float = 1.0,
             absolute_sum: torch.Tensor | None = None) -> "DrawnSum":
        """The term of the sum of x (float64) over `dims` per output; absolute_sum: Σ|x| where already summed."""
        count = math.prod(x.shape[d] for d in ((dims,) if isinstance(dims, int) else dims))
        mean = x.mean(dim=dims)
        variance = x.square().mean(dim=dims).sub_(mean.square()).clamp_(min=0)
        absolute_sum = x.abs().sum(dim=dims) if absolute_sum is None else absolute_sum
        return cls(count, dtype, absolute_sum, chain_square_sum(count, mean, variance), count, scale)

    @classmethod
    def prefixes(cls, x: torch.Tensor, axis: int, dtype: str, counts: torch.Tensor, sums: torch.Tensor,
                 absolute_sums: torch.Tensor) -> "DrawnSum":
        """The term of every prefix sum of x (float64) along `axis` (cumsum's), given each prefix's count, Σx, Σ|x|."""
        mean = sums / counts
        variance = x.square().cumsum(dim=axis).div_(counts).sub_(mean.square()).clamp_(min=0)
        return cls(counts, dtype, absolute_sums, chain_square_sum(counts, mean, variance), x.shape[axis],
                   source="prefix sum")

    def evaluate(self, model: BoundModel, ref: torch.Tensor | None = None) -> torch.Tensor:
        anywhere = self.absolute_sum * (product_sum_factor(self.growth_count, self.dtype, model) * self.scale)
        arithmetic = effective_arithmetic(model, self.dtype)
        if model.strict or arithmetic.truncates:
            return anywhere
        unit = max(arithmetic.acc_unit_roundoff, arithmetic.inner_unit_roundoff)  # every addition, grouped or not
        if model.acc == MEASURED:  # probes on short sums may not see the rounding between a long sum's blocks
            unit = max(unit, assumed_arithmetic(self.dtype).acc_unit_roundoff)
        walk = self.chain.sqrt().mul_(model.lam * unit).add_(self.absolute_sum, alpha=input_rounding(arithmetic))
        return torch.minimum(anywhere, walk.mul_(self.scale))


def accumulation_term(x: torch.Tensor, axes: int | tuple[int, ...], dtype: str, drawn: bool, count: int,
                      absolute_sum: torch.Tensor, scale: float = 1.0) -> "DrawnSum | ScaledMagnitude":
    """A sum's accumulation term, per output (x float64, summed over `axes`; absolute_sum: Σ|x| there): from its
    partial sums (DrawnSum) where x was drawn independently, else G(N)·u·Σ|x|."""
    if drawn:
        return DrawnSum.over(x, axes, dtype, scale=scale, absolute_sum=absolute_sum)
    return ScaledMagnitude(ProductSumCoefficient(count, dtype), absolute_sum * scale, "sum")


@dataclass(frozen=True, eq=False)
class SumOfBounds:
    """Independent error sources of one output add up (first order)."""

    parts: tuple[ErrorBound, ...]

    def evaluate(self, model: BoundModel, ref: torch.Tensor) -> torch.Tensor:
        deferred = self._product_sum_and_rounding(model, ref)
        if deferred is not None:
            return deferred.values
        return self._formed(model, ref)

    def deferred(self, model: BoundModel, ref: torch.Tensor) -> "torch.Tensor | ScaledPlusUlps":
        """The bound for metrics.compare: the usual conv/gemm bound F·Σ|a·b| + c_out·ulp_T(ref) as its
        recipe (compare forms it inside its own pass: no float64 tensor of the outputs' size), else
        `evaluate`'s tensor."""
        deferred = self._product_sum_and_rounding(model, ref)
        return deferred if deferred is not None else self._formed(model, ref)

    def _formed(self, model: BoundModel, ref: torch.Tensor) -> torch.Tensor:
        fused = self._partials_and_rounding(model, ref)
        return fused if fused is not None else self._summed(model, ref)

    def _summed(self, model: BoundModel, ref: torch.Tensor) -> torch.Tensor:
        total = self.parts[0].evaluate(model, ref)
        for part in self.parts[1:]:
            add_to = getattr(part, "add_to", None)  # added into the running total, not a tensor of its own
            total = add_to(total, model, ref) if add_to is not None else total.add_(part.evaluate(model, ref))
        return total

    def _product_sum_and_rounding(self, model: BoundModel, ref: torch.Tensor) -> "ScaledPlusUlps | None":
        """F·Σ|a·b| + c_out·ulp_T(ref), not yet formed (the usual conv/gemm bound), else None."""
        if len(self.parts) != 2 or not isinstance(self.parts[0], ProductSumError) or not isinstance(self.parts[1], OutputRounding):
            return None
        factor = self.parts[0].single_factor(model)
        terms, widening_factor = self.parts[0].summed_terms()
        if (factor is None or terms.shape != ref.shape or terms.dtype not in (torch.float64, torch.float32)
                or ref.dtype != torch.float64):
            return None
        return ScaledPlusUlps(terms, factor, ref, self.parts[1].out_dtype, model.c_out, widening=widening_factor)

    def _partials_and_rounding(self, model: BoundModel, ref: torch.Tensor) -> torch.Tensor | None:
        """A conv bound on the kernel's partial sums, accumulation term + F·Σ|a·b| + c_out·ulp_T(ref), in one
        pass over the outputs (metrics.ulp_terms.partial_sums_plus_ulps) instead of torch's six; None where
        the parts are others or the pass does not apply (then _summed, the same value to float64's rounding)."""
        if (len(self.parts) != 2 or not isinstance(self.parts[0], ProductSumError)
                or not isinstance(self.parts[1], OutputRounding) or not model.c_out):
            return None
        product = self.parts[0]
        arithmetic = product.partials_arithmetic(model)
        if arithmetic is None:
            return None
        summed, widening = product.summed_terms()
        unit, stored, constant = product.partials.term(arithmetic)
        return partial_sums_plus_ulps(product.partials.running, product.partials.absolute if stored else None, unit,
                                      constant, summed, widening * product.beside_partials(model, arithmetic), ref,
                                      self.parts[1].out_dtype, model.c_out)

    def part(self, kind: type) -> ErrorBound:
        """The first part of a kind (e.g. ProductSumError), for analyses that look inside."""
        return next(p for p in self.parts if isinstance(p, kind))


@dataclass(frozen=True, eq=False)
class ExactWhere:
    """A bound that is 0 where the result is exact by construction (attention's fully masked rows)."""

    exact: torch.Tensor  # bool, the output's shape
    bound: SumOfBounds

    @property
    def parts(self) -> tuple[ErrorBound, ...]:
        return self.bound.parts

    def evaluate(self, model: BoundModel, ref: torch.Tensor) -> torch.Tensor:
        return self.bound.evaluate(model, torch.where(self.exact, 0.0, ref)).masked_fill_(self.exact, 0.0)


@dataclass(frozen=True, eq=False)
class RoundedIntermediate:
    """An intermediate the op rounds to `fmt` (the reference too) before it multiplies it by `following`
    (a fused gemm→gemm's A·B times C): the error it carries into the output, Σ_n I_n · |following_n|.

    The kernel computes the intermediate's exact value E with an error of at most
    B = coefficient(model) · magnitude, then rounds it. Where E lies farther than B from every rounding
    boundary of `fmt`, kernel and reference round to the same value (I = 0); elsewhere they may differ
    by B plus a rounding at each end (I = B + 2·ulp(|E| + B): the gap where E + ε may round is the
    wider one)."""

    exact: torch.Tensor  # E, float64
    magnitude: torch.Tensor  # what the coefficient multiplies (Σ|a·b| of the first product)
    coefficient: "Coefficient"
    fmt: str
    following: Magnitudes  # |C| (runner/upper_matmul.py), rounded up to f32 once for every product with it
    source: str = "rounded intermediate"
    # the deviations' walk (below) applies: the first product's operands drawn independently and centred
    independent: bool = False
    dtype: str = "f32"  # the case's, for the arithmetic the walk needs

    def deviation(self, model: BoundModel) -> torch.Tensor:
        """I per element of the intermediate."""
        return rounding_deviation(self.exact, self.magnitude * self.coefficient(model), self.fmt)

    def evaluate(self, model: BoundModel, ref: torch.Tensor | None = None) -> torch.Tensor:
        """Σ_n I_n·|C_n|; where `independent`, at most (λ/2)·sqrt(Σ_n I_n²·C_n²). The intermediate's deviations
        δ_n are the errors of different product sums (and the roundings after them), independent with mean zero
        when the operands were drawn independently and centred, so their sum through C walks: its standard
        deviation is at most sqrt(Σ σ_n² C_n²), and I_n >= 2σ_n (a deviation of one step of T either way, or the
        accumulation bound, λ√3 of its own standard deviation or more). Not with `strict`, a truncating
        accumulator or an intermediate rounded toward zero: their deviations share a sign."""
        deviation = self.deviation(model)
        linear = upper_matmul(deviation, self.following)
        arithmetic = effective_arithmetic(model, self.dtype)
        if (not self.independent or model.strict or arithmetic.truncates
                or arithmetic.intermediate_rounding == "toward-zero"):
            return linear
        walk = upper_matmul(deviation.square(), self.squared_following).sqrt_().mul_(model.lam / 2)
        return torch.minimum(linear, walk)

    @functools.cached_property
    def squared_following(self) -> Magnitudes:
        return Magnitudes(self.following.values.square())


# -- coefficients: the relative error of one step of a composed computation -------------
class Coefficient(Protocol):
    def __call__(self, model: BoundModel) -> float: ...


@dataclass(frozen=True)
class ProductSumCoefficient:
    """u_in + A of a sum of `count` products: the gemm piece (relative to Σ|a·b|)."""

    count: int
    dtype: str

    def __call__(self, model: BoundModel) -> float:
        return product_sum_factor(self.count, self.dtype, model)


@dataclass(frozen=True)
class ComputeRoundings:
    """`roundings` · u of the compute (accumulator) format: that many element-wise operations in it,
    each off by at most one rounding of its result (two toward zero)."""

    roundings: float
    dtype: str

    def __call__(self, model: BoundModel) -> float:
        arithmetic = effective_arithmetic(model, self.dtype)
        return self.roundings * arithmetic.acc_unit_roundoff * (2 if arithmetic.truncates else 1)


@dataclass(frozen=True)
class PositiveSumCoefficient:
    """G(count) · u: the relative error of summing `count` non-negative terms in the compute format
    (no cancellation, so relative to the sum itself), `per_step` roundings per addition."""

    count: int
    dtype: str
    per_step: float = 1.0

    def __call__(self, model: BoundModel) -> float:
        arithmetic = effective_arithmetic(model, self.dtype)
        return (self.per_step * growth(self.count, model.strict, model.lam, arithmetic.truncates)
                * arithmetic.acc_unit_roundoff)


@dataclass(frozen=True)
class FormatRounding:
    """u of a format values are rounded to on the way (attention's P before P·V): a constant."""

    fmt: str

    def __call__(self, model: BoundModel) -> float:
        return unit_roundoff(self.fmt)


@dataclass(frozen=True)
class FormatRoundings:
    """`count` roundings to `fmt` on a term's way, each relative: count · u_fmt (a scaled gemm's f32 scale
    products)."""

    fmt: str
    count: int

    def __call__(self, model: BoundModel) -> float:
        return self.count * unit_roundoff(self.fmt)


@dataclass(frozen=True)
class IntermediateRounding:
    """The rounding of a fused op's intermediate before its second product (attention's P before P·V) to
    the format the probes found (Arithmetic.intermediate; "exact": it stays in the compute format, no
    rounding); where not measured, to the dtype's input format. `tiny`: the absolute error of an intermediate
    that small instead of its unit roundoff: half that format's subnormal spacing, and at least f32's smallest
    normal, since the exponential that makes it may return 0 for a subnormal result (vectorised exps do below
    f32's normal range; the default requirement lets subnormals go, `require.subnormals = "kept"` does not)."""

    dtype: str
    tiny: bool = False

    def __call__(self, model: BoundModel) -> float:
        arithmetic = model.arithmetic
        measured = arithmetic is not None and not arithmetic.unexplained and arithmetic.intermediate != ""
        fmt = arithmetic.intermediate if measured else input_format_name(self.dtype)
        if self.tiny:
            rounded = metrics.get_format("f32" if fmt == "exact" else fmt).min_subnormal / 2
            return max(rounded, metrics.get_format("f32").min_normal)
        if fmt == "exact":
            return 0.0
        toward_zero = measured and arithmetic.intermediate_rounding == "toward-zero"
        return unit_roundoff(fmt) * (2 if toward_zero else 1)


@dataclass(frozen=True)
class SubnormalRounding:
    """Half the subnormal spacing of a format: the absolute error of rounding a value that tiny."""

    fmt: str

    def __call__(self, model: BoundModel) -> float:
        return metrics.get_format(self.fmt).min_subnormal / 2


# -- the bounds of product-sum ops (conv, gemm) -------------------------------------
PARTIALS_MAX_PASSES = 64  # a cut into more partials than this falls back to the Σ|a·b| form


def product_sum_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor],
                      arithmetic: Arithmetic | None = None) -> SumOfBounds:
    """An op whose output sums products of its inputs, then rounds to the output format.

    When the measured arithmetic keeps narrow partials per tap or per sample, their sums are computed
    too (one op per partial) so the accumulator's term is that of the kernel's own computation: in f32
    where Σ|a·b|'s f32 premises hold (magnitude.f32_operands), else in float64, each with its own error
    covered (PartialSums)."""
    operands = f32_operands(problem, inputs64)
    partials = None
    if arithmetic is not None and arithmetic.groups in ("taps", "samples"):
        samples, taps = problem.spec.reduction_parts(problem.params, problem.direction)
        if arithmetic.group_count(problem.reduction_size, samples, taps) <= PARTIALS_MAX_PASSES:
            partials = _partial_sums(problem, inputs64, arithmetic, operands)
    return product_sum_parts(problem, widened_sum(problem, inputs64, operands), partials)


def _partial_sums(problem: Problem, inputs64: Mapping[str, torch.Tensor], arithmetic: Arithmetic,
                  operands: F32Operands) -> PartialSums | None:
    """The kernel's partials' sums, from f32 copies of the inputs (exact: the premises checked that every
    input is an f32 value) where the f32 premises hold, with NNPACK off as for Σ|a·b|."""
    if operands.unmet:
        inputs, unit, min_normal = inputs64, F64_UNIT_ROUNDOFF, F64_MIN_NORMAL
    else:
        inputs = {name: t.to(torch.float32) for name, t in inputs64.items()}
        unit, min_normal = F32_UNIT_ROUNDOFF, F32_MIN_NORMAL
    dtype = next(iter(inputs.values())).dtype
    with torch.backends.nnpack.flags(enabled=False):
        produced = problem.numerics.reduction_partials(problem, inputs, arithmetic.groups)
        if produced is None:
            return None
        primary = (_computed_in(dtype, named_outputs(problem.output_names, p, ValueError)[problem.primary_output])
                   for p in produced)
        return PartialSums.of(arithmetic.groups, arithmetic.reversed, primary,
                              signed_sum_error(problem.reduction_size, unit, min_normal))


def _computed_in(dtype: torch.dtype, partial: torch.Tensor) -> torch.Tensor:
    """The partial, which the allowance covers only as computed in `dtype`: anything else (a conversion on
    the way out of the op) is a bug in the op's reduction_partials, not a rounding to be widened."""
    if partial.dtype != dtype:
        raise ValueError(f"a reduction partial came back in {partial.dtype}, not in its inputs' {dtype}")
    return partial


def product_sum_parts(problem: Problem, terms: "torch.Tensor | WidenedSum", partials: PartialSums | None = None) -> SumOfBounds:
    """The product-sum bound for given Σ|a·b| (all elements, or a sample of them)."""
    samples, taps = problem.spec.reduction_parts(problem.params, problem.direction)
    return SumOfBounds((ProductSumError(terms, problem.reduction_size, problem.dtype, samples, taps, partials),
                        OutputRounding(problem.out_dtype)))


def relative_factor(problem: Problem, model: BoundModel) -> float:
    """u_in + A for a product-sum problem."""
    samples, taps = problem.spec.reduction_parts(problem.params, problem.direction)
    return product_sum_factor(problem.reduction_size, problem.dtype, model, samples, taps)


# -- entry points -------------------------------------------------------------------
def error_bounds(problem: Problem, inputs64: Mapping[str, torch.Tensor],
                 arithmetic: Arithmetic | None = None) -> dict[str, ErrorBound]:
    """Each output's bound, from the op (model-independent parts computed once)."""
    return problem.numerics.error_bound(problem, inputs64, arithmetic)


def compute_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor], ref: torch.Tensor, model: BoundModel) -> torch.Tensor:
    """B per element of the primary output (float64, logical shape, on the inputs' device)."""
    bound = error_bounds(problem, inputs64)[problem.primary_output]
    return bound.evaluate(model, ref)


# -- pieces of the reductions' bounds (runner/ops/reductions/bound.py) ---------------------------
@dataclass(frozen=True, eq=False)
class SquaredBound:
    """factor · (Σ parts)²: an error that enters squared, such as a two-pass variance's mean error ε
    (Σ_i (x_i - μ - ε)² = Σ_i (x_i - μ)² + N·ε², since Σ_i (x_i - μ) = 0), bounded by its own parts' bound."""

    parts: tuple[ErrorBound, ...]
    factor: float
    source: str

    def evaluate(self, model: BoundModel, ref: torch.Tensor | None = None) -> torch.Tensor:
        total = self.parts[0].evaluate(model, ref)
        for part in self.parts[1:]:
            total = total.add_(part.evaluate(model, ref))
        return total.square_().mul_(self.factor)


@dataclass(frozen=True)
class ComputeSubnormalRounding:
    """Half the subnormal spacing of the compute (accumulator) format: the absolute error of one result
    that underflows there (a square of a tiny deviation). The format is the one of the measured width;
    for a width no named format has, f16's (the coarsest spacing of f16, bf16, f32)."""

    dtype: str

    def __call__(self, model: BoundModel) -> float:
        bits = effective_arithmetic(model, self.dtype).acc_bits
        fmt = {53: "f64", 24: "f32", 8: "bf16"}.get(bits, "f16")
        return metrics.get_format(fmt).min_subnormal / 2
