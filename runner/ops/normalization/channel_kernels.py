"""group_norm's and batch_norm's kernels, written against the contract (runner/ops/normalization/spec.py):
f(x, weight, bias, *, groups, eps) -> y and f(x, weight, bias, *, eps) -> y, y in x's format.

Backward: f(grad_y, x, weight, *, groups, eps) and f(grad_y, x, weight, *, eps) -> (grad_x, grad_weight, grad_bias),
grad_x alone without a weight; the default kernels are torch's autograd on f32 copies (torch's own f16/bf16
group_norm backward misses the bound by up to 16x in bf16; `torch_group_norm_backward`, among the wrong ones).

The default kernels are torch's, batch_norm's on f32 copies: torch's own CPU batch_norm for f16 and bf16
(`torch_batch_norm`, kept here) folds the scale and the shift into α = w·r and β = b − μ·α rounded to the
input format, then computes x·α + β, which cancels: up to 132 f16 ulps on [-1, 1] data (e2egen's default verdict
fails it; tests/ops/normalization/test_channel_norms.py). CORRECT kernels take another algorithm, every step
in f32 (two-pass statistics; Welford's; the scale and shift folded in f32); WRONG ones have one bug each.
"""
from __future__ import annotations

import torch

from e2egen.runner.f32_copies import on_f32_copies
from e2egen.runner.ops.normalization.kernels import NormBackward, autograd_gradients, welford


def torch_group_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *, groups: int,
                     eps: float) -> torch.Tensor:
    return torch.nn.functional.group_norm(x, groups, weight, bias, eps)


def torch_batch_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *,
                     eps: float) -> torch.Tensor:
    """torch's own, in x's format (see the module docstring: its f16/bf16 CPU path fails)."""
    return torch.nn.functional.batch_norm(x, None, None, weight, bias, training=True, eps=eps)


f32_batch_norm = on_f32_copies(torch_batch_norm)  # the default (module docstring)


# -- backward: f(grad_y, x, weight, *, groups, eps) / f(grad_y, x, weight, *, eps) -> (grad_x, grad_weight, grad_bias),
# grad_x alone without a weight --------------------------------------------------------------------------------
def torch_group_norm_backward(grad_y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, *, groups: int,
                              eps: float) -> NormBackward:
    """torch's autograd through its group_norm, in x's format."""
    return _autograd(lambda xs, w=None, b=None: torch.nn.functional.group_norm(xs, groups, w, b, eps), grad_y, x, weight)


def torch_batch_norm_backward(grad_y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, *,
                              eps: float) -> NormBackward:
    """torch's autograd through its batch_norm (batch statistics), in x's format."""
    return _autograd(lambda xs, w=None, b=None: torch.nn.functional.batch_norm(xs, None, None, w, b, training=True, eps=eps),
                     grad_y, x, weight)


# the defaults: torch's own f16/bf16 backward reaches 16x e2egen's bound in bf16 (torch_*_backward, among the wrong)
f32_group_norm_backward = on_f32_copies(torch_group_norm_backward)
f32_batch_norm_backward = on_f32_copies(torch_batch_norm_backward)


def _autograd(forward, grad_y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None) -> NormBackward:
    if weight is None:
        (grad_x,) = autograd_gradients(forward, grad_y, [x])
        return grad_x
    return autograd_gradients(forward, grad_y, [x, weight, torch.zeros_like(weight)])  # the bias's value enters no gradient


# -- rows: (rows, n) in f32 and the per-channel values laid out against them. Written from the contract, apart
# from normalization_math's rows on purpose: a mistake shared with the reference would pass unseen ------------
def _rows(x: torch.Tensor, groups: int | None) -> torch.Tensor:
    if groups is not None:
        return x.float().reshape(x.shape[0], groups, -1)
    return x.float().movedim(1, 0).reshape(x.shape[1], -1)


def _back(rows: torch.Tensor, like: torch.Tensor, groups: int | None, dtype: torch.dtype | None = None) -> torch.Tensor:
    if groups is not None:
        return rows.reshape(like.shape).to(dtype or like.dtype)
    return rows.reshape(like.shape[1], like.shape[0], *like.shape[2:]).movedim(0, 1).to(dtype or like.dtype)


def _by_row(values: torch.Tensor | None, like: torch.Tensor, groups: int | None) -> torch.Tensor | float:
    if values is None:
        return 1.0
    channels, spatial = like.shape[1], like[0, 0].numel()
    if groups is None:
        return values.float().reshape(channels, 1)
    per_group = channels // groups
    return values.float().reshape(groups, per_group, 1).expand(groups, per_group, spatial).reshape(groups, -1)


