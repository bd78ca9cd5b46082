"""The normalisations in float64, by their numerically stable formulas: the reference, and the exact
intermediate values (row max, row sums, mean, variance, 1/σ) that the bounds are built from.

Rows: softmax's axis moved last; a norm's normalised dims flattened into the last dim; group_norm's groups and
batch_norm's channels, each with what it normalises over as the last dim.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from e2egen.runner.ops.normalization.params import OFFSET_SPREAD, ChannelNormParams, NormParams, SoftmaxParams

if TYPE_CHECKING:
    import torch


# -- rows ---------------------------------------------------------------------------------
def softmax_rows(tensor: torch.Tensor, params: SoftmaxParams) -> torch.Tensor:
    return tensor.movedim(params.axis, -1)


def from_softmax_rows(rows: torch.Tensor, params: SoftmaxParams) -> torch.Tensor:
    return rows.movedim(-1, params.axis)


def norm_rows(tensor: torch.Tensor, params: NormParams) -> torch.Tensor:
    return tensor.reshape(*params.shape[:len(params.shape) - params.normalized_dims], params.row_length)


def channel_norm_rows(tensor: torch.Tensor, params: ChannelNormParams) -> torch.Tensor:
    """group_norm: (N, G, C/G · spatial), a view; batch_norm: (C, N · spatial), channels first (a copy)."""
    if params.groups is not None:
        return tensor.reshape(params.shape[0], params.groups, params.row_length)
    return tensor.movedim(1, 0).reshape(params.channels, params.row_length)


def from_channel_norm_rows(rows: torch.Tensor, params: ChannelNormParams) -> torch.Tensor:
    if params.groups is not None:
        return rows.reshape(params.shape)
    return rows.reshape(params.channels, params.shape[0], *params.shape[2:]).movedim(0, 1)


def channel_values_by_row(values: torch.Tensor, params: ChannelNormParams) -> torch.Tensor:
    """A per-channel tensor (weight, bias) laid out to broadcast against channel_norm_rows' rows."""
    if params.groups is None:
        return values.reshape(params.channels, 1)
    per_group = params.channels // params.groups
    return (values.reshape(params.groups, per_group, 1).expand(params.groups, per_group, params.spatial)
            .reshape(params.groups, params.row_length))


def add_row_offsets(rows: torch.Tensor, offset: float) -> None:
    """rows += offset · (1 + OFFSET_SPREAD · t_i), in place, t_i in [-1, 1] from the row's first drawn value."""
    if not offset:
        return
    first = rows[..., :1]
    spread = first / max(first.abs().max().item(), 1e-300)
    rows.add_(spread.mul(OFFSET_SPREAD).add_(1.0).mul_(offset))


# -- softmax --------------------------------------------------------------------------------
@dataclass(frozen=True)
class SoftmaxRows:
    """One softmax per row (last dim): y = exp(x - m) / l, z = x - m - log l."""

    x: torch.Tensor
    row_max: torch.Tensor  # m, keepdim
    row_sum: torch.Tensor  # l = Σ exp(x - m) >= 1, keepdim
    y: torch.Tensor

    @property
    def log_sum(self) -> torch.Tensor:
        return self.row_sum.log()

    @property
    def z(self) -> torch.Tensor:
        return self.x - self.row_max - self.log_sum


def softmax_float64(x_rows: torch.Tensor) -> SoftmaxRows:
    row_max = x_rows.amax(dim=-1, keepdim=True)
    weights = (x_rows - row_max).exp_()
    row_sum = weights.sum(dim=-1, keepdim=True)
    return SoftmaxRows(x_rows, row_max, row_sum, weights.div_(row_sum))


def softmax_backward_float64(grad_rows: torch.Tensor, y_rows: torch.Tensor) -> torch.Tensor:
    """dx = y · (g - Σ_k g_k y_k)."""
    return (grad_rows - (grad_rows * y_rows).sum(dim=-1, keepdim=True)).mul_(y_rows)


def log_softmax_backward_float64(grad_rows: torch.Tensor, z_rows: torch.Tensor) -> torch.Tensor:
    """dx = g - exp(z) · Σ_k g_k."""
    return grad_rows - z_rows.exp() * grad_rows.sum(dim=-1, keepdim=True)


# -- layer_norm, rms_norm -------------------------------------------------------------------------
@dataclass(frozen=True)
class NormRows:
    """One normalisation per row: x̂ = (x - μ)·r (μ = 0 for rms_norm), r = 1/sqrt(σ² + eps), where σ² is the
    variance (layer_norm, biased: divided by n) or the mean square (rms_norm)."""

    x: torch.Tensor
    mean: torch.Tensor  # μ, keepdim (zeros for rms_norm)
    second_moment: torch.Tensor  # σ² (layer_norm) or mean(x²) (rms_norm), keepdim
    rstd: torch.Tensor  # r, keepdim
    centered: bool

    @cached_property  # a bound reads these several times: computed once per case
    def deviations(self) -> torch.Tensor:
        return self.x - self.mean if self.centered else self.x

    @cached_property
    def x_hat(self) -> torch.Tensor:
        return self.deviations * self.rstd


def norm_float64(x_rows: torch.Tensor, eps: float, centered: bool) -> NormRows:
    mean = x_rows.mean(dim=-1, keepdim=True) if centered else x_rows.new_zeros((*x_rows.shape[:-1], 1))
    second = (x_rows - mean).square_().mean(dim=-1, keepdim=True)  # two passes: no cancellation
    return NormRows(x_rows, mean, second, second.add(eps).rsqrt_(), centered)


@dataclass(frozen=True)
class NormGradients:
    """The backward pass of one normalisation per row, with h = w·g, a = mean(h) (0 for rms_norm),
    c = mean(h·x̂):  dx = r·(h - a - x̂·c),  dw = Σ_rows g·x̂,  db = Σ_rows g."""

    h: torch.Tensor
    a: torch.Tensor  # keepdim
    c: torch.Tensor  # keepdim
    grad_x: torch.Tensor  # rows
    grad_weight: torch.Tensor  # (row_length,)
    grad_bias: torch.Tensor  # (row_length,)


def norm_backward_float64(norm: NormRows, grad_rows: torch.Tensor, weight: torch.Tensor | None) -> NormGradients:
    x_hat = norm.x_hat
    h = grad_rows if weight is None else grad_rows * weight
    a = h.mean(dim=-1, keepdim=True) if norm.centered else h.new_zeros((*h.shape[:-1], 1))
    c = (h * x_hat).mean(dim=-1, keepdim=True)
    grad_x = (h - a - x_hat * c).mul_(norm.rstd)
    flat = grad_rows.reshape(-1, grad_rows.shape[-1])
    return NormGradients(h, a, c, grad_x, (flat * x_hat.reshape(flat.shape)).sum(dim=0), flat.sum(dim=0))


def norm_forward_float64(params: NormParams, x: torch.Tensor, weight: torch.Tensor | None,
                         bias: torch.Tensor | None, centered: bool) -> torch.Tensor:
    rows = norm_float64(norm_rows(x, params), params.eps, centered).x_hat
    if weight is not None:
        rows = rows * weight.reshape(-1)
    if bias is not None:
        rows = rows + bias.reshape(-1)
    return rows.reshape(params.shape)
