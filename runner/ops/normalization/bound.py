"""The normalisations' per-element bounds, composed from runner.bound's pieces by first-order propagation.

The derivation is docs/concepts/normalization-bound.md. Every bound is a sum of ScaledMagnitude terms: a
coefficient of the model (F(n): ProductSumCoefficient, the reduction of a row of n elements in the compute
format; u: ComputeRoundings; G(n)·u: PositiveSumCoefficient) times a magnitude computed once from the
exact float64 values, plus the output rounding. softmax and log_softmax reuse attention's constants
(runner/ops/attention/bound.py: EXP_ULPS, ARGUMENT_ROUNDINGS, LOG_ULPS), so a stand-alone softmax and
attention's softmax are judged by the same model of exp and its argument.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import torch

from e2egen.runner.bound import (CommonValueSum, ComputeRoundings, DrawnSum, ErrorBound, IndependentRoundings, IntermediateRounding, OutputRounding, PositiveSumCoefficient, ProductSumCoefficient, ScaledMagnitude,
                    SubnormalRounding, SumOfBounds)
from e2egen.runner.ops.normalization.normalization_math import (NormRows, SoftmaxRows, channel_norm_rows,
                                     channel_values_by_row, from_channel_norm_rows, from_softmax_rows, log_softmax_backward_float64, softmax_backward_float64, norm_backward_float64, norm_float64, norm_rows,
                                     softmax_float64, softmax_rows)
from e2egen.runner.ops.normalization.spec import PER_FEATURE_INPUTS
from e2egen.runner.options import BoundModel
from e2egen.runner.problem import Problem
from e2egen.runner.exp_log_pieces import ARGUMENT_ROUNDINGS, EXP_ULPS, LOG_ULPS, rescale_roundings

RSQRT_ROUNDINGS = 3  # r = 1/sqrt(σ² + eps): the add (½ u in r), sqrt (1) and the division (1); an rsqrt instruction's 2 ulps and the add
X_HAT_ROUNDINGS = 2  # x̂ = (x - μ)·r: the subtraction and the multiply


# -- softmax, log_softmax ----------------------------------------------------------------------
@dataclass(frozen=True)
class _SoftmaxTerms:
    """Per-row magnitudes shared by softmax's and log_softmax's bounds (float64, rows last)."""

    y: torch.Tensor
    per_weight: torch.Tensor  # E_j / u: the argument's roundings and exp's own error, relative on exp(x_j - m)
    weighted: torch.Tensor  # Σ_k y_k E_k / u, keepdim
    rescale: torch.Tensor  # per rescale of the row sum by exp(m_old - m_new), / u, keepdim
    log_sum: torch.Tensor  # log l, keepdim
    row_max_abs: torch.Tensor  # max_k |x_k|, keepdim
    tiny: torch.Tensor  # 1 / l: where an exp underflows to a subnormal, its absolute error in y is at most tiny·this


def _softmax_terms(x_rows: torch.Tensor, rows: SoftmaxRows) -> _SoftmaxTerms:
    n = x_rows.shape[-1]
    row_max_abs = x_rows.abs().amax(dim=-1, keepdim=True)
    # the argument x_j - m' (m' any running max, or m + log l) rounded, or an fma with log2 e: |x_j| + max|x| + log n
    per_weight = (x_rows.abs() + row_max_abs + math.log(n)).mul_(ARGUMENT_ROUNDINGS).add_(EXP_ULPS)
    weighted = (rows.y * per_weight).sum(dim=-1, keepdim=True)
    spread = x_rows.amax(dim=-1, keepdim=True) - x_rows.amin(dim=-1, keepdim=True)
    rescale = rescale_roundings(spread)
    return _SoftmaxTerms(rows.y, per_weight, weighted, rescale, rows.log_sum, row_max_abs, rows.row_sum.reciprocal())


def softmax_forward_bound(problem: Problem, x: torch.Tensor) -> SumOfBounds:
    """|δy_j| <= y_j·(E_j + Σ_k y_k E_k)  (the weights' errors through the normalisation)
               + G(n)·u·y_j·(rescale + 1)  (online rescaling, the row sum)  + 2u·y_j  (the division)
               + u_F·y_j·(1 + Σ_k y_k)  (the weights stored in the output buffer, format F, before the division:
                                          attention's P rounding, independent roundings in the sum)."""
    x_rows = softmax_rows(x, problem.params)
    return SumOfBounds((*_softmax_weight_terms(problem, x_rows, softmax_float64(x_rows)), OutputRounding(problem.out_dtype)))


def _softmax_weight_terms(problem: Problem, x_rows: torch.Tensor, rows: SoftmaxRows,
                          scale: torch.Tensor | float = 1.0) -> tuple[ErrorBound, ...]:
    """softmax_forward_bound's terms before its output rounding, each magnitude times `scale` (per row, keepdim:
    logsumexp's backward multiplies the weights by grad_y), in the logical layout."""
    params, dtype = problem.params, problem.dtype
    t = _softmax_terms(x_rows, rows)
    y = t.y * scale
    back = lambda rows_: from_softmax_rows(rows_, params).contiguous()  # noqa: E731 - rows to the logical layout
    return (
        ScaledMagnitude(ComputeRoundings(1, dtype), back(y * (t.per_weight + t.weighted)), "exp and its argument"),
        ScaledMagnitude(PositiveSumCoefficient(params.row_length, dtype), back(y * (t.rescale + 1)), "row sum, online rescaling"),
        ScaledMagnitude(ComputeRoundings(2, dtype), back(y), "division (or reciprocal and multiply)"),
        ScaledMagnitude(SubnormalRounding("f32"), back((t.tiny * scale).expand_as(t.y)), "exp underflowing"),
        ScaledMagnitude(IntermediateRounding(dtype), back(y), "weights stored before the division"),
        IndependentRoundings(IntermediateRounding(dtype), back(y), back(y * t.y.square().sum(-1, keepdim=True).sqrt()),
                             "stored weights, through the row sum"),
    )


def logsumexp_backward_bound(problem: Problem, grad_y: torch.Tensor, x: torch.Tensor) -> SumOfBounds:
    """dx_j = g·p_j, p = softmax(x) along the axis, g one value per row:
    |δdx_j| <= |g|·δp_j (softmax_forward_bound's terms before its output rounding) + u·|g·p_j| (the product)."""
    x_rows = softmax_rows(x, problem.params)
    rows = softmax_float64(x_rows)
    g_abs = grad_y.abs().unsqueeze(-1)
    product = from_softmax_rows(g_abs * rows.y, problem.params).contiguous()
    return SumOfBounds((*_softmax_weight_terms(problem, x_rows, rows, g_abs),
                        ScaledMagnitude(ComputeRoundings(1, problem.dtype), product, "grad_y·p"),
                        OutputRounding(problem.out_dtype)))


def log_softmax_forward_bound(problem: Problem, x: torch.Tensor) -> SumOfBounds:
    """|δz_j| <= Σ_k y_k E_k + G(n)·u·(rescale + 1)  (the relative error of l, absolute in log l)
               + u·(LOG_ULPS·|log l| + ARG·(|x_j| + max|x|) + |m + log l| + |z_j|)  (log, x - m - log l)
               + u_F·(1 + |log l|)  (the row sum l, then log l, stored in format F: relative u_F in l is
                                     absolute u_F in log l; a kernel that stores m + log l instead errs by
                                     u_F·|m + log l|, past this where |m| is large)
    The u_F term is the intermediates torch's CPU log_softmax stores in the input format (bit for bit, f16
    and bf16, torch 2.13): without it its bf16 outputs reached 1.05 output ulps from the reference, past a
    bound of one ulp, in 12 of 40 seeds of each 4x1024 bf16 case (docs/concepts/normalization-bound.md)."""
    params, dtype = problem.params, problem.dtype
    x_rows = softmax_rows(x, params)
    rows = softmax_float64(x_rows)
    t = _softmax_terms(x_rows, rows)
    z = rows.z
    final = (t.log_sum.abs().mul(LOG_ULPS) + (rows.row_max + t.log_sum).abs()
             + (x_rows.abs() + t.row_max_abs).mul_(ARGUMENT_ROUNDINGS) + z.abs())
    back = lambda rows_: from_softmax_rows(rows_.expand_as(z), params).contiguous()  # noqa: E731
    return SumOfBounds((
        ScaledMagnitude(ComputeRoundings(1, dtype), back(t.weighted), "exp and its argument, through log l"),
        ScaledMagnitude(PositiveSumCoefficient(params.row_length, dtype), back(t.rescale + 1), "row sum, online rescaling"),
        ScaledMagnitude(ComputeRoundings(1, dtype), back(final), "log, x - m - log l"),
        ScaledMagnitude(IntermediateRounding(dtype), back(t.log_sum.abs() + 1), "row sum and log l stored"),
        OutputRounding(problem.out_dtype),
    ))


def logsumexp_bound(problem: Problem, x: torch.Tensor) -> SumOfBounds:
    """y = m + log l:  |δy| <= Σ_k y_k E_k + G(n)·u·(rescale + 1)  (the relative error of l, absolute in log l)
                              + u·(LOG_ULPS·|log l| + |m + log l|)  (the log, the final add)
                              + u_F·(1 + |log l|)  (l and log l stored in format F, as log_softmax's)."""
    params, dtype = problem.params, problem.dtype
    x_rows = softmax_rows(x, params)
    rows = softmax_float64(x_rows)
    t = _softmax_terms(x_rows, rows)
    final = t.log_sum.abs().mul(LOG_ULPS) + (rows.row_max + t.log_sum).abs()
    out = lambda rows_: rows_.squeeze(-1).contiguous()  # noqa: E731 - rows keep the other dims' order
    return SumOfBounds((
        ScaledMagnitude(ComputeRoundings(1, dtype), out(t.weighted), "exp and its argument, through log l"),
        ScaledMagnitude(PositiveSumCoefficient(params.row_length, dtype), out(t.rescale + 1), "row sum, online rescaling"),
        ScaledMagnitude(ComputeRoundings(1, dtype), out(final), "log, m + log l"),
        ScaledMagnitude(IntermediateRounding(dtype), out(t.log_sum.abs() + 1), "row sum and log l stored"),
        OutputRounding(problem.out_dtype),
    ))


def softmax_backward_bound(problem: Problem, grad_y: torch.Tensor, y: torch.Tensor) -> SumOfBounds:
    """dx_j = y_j·(g_j - Σ g_k y_k):  |δ| <= F(n)·y_j·Σ|g_k y_k| + 2u·y_j·(|g_j| + |Σ g y|) + u·|dx_j|."""
    params, dtype = problem.params, problem.dtype
    g, p = softmax_rows(grad_y, params), softmax_rows(y, params)
    dot = (g * p).sum(dim=-1, keepdim=True)
    grad_x = softmax_backward_float64(g, p)  # the reference's formula
    back = lambda rows: from_softmax_rows(rows, params).contiguous()  # noqa: E731
    return SumOfBounds((
        ScaledMagnitude(ProductSumCoefficient(params.row_length, dtype), back(p * (g * p).abs().sum(-1, keepdim=True)),
                        "Σ g·y"),
        ScaledMagnitude(ComputeRoundings(2, dtype), back(p * (g.abs() + dot.abs())), "y·(g - Σ g·y)"),
        ScaledMagnitude(ComputeRoundings(1, dtype), back(grad_x.abs()), "the last operation"),
        OutputRounding(problem.out_dtype),
    ))


def log_softmax_backward_bound(problem: Problem, grad_y: torch.Tensor, z: torch.Tensor) -> SumOfBounds:
    """dx_j = g_j - exp(z_j)·Σ g_k:  |δ| <= F(n)·p_j·Σ|g_k| + u·p_j·|Σ g|·(EXP_ULPS + ARG·|z_j| + 1) + u·|dx_j|."""
    params, dtype = problem.params, problem.dtype
    g, z_rows = softmax_rows(grad_y, params), softmax_rows(z, params)
    p = z_rows.exp()
    total = g.sum(dim=-1, keepdim=True)
    grad_x = log_softmax_backward_float64(g, z_rows)
    exp_part = p * total.abs() * z_rows.abs().mul(ARGUMENT_ROUNDINGS).add_(EXP_ULPS + 1)
    back = lambda rows: from_softmax_rows(rows, params).contiguous()  # noqa: E731
    return SumOfBounds((
        ScaledMagnitude(ProductSumCoefficient(params.row_length, dtype), back(p * g.abs().sum(-1, keepdim=True)), "Σ g"),
        ScaledMagnitude(ComputeRoundings(1, dtype), back(exp_part), "exp(z)·Σ g"),
        ScaledMagnitude(ComputeRoundings(1, dtype), back(grad_x.abs()), "the subtraction"),
        OutputRounding(problem.out_dtype),
    ))


# -- layer_norm, rms_norm -----------------------------------------------------------------------
@dataclass(frozen=True)
class Split:
    """An error bound as F(n)-part · F(n) + u-part · u, per element (the row's reduction and the roundings), plus
    the row statistics' sums (RowSums), each a per-row error: mean_acc · δμ_acc, the mean's accumulation
    (RowSums.mean_accumulation), and the common-value errors (CommonValueSum: a long sum of nearly equal terms,
    whose roundings add up linearly): mean_cv · δμ_cv (absolute) + moment_cv · ρ_cv (relative to the second
    moment)."""

    f: torch.Tensor | float
    u: torch.Tensor | float
    mean_cv: torch.Tensor | float = 0.0
    moment_cv: torch.Tensor | float = 0.0
    mean_acc: torch.Tensor | float = 0.0

    def __add__(self, other: "Split") -> "Split":
        return Split(*(a + b for a, b in zip(self._parts(), other._parts())))

    def __mul__(self, scale: torch.Tensor | float) -> "Split":
        return Split(*(a * scale for a in self._parts()))

    def mean(self) -> "Split":
        return Split(*(_row_mean(a) for a in self._parts()))

    def _parts(self) -> tuple:
        return (self.f, self.u, self.mean_cv, self.moment_cv, self.mean_acc)

    def terms(self, n: int, dtype: str, source: str, shape: torch.Size, logical: tuple[int, ...],
              common: "RowSums") -> tuple:
        """The pieces, each magnitude expanded to `shape` (rows) and stored in the output's logical shape."""
        pieces: list = [ScaledMagnitude(ProductSumCoefficient(n, dtype), _full(self.f, shape).reshape(logical),
                                        f"{source}: row reduction"),
                        ScaledMagnitude(ComputeRoundings(1, dtype), _full(self.u, shape).reshape(logical), f"{source}: roundings")]
        for magnitude, per_row, what in ((self.mean_acc, common.mean_accumulation, "the mean's sum"),
                                         (self.mean_cv, common.mean_error, "the mean's common value"),
                                         (self.moment_cv, common.moment_error, "the second moment's common value")):
            if isinstance(magnitude, torch.Tensor) or magnitude:
                pieces.append(RowScaled(per_row, _full(magnitude, shape), logical, f"{source}: {what}"))
        return tuple(pieces)


@dataclass(frozen=True, eq=False)
class RowSums:
    """Errors of the rows' two sums under a model, each (rows, 1): the mean's (Σx/n) accumulation, absolute, and the
    common values (CommonValueSum, runner/bound.py) of the mean, absolute, and of the second moment (Σ(x - μ)²,
    rms_norm's Σx²), relative. rms_norm has no mean; layer_norm's deviations squared are spread from 0 to D², so
    their sum's common-value term is the proven one only where they were not drawn.

    The mean's accumulation is DrawnSum's walk (√N below G(N)·u·Σ|x| on centred rows: a dropped element of a long
    row shows) on rows drawn independently whose mean lies within their spread (|μ| <= σ), else G(N)·u·Σ|x|.
    On an offset row the roundings of a kernel that does not sum, Welford's running mean, repeat with the common
    value and add up beyond the walk (its bf16 rows of mean 1000 reach 1.13x it); the second moment's summands are
    never centred, and keep G(N)'s term (Split.f)."""

    mean_sum: CommonValueSum | None
    moment_sum: CommonValueSum
    mean_walk: DrawnSum | None  # where x was drawn independently
    mean_anywhere: ScaledMagnitude | None  # G(N)·u·Σ|x|/n
    walk_rows: torch.Tensor  # (rows, 1): rows drawn independently with |μ| <= σ
    moment: torch.Tensor  # Σ of the second moment's terms, (rows, 1)

    def mean_accumulation(self, model: BoundModel) -> torch.Tensor:
        if self.mean_anywhere is None:
            return torch.zeros_like(self.moment)
        anywhere = self.mean_anywhere.evaluate(model).reshape(self.moment.shape)
        if self.mean_walk is None or not bool(self.walk_rows.any()):
            return anywhere
        return torch.where(self.walk_rows, self.mean_walk.evaluate(model).reshape(self.moment.shape), anywhere)

    def mean_error(self, model: BoundModel) -> torch.Tensor:
        if self.mean_sum is None:
            return torch.zeros_like(self.moment)
        return self.mean_sum.evaluate(model)

    def moment_error(self, model: BoundModel) -> torch.Tensor:
        return self.moment_sum.evaluate(model) / self._divisor

    @property
    def _divisor(self) -> torch.Tensor:
        return torch.where(self.moment > 0, self.moment, 1.0)


@dataclass(frozen=True, eq=False)
class RowScaled:
    """magnitude · per_row(model), a per-row error (rows, 1) spread over its row's elements, in `logical` shape."""

    per_row: "Callable[[BoundModel], torch.Tensor]"
    magnitude: torch.Tensor  # rows, expanded
    logical: tuple[int, ...]
    source: str

    def evaluate(self, model: BoundModel, ref: torch.Tensor | None = None) -> torch.Tensor:
        return (self.magnitude * self.per_row(model)).reshape(self.logical)


@dataclass(frozen=True, eq=False)
class FeatureSummed:
    """to_feature(magnitude · per_row(model)): a per-feature gradient's sum of its elements' per-row errors."""

    per_row: "Callable[[BoundModel], torch.Tensor]"
    magnitude: torch.Tensor  # the rows' shape
    to_feature: "Callable[[torch.Tensor], torch.Tensor]"
    source: str

    def evaluate(self, model: BoundModel, ref: torch.Tensor | None = None) -> torch.Tensor:
        return self.to_feature(self.magnitude * self.per_row(model))


def row_sums(problem: Problem, norm: NormRows) -> RowSums:
    """The rows' sums: Σx for the mean, Σ(x - μ)² (rms_norm: Σx²) for the second moment."""
    n, dtype = norm.x.shape[-1], problem.dtype
    drawn = problem.drawn_independently("x")
    mean_sum = CommonValueSum.over(norm.x, -1, dtype, drawn, scale=1 / n, keepdim=True) if norm.centered else None
    # the squares of x's grid values lie on a grid; the kernel's deviations from its mean lie on no known one
    moment_sum = CommonValueSum.over(norm.deviations.square(), -1, dtype, drawn, keepdim=True,
                                     exact_when_held=not norm.centered)
    mean_walk = mean_anywhere = None
    walk_rows = torch.zeros_like(moment_sum.absolute_sum, dtype=torch.bool)
    if mean_sum is not None:
        absolute_sum = mean_sum.absolute_sum.squeeze(-1)
        mean_walk = DrawnSum.over(norm.x, -1, dtype, scale=1 / n, absolute_sum=absolute_sum) if drawn else None
        mean_anywhere = ScaledMagnitude(ProductSumCoefficient(n, dtype), absolute_sum * (1 / n), "sum")
        mean = norm.x.mean(dim=-1, keepdim=True)
        walk_rows = (mean.square() <= norm.x.var(dim=-1, correction=0, keepdim=True)) & drawn
    return RowSums(mean_sum, moment_sum, mean_walk, mean_anywhere, walk_rows, moment_sum.absolute_sum)


def _row_mean(value: torch.Tensor | float) -> torch.Tensor | float:
    return value.mean(dim=-1, keepdim=True) if isinstance(value, torch.Tensor) else value


def _full(value: torch.Tensor | float, shape: torch.Size) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.expand(shape).clone()
    return torch.full(shape, float(value), dtype=torch.float64)


@dataclass(frozen=True)
class _NormErrors:
    """The kernel's row statistics as errors: δμ, the relative error of r, and δx̂ per element."""

    norm: NormRows
    mean_error: Split  # δμ, keepdim (0 for rms_norm)
    rstd_error: Split  # |δr| / r, keepdim
    x_hat_error: Split  # |δx̂_j|


def _norm_errors(norm: NormRows, eps: float) -> _NormErrors:
    """δμ = δμ_acc + u·mean|x| + δμ_cv, δμ_acc the sum's accumulation (F·mean|x|, or DrawnSum's walk: RowSums).
    The second moment, relative: F + u (its division) + ρ_cv for rms_norm; for layer_norm F + 3u (the deviations
    squared and the division) + ρ_cv + 2·δμ·mean|x - μ|/σ² (a kernel that subtracts an approximate mean as it
    goes, Welford's, drops the first-order cancellation of δμ). δμ_cv and ρ_cv: the rows' common-value errors
    (row_sums). r = (σ² + eps)^-½:
    half of it times σ²/(σ² + eps), plus RSQRT_ROUNDINGS·u. δx̂_j = r·δμ + |x̂_j|·(δr/r + 2u)."""
    variance_plus_eps = norm.second_moment + eps
    damping = norm.second_moment / variance_plus_eps
    if norm.centered:
        abs_mean = norm.x.abs().mean(dim=-1, keepdim=True)
        mean_error = Split(0.0, abs_mean, mean_cv=1.0, mean_acc=1.0)
        per_mean_error = 2 * norm.deviations.abs().mean(dim=-1, keepdim=True) / variance_plus_eps
        drift = abs_mean * per_mean_error
        relative_moment = Split(damping, 3 * damping + drift, mean_cv=per_mean_error, moment_cv=damping,
                                mean_acc=per_mean_error)
    else:
        mean_error = Split(0.0, 0.0)
        relative_moment = Split(damping, damping, moment_cv=damping)
    rstd_error = relative_moment * 0.5 + Split(0.0, float(RSQRT_ROUNDINGS))
    x_hat_abs = norm.x_hat.abs()
    x_hat_error = mean_error * norm.rstd + (rstd_error + Split(0.0, float(X_HAT_ROUNDINGS))) * x_hat_abs
    return _NormErrors(norm, mean_error, rstd_error, x_hat_error)


def _norm_inputs(problem: Problem, inputs64: Mapping[str, torch.Tensor], centered: bool):
    params = problem.params
    norm = norm_float64(norm_rows(inputs64["x"], params), params.eps, centered)
    weight = inputs64["weight"].reshape(-1) if "weight" in inputs64 else None
    return params, norm, weight


def norm_forward_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor], centered: bool) -> SumOfBounds:
    """layer_norm's and rms_norm's forward: rows_forward_bound over the normalised dims."""
    params, norm, weight = _norm_inputs(problem, inputs64, centered)
    bias = inputs64["bias"].reshape(-1) if "bias" in inputs64 else None
    return rows_forward_bound(problem, norm, weight, bias, params.shape)