def _normalised(x: torch.Tensor, weight, bias, groups: int | None, mean: torch.Tensor, variance: torch.Tensor,
                eps: float) -> torch.Tensor:
    rows = _rows(x, groups)
    y = (rows - mean) * torch.rsqrt(variance + eps) * _by_row(weight, x, groups)
    if bias is not None:
        y = y + _by_row(bias, x, groups)
    return _back(y, x, groups)


def _two_pass(x: torch.Tensor, groups: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    rows = _rows(x, groups)
    mean = rows.mean(dim=-1, keepdim=True)
    return mean, (rows - mean).square().mean(dim=-1, keepdim=True)


# -- correct ------------------------------------------------------------------------------------------------
def group_norm_two_pass(x, weight, bias, *, groups: int, eps: float) -> torch.Tensor:
    return _normalised(x, weight, bias, groups, *_two_pass(x, groups), eps)


def group_norm_welford(x, weight, bias, *, groups: int, eps: float) -> torch.Tensor:
    return _normalised(x, weight, bias, groups, *welford(_rows(x, groups)), eps)


def batch_norm_two_pass(x, weight, bias, *, eps: float) -> torch.Tensor:
    return _normalised(x, weight, bias, None, *_two_pass(x, None), eps)


def batch_norm_folded_f32(x, weight, bias, *, eps: float) -> torch.Tensor:
    """α = w·r and β = b − μ·α in f32 (torch's CPU fold, without its rounding of α and β), then x·α + β."""
    mean, variance = _two_pass(x, None)
    alpha = _by_row(weight, x, None) * torch.rsqrt(variance + eps)
    beta = (_by_row(bias, x, None) if bias is not None else 0.0) - mean * alpha
    return _back(_rows(x, None) * alpha + beta, x, None)


CORRECT = {"group_norm": ("group_norm_two_pass", "group_norm_welford"),
           "batch_norm": ("batch_norm_two_pass", "batch_norm_folded_f32")}


# -- backward, from the contract in f32: dx = r·(h - mean(h) - x̂·mean(h·x̂)), h = w·g; dw = Σ g·x̂, db = Σ g per channel
def _backward(grad_y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, groups: int | None,
              mean: torch.Tensor, variance: torch.Tensor, eps: float, *, centre_h: bool = True) -> NormBackward:
    rows, g = _rows(x, groups), _rows(grad_y, groups)
    rstd = torch.rsqrt(variance + eps)
    x_hat = (rows - mean) * rstd
    h = g * _by_row(weight, x, groups)
    centred = h - h.mean(dim=-1, keepdim=True) if centre_h else h
    grad_x = _back(rstd * (centred - x_hat * (h * x_hat).mean(dim=-1, keepdim=True)), x, groups)
    if weight is None:
        return grad_x
    other_dims = tuple(d for d in range(x.dim()) if d != 1)
    grad_y32 = grad_y.float()
    grad_weight = (grad_y32 * _back(x_hat, x, groups, torch.float32)).sum(dim=other_dims)
    return grad_x, grad_weight.to(x.dtype), grad_y32.sum(dim=other_dims).to(x.dtype)


def group_norm_backward_two_pass(grad_y, x, weight, *, groups: int, eps: float) -> NormBackward:
    return _backward(grad_y, x, weight, groups, *_two_pass(x, groups), eps)


def group_norm_backward_welford(grad_y, x, weight, *, groups: int, eps: float) -> NormBackward:
    return _backward(grad_y, x, weight, groups, *welford(_rows(x, groups)), eps)


def batch_norm_backward_two_pass(grad_y, x, weight, *, eps: float) -> NormBackward:
    return _backward(grad_y, x, weight, None, *_two_pass(x, None), eps)


def batch_norm_backward_welford(grad_y, x, weight, *, eps: float) -> NormBackward:
    return _backward(grad_y, x, weight, None, *welford(_rows(x, None)), eps)


CORRECT_BACKWARD = {"group_norm": ("group_norm_backward_two_pass", "group_norm_backward_welford"),
                    "batch_norm": ("batch_norm_backward_two_pass", "batch_norm_backward_welford")}


# -- wrong ---------------------------------------------------------------------------------------------------
def group_norm_interleaved(x, weight, bias, *, groups: int, eps: float) -> torch.Tensor:
    """Channel c in group c mod G (strided groups) where the contract has blocks of C/G channels."""
    order = torch.arange(x.shape[1]).reshape(-1, groups).t().reshape(-1)  # blocks become strided
    inverse = torch.argsort(order)
    y = group_norm_two_pass(x[:, order], None, None, groups=groups, eps=eps)[:, inverse].float()
    if weight is not None:
        y = y * weight.float().reshape(1, -1, *([1] * (x.dim() - 2)))
    if bias is not None:
        y = y + bias.float().reshape(1, -1, *([1] * (x.dim() - 2)))
    return y.to(x.dtype)


def group_norm_no_eps(x, weight, bias, *, groups: int, eps: float) -> torch.Tensor:
    return _normalised(x, weight, bias, groups, *_two_pass(x, groups), 0.0)


def group_norm_unbiased(x, weight, bias, *, groups: int, eps: float) -> torch.Tensor:
    """The variance divided by n - 1."""
    mean, variance = _two_pass(x, groups)
    n = _rows(x, groups).shape[-1]
    return _normalised(x, weight, bias, groups, mean, variance * n / max(n - 1, 1), eps)


def batch_norm_per_sample(x, weight, bias, *, eps: float) -> torch.Tensor:
    """Statistics per sample and channel (instance norm) where batch_norm's are over the batch."""
    rows = x.float().reshape(x.shape[0], x.shape[1], -1)
    mean = rows.mean(dim=-1, keepdim=True)
    y = (rows - mean) * torch.rsqrt((rows - mean).square().mean(dim=-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.float().reshape(1, -1, 1)
    if bias is not None:
        y = y + bias.float().reshape(1, -1, 1)
    return y.reshape(x.shape).to(x.dtype)


def batch_norm_eps_outside(x, weight, bias, *, eps: float) -> torch.Tensor:
    """1/(σ + eps) where the contract has 1/sqrt(σ² + eps)."""
    mean, variance = _two_pass(x, None)
    return _normalised(x, weight, bias, None, mean, (variance.sqrt() + eps).square() - eps, eps)


WRONG = {"group_norm": ("group_norm_interleaved", "group_norm_no_eps", "group_norm_unbiased"),
         "batch_norm": ("torch_batch_norm", "batch_norm_per_sample", "batch_norm_eps_outside")}


def group_norm_backward_no_mean_term(grad_y, x, weight, *, groups: int, eps: float) -> NormBackward:
    """dx without the mean(h) term (rms_norm's formula where the mean was subtracted)."""
    return _backward(grad_y, x, weight, groups, *_two_pass(x, groups), eps, centre_h=False)


def group_norm_backward_no_eps(grad_y, x, weight, *, groups: int, eps: float) -> NormBackward:
    return _backward(grad_y, x, weight, groups, *_two_pass(x, groups), 0.0)


def batch_norm_backward_unbiased(grad_y, x, weight, *, eps: float) -> NormBackward:
    """The variance divided by n - 1 (as the running variance is) where the batch's statistics use n."""
    mean, variance = _two_pass(x, None)
    n = _rows(x, None).shape[-1]
    return _backward(grad_y, x, weight, None, mean, variance * n / max(n - 1, 1), eps)


def batch_norm_backward_per_sample(grad_y, x, weight, *, eps: float) -> NormBackward:
    """Statistics per sample and channel (instance norm's) where batch_norm's are over the batch."""
    rows = x.float().reshape(x.shape[0], x.shape[1], -1)
    g = grad_y.float().reshape(rows.shape)
    mean = rows.mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt((rows - mean).square().mean(dim=-1, keepdim=True) + eps)
    x_hat = (rows - mean) * rstd
    h = g if weight is None else g * weight.float().reshape(1, -1, 1)
    grad_x = rstd * (h - h.mean(dim=-1, keepdim=True) - x_hat * (h * x_hat).mean(dim=-1, keepdim=True))
    grad_x = grad_x.reshape(x.shape).to(x.dtype)
    if weight is None:
        return grad_x
    return grad_x, (g * x_hat).sum(dim=(0, 2)).to(x.dtype), g.sum(dim=(0, 2)).to(x.dtype)


WRONG_BACKWARD = {"group_norm": ("torch_group_norm_backward", "group_norm_backward_no_mean_term",
                                 "group_norm_backward_no_eps"),
                  "batch_norm": ("torch_batch_norm_backward", "batch_norm_backward_unbiased", "batch_norm_backward_per_sample")}
