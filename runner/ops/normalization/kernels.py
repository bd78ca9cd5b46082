"""torch's own normalisation kernels, following the contracts of runner/ops/normalization/spec.py (the default
kernels a case runs when no impl is named). Backward passes go through torch's backward ops on the
case's dtype: softmax's from its output, the norms' through autograd from the input."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


def torch_softmax(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    return torch.softmax(x, dim=dim)


def torch_log_softmax(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    return torch.log_softmax(x, dim=dim)


def torch_softmax_backward(grad_y: torch.Tensor, y: torch.Tensor, *, dim: int) -> torch.Tensor:
    return torch._softmax_backward_data(grad_y, y, dim, y.dtype)


def torch_log_softmax_backward(grad_y: torch.Tensor, y: torch.Tensor, *, dim: int) -> torch.Tensor:
    return torch._log_softmax_backward_data(grad_y, y, dim, y.dtype)


def torch_layer_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *,
                     normalized_shape: tuple[int, ...], eps: float) -> torch.Tensor:
    return F.layer_norm(x, normalized_shape, weight, bias, eps)


def torch_rms_norm(x: torch.Tensor, weight: torch.Tensor | None, *, normalized_shape: tuple[int, ...],
                   eps: float) -> torch.Tensor:
    return F.rms_norm(x, normalized_shape, weight, eps)


def _gradients(forward: Any, grad_y: torch.Tensor, tensors: list[torch.Tensor | None]) -> tuple[torch.Tensor, ...]:
    leaves = [t.detach().requires_grad_() if t is not None else None for t in tensors]
    with torch.enable_grad():
        out = forward(*leaves)
        return torch.autograd.grad(out, [t for t in leaves if t is not None], grad_y)


def torch_layer_norm_backward(grad_y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, *,
                              normalized_shape: tuple[int, ...], eps: float) -> Any:
    """(grad_x, grad_weight, grad_bias), or grad_x alone without a weight."""
    if weight is None:
        (grad_x,) = _gradients(lambda xs: F.layer_norm(xs, normalized_shape, None, None, eps), grad_y, [x])
        return grad_x
    bias = torch.zeros_like(weight)  # its value does not enter the gradients
    return _gradients(lambda xs, w, b: F.layer_norm(xs, normalized_shape, w, b, eps), grad_y, [x, weight, bias])


def torch_rms_norm_backward(grad_y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, *,
                            normalized_shape: tuple[int, ...], eps: float) -> Any:
    """(grad_x, grad_weight), or grad_x alone without a weight."""
    if weight is None:
        (grad_x,) = _gradients(lambda xs: F.rms_norm(xs, normalized_shape, None, eps), grad_y, [x])
        return grad_x
    return _gradients(lambda xs, w: F.rms_norm(xs, normalized_shape, w, eps), grad_y, [x, weight])