def rows_forward_bound(problem: Problem, norm: NormRows, weight: torch.Tensor | None, bias: torch.Tensor | None,
                       logical: tuple[int, ...]) -> SumOfBounds:
    """y_j = x̂_j·w_j + b_j:  |δy_j| <= |w_j|·δx̂_j + u·(|x̂_j w_j| + |y_j|)  (the multiply, the add), for one
    normalisation per row of `norm`, weight and bias broadcast against its rows; the rows reshaped to `logical`."""
    errors = _norm_errors(norm, problem.params.eps)
    w_abs = weight.abs() if weight is not None else 1.0
    y = norm.x_hat * (weight if weight is not None else 1.0)
    if bias is not None:
        y = y + bias
    total = errors.x_hat_error * w_abs + Split(0.0, (norm.x_hat * w_abs).abs() + y.abs())
    shape = norm.x.shape
    common = row_sums(problem, norm)
    return SumOfBounds((*total.terms(shape[-1], problem.dtype, "x̂·w + b", shape, logical, common),
                        OutputRounding(problem.out_dtype)))


@dataclass(frozen=True, eq=False)
class ChannelsFirst:
    """A bound built on batch_norm's rows, channels first (C, N, spatial...), evaluated on the (N, C, ...) reference."""

    bound: ErrorBound

    def evaluate(self, model: BoundModel, ref: torch.Tensor) -> torch.Tensor:
        return self.bound.evaluate(model, ref.movedim(1, 0)).movedim(0, 1)


def channel_norm_bound(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> ErrorBound:
    """group_norm's and batch_norm's forward: rows_forward_bound over their rows (channel_norm_rows)."""
    params = problem.params
    norm = norm_float64(channel_norm_rows(inputs64["x"], params), params.eps, centered=True)
    weight, bias = (channel_values_by_row(inputs64[name], params) if name in inputs64 else None
                    for name in PER_FEATURE_INPUTS)
    if params.groups is not None:
        return rows_forward_bound(problem, norm, weight, bias, params.shape)
    channels_first = (params.channels, params.shape[0], *params.shape[2:])
    return ChannelsFirst(rows_forward_bound(problem, norm, weight, bias, channels_first))


@dataclass(frozen=True)
class PerFeature:
    """How a backward's per-feature gradients (grad_weight, grad_bias) sum the elements of the rows: layer_norm's
    over the rows at each position of the normalised shape; group_norm's and batch_norm's over each channel."""

    to_feature: Callable[[torch.Tensor], torch.Tensor]  # a tensor of the rows' shape -> its sums, per feature
    count: int  # elements summed into each feature
    shape: tuple[int, ...]  # the per-feature outputs' shape


def norm_backward_bounds(problem: Problem, inputs64: Mapping[str, torch.Tensor], centered: bool) -> dict[str, SumOfBounds]:
    """layer_norm's and rms_norm's backward: rows_backward_bounds over the normalised dims."""
    params, norm, weight = _norm_inputs(problem, inputs64, centered)
    n = params.row_length
    per_feature = PerFeature(lambda t: t.reshape(-1, n).sum(dim=0).reshape(params.normalized_shape), params.rows,
                             params.normalized_shape)
    return rows_backward_bounds(problem, norm, norm_rows(inputs64["grad_y"], params), weight, params.shape, per_feature)


def channel_norm_backward_bounds(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, ErrorBound]:
    """group_norm's and batch_norm's backward: rows_backward_bounds over their rows (channel_norm_rows), the
    per-channel gradients summed over each channel's elements; batch_norm's grad_x channels first (ChannelsFirst)."""
    params = problem.params
    norm = norm_float64(channel_norm_rows(inputs64["x"], params), params.eps, centered=True)
    weight = channel_values_by_row(inputs64["weight"], params) if "weight" in inputs64 else None
    other_dims = tuple(d for d in range(len(params.shape)) if d != 1)
    per_feature = PerFeature(lambda t: from_channel_norm_rows(t, params).sum(dim=other_dims),
                             math.prod(params.shape) // params.channels, (params.channels,))
    grad_rows = channel_norm_rows(inputs64["grad_y"], params)
    if params.groups is not None:
        return rows_backward_bounds(problem, norm, grad_rows, weight, params.shape, per_feature)
    channels_first = (params.channels, params.shape[0], *params.shape[2:])
    bounds: dict[str, ErrorBound] = dict(rows_backward_bounds(problem, norm, grad_rows, weight, channels_first, per_feature))
    bounds["grad_x"] = ChannelsFirst(bounds["grad_x"])
    return bounds


def rows_backward_bounds(problem: Problem, norm: NormRows, grad_rows: torch.Tensor, weight: torch.Tensor | None,
                         logical: tuple[int, ...], per_feature: PerFeature) -> dict[str, SumOfBounds]:
    """One normalisation per row of `norm`, the weight broadcast against its rows (None: no affine):
    dx_j = r·(h_j - a - x̂_j·c), h = w·g, a = mean(h) (0 for rms_norm), c = mean(h·x̂):
        |δdx_j| <= (δr/r)·|dx_j| + r·|c|·δx̂_j + r·|x̂_j|·mean(|h| δx̂)          (the statistics)
                 + r·F·(mean|h| + |x̂_j|·mean|h x̂|)                              (the reductions a, c)
                 + r·u·(3|h_j| + mean|h| + 3|a| + |x̂_j|·mean|h x̂| + 4|x̂_j c|) + 2u·|dx_j|  (the roundings)
    grad_x's rows reshaped to `logical`. Per feature (per_feature: the sum over its R elements), dw = Σ g·x̂:
    F(R)·Σ|g x̂| + Σ|g|·δx̂ + u·Σ|g x̂|;  db = Σ g:  F(R)·Σ|g| (layer_norm, group_norm, batch_norm)."""
    dtype, n = problem.dtype, norm.x.shape[-1]
    grads = norm_backward_float64(norm, grad_rows, weight)
    errors = _norm_errors(norm, problem.params.eps)
    r, x_hat_abs, shape = norm.rstd, norm.x_hat.abs(), grad_rows.shape
    h_abs = grads.h.abs()
    mean_h, mean_hx = h_abs.mean(-1, keepdim=True), (h_abs * x_hat_abs).mean(-1, keepdim=True)
    c_abs, a_abs, grad_x_abs = grads.c.abs(), grads.a.abs(), grads.grad_x.abs()
    statistics = (errors.rstd_error * grad_x_abs + errors.x_hat_error * (r * c_abs)
                  + (errors.x_hat_error * h_abs).mean() * (r * x_hat_abs))
    reductions = Split(r * (mean_h + x_hat_abs * mean_hx), 0.0)
    roundings = Split(0.0, r * (3 * h_abs + mean_h + 3 * a_abs + x_hat_abs * mean_hx + 4 * x_hat_abs * c_abs)
                      + 2 * grad_x_abs)
    grad_x = statistics + reductions + roundings
    common = row_sums(problem, norm)
    bounds = {"grad_x": SumOfBounds((*grad_x.terms(n, dtype, "dx", shape, logical, common),
                                     OutputRounding(problem.outputs["grad_x"].dtype)))}
    if weight is None:
        return bounds
    to_feature, feature_shape = per_feature.to_feature, per_feature.shape
    g_abs = grad_rows.abs()
    gx = to_feature(g_abs * x_hat_abs)
    through_x_hat = Split(*(to_feature(_full(part, shape) * g_abs) for part in (errors.x_hat_error.f, errors.x_hat_error.u)))
    per_row_errors = tuple(
        FeatureSummed(per_row, _full(magnitude, shape) * g_abs, to_feature, f"x̂: {what}")
        for magnitude, per_row, what in ((errors.x_hat_error.mean_acc, common.mean_accumulation, "the mean's sum"),
                                         (errors.x_hat_error.mean_cv, common.mean_error, "the mean's common value"),
                                         (errors.x_hat_error.moment_cv, common.moment_error,
                                          "the second moment's common value"))
        if isinstance(magnitude, torch.Tensor) or magnitude)
    bounds["grad_weight"] = SumOfBounds((
        ScaledMagnitude(ProductSumCoefficient(per_feature.count, dtype), gx, "Σ g·x̂"),
        *((through_x_hat + Split(0.0, gx)).terms(n, dtype, "x̂, g·x̂", gx.shape, feature_shape, common)),
        *per_row_errors,
        OutputRounding(problem.outputs["grad_weight"].dtype),
    ))
    if norm.centered:
        bounds["grad_bias"] = SumOfBounds((
            ScaledMagnitude(ProductSumCoefficient(per_feature.count, dtype), to_feature(g_abs), "Σ g"),
            OutputRounding(problem.outputs["grad_bias"].dtype),
        ))
    return bounds
