"""The normalisations' kernels, following the contracts of runner/ops/normalization/spec.py: torch's own (the
default kernels a case runs when no impl is named), and the alternates and planted bugs that the tests
(tests/ops/normalization/) and the studies (studies/elementwise_evidence.py) name as impls
"e2egen.runner.ops.normalization.kernels:<name>".

torch's: backward passes go through torch's backward ops on the case's dtype: softmax's from its output, the
norms' through autograd from the input.

CORRECT (other algorithms, every step in f32, each torch f32 operation rounding once): sequential, blocked
and online softmax, exp2 of an fma, a sequential logsumexp; Welford or two-pass variance, rsqrt or 1/sqrt; backward passes in f32.
WRONG (one bug each, the bugs kernel teams make): no max subtraction (softmax, logsumexp), a sum in the input format, m + log l
stored, softmax backward with the wrong sign or without its Σ term, a biased/unbiased variance mix-up,
reductions in f16, eps outside the sqrt or left out, E[x²] - mean² on large means, a loop leaving each row's
last element out of its sums.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F

from e2egen.runner.f32_copies import on_f32_copies

F32 = torch.float32
NormBackward = torch.Tensor | tuple[torch.Tensor, ...]  # grad_x alone, or with grad_weight (and grad_bias)


# -- torch's own ---------------------------------------------------------------------------------
def torch_logsumexp(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    return torch.logsumexp(x, dim=dim)


def torch_logsumexp_backward(grad_y: torch.Tensor, x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """torch's autograd through its logsumexp, in x's format: grad_y · exp(x - y), every step in the input format."""
    (grad_x,) = autograd_gradients(lambda xs: torch.logsumexp(xs, dim=dim), grad_y, [x])
    return grad_x


# the default: torch's own f16/bf16 backward rounds x - y, exp of it and the product to the input format
# (torch_logsumexp_backward, among the wrong kernels)
f32_logsumexp_backward = on_f32_copies(torch_logsumexp_backward)


def logsumexp_backward_softmax(grad_y: torch.Tensor, x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """CORRECT: grad_y · softmax(x) in f32 (the max subtracted, exp, the row sum, a division)."""
    return (grad_y.float().unsqueeze(dim) * torch.softmax(x.float(), dim=dim)).to(x.dtype)


def logsumexp_backward_two_pass(grad_y: torch.Tensor, x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """CORRECT: y = m + log Σ exp(x - m) in f32 first, then grad_y · exp(x - y)."""
    x32 = x.float()
    m = x32.amax(dim=dim, keepdim=True)
    y = m + torch.log(torch.exp(x32 - m).sum(dim=dim, keepdim=True))
    return (grad_y.float().unsqueeze(dim) * torch.exp(x32 - y)).to(x.dtype)


def logsumexp_backward_no_max(grad_y: torch.Tensor, x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """WRONG: exp(x) / Σ exp(x) without the max: inf / inf = NaN for x > 88.7."""
    e = torch.exp(x.float())
    return (grad_y.float().unsqueeze(dim) * e / e.sum(dim=dim, keepdim=True)).to(x.dtype)


def logsumexp_backward_sum_in_input_format(grad_y: torch.Tensor, x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """WRONG: the row sum of exp(x - m) kept in the input format, term by term."""
    x32 = x.float()
    e = torch.exp(x32 - x32.amax(dim=dim, keepdim=True))
    total = torch.zeros_like(e.select(dim, 0), dtype=x.dtype)
    for k in range(e.shape[dim]):
        total = total + e.select(dim, k).to(x.dtype)
    return (grad_y.float().unsqueeze(dim) * e / total.float().unsqueeze(dim)).to(x.dtype)


def logsumexp_backward_not_broadcast(grad_y: torch.Tensor, x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """WRONG: grad_y taken along the wrong dim (its values read in the other order of the row's remaining dims)."""
    flipped = grad_y.float().flip(-1) if grad_y.dim() else grad_y.float()
    return (flipped.unsqueeze(dim) * torch.softmax(x.float(), dim=dim)).to(x.dtype)


LOGSUMEXP_CORRECT_BACKWARD = ("logsumexp_backward_softmax", "logsumexp_backward_two_pass")
LOGSUMEXP_WRONG_BACKWARD = ("torch_logsumexp_backward", "logsumexp_backward_no_max", "logsumexp_backward_sum_in_input_format",
                            "logsumexp_backward_not_broadcast")


def logsumexp_sequential(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """m + log of the weights' sequential f32 sum: a correct kernel of another order than torch's."""
    rows = _rows(x, dim)
    m = rows.amax(-1, keepdim=True)
    return (m + torch.log(sequential_sum(torch.exp(rows - m)))).squeeze(-1).to(x.dtype)


def logsumexp_no_max(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """log Σ exp(x) in f32 without the max subtracted: exp overflows for x > 88.7."""
    return torch.log(torch.exp(x.float()).sum(dim=dim)).to(x.dtype)


def logsumexp_sum_in_input_format(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """m + log Σ exp(x - m) with the row sum a running sum in the input format (f16, bf16; f32 for f32)."""
    m = x.amax(dim=dim, keepdim=True)
    weights = torch.exp((x - m).float()).to(x.dtype)
    total = sequential_sum(weights.movedim(dim, -1)).squeeze(-1)
    return (m.squeeze(dim).float() + torch.log(total.float())).to(x.dtype)


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


def autograd_gradients(forward: Callable[..., torch.Tensor], grad_y: torch.Tensor, tensors: list[torch.Tensor | None]) -> tuple[torch.Tensor, ...]:
    leaves = [t.detach().requires_grad_() if t is not None else None for t in tensors]
    with torch.enable_grad():
        out = forward(*leaves)
        return torch.autograd.grad(out, [t for t in leaves if t is not None], grad_y)


def torch_layer_norm_backward(grad_y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, *,
                              normalized_shape: tuple[int, ...], eps: float) -> NormBackward:
    """(grad_x, grad_weight, grad_bias), or grad_x alone without a weight."""
    if weight is None:
        (grad_x,) = autograd_gradients(lambda xs: F.layer_norm(xs, normalized_shape, None, None, eps), grad_y, [x])
        return grad_x
    bias = torch.zeros_like(weight)  # its value does not enter the gradients
    return autograd_gradients(lambda xs, w, b: F.layer_norm(xs, normalized_shape, w, b, eps), grad_y, [x, weight, bias])


def torch_rms_norm_backward(grad_y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, *,
                            normalized_shape: tuple[int, ...], eps: float) -> NormBackward:
    """(grad_x, grad_weight), or grad_x alone without a weight."""
    if weight is None:
        (grad_x,) = autograd_gradients(lambda xs: F.rms_norm(xs, normalized_shape, None, eps), grad_y, [x])
        return grad_x
    return autograd_gradients(lambda xs, w: F.rms_norm(xs, normalized_shape, w, eps), grad_y, [x, weight])


# -- reductions in f32 in several orders ------------------------------------------------------
def sequential_sum(rows: torch.Tensor, reverse: bool = False) -> torch.Tensor:
    """Σ over the last dim, one f32 rounding per addition, first to last (or last to first)."""
    order = range(rows.shape[-1] - 1, -1, -1) if reverse else range(rows.shape[-1])
    total = torch.zeros(rows.shape[:-1], dtype=rows.dtype)
    for k in order:
        total = total + rows[..., k]
    return total.unsqueeze(-1)


def blocked_sum(rows: torch.Tensor, block: int = 64) -> torch.Tensor:
    """Partial sums of `block` elements (torch's own order inside), added last block first."""
    parts = [rows[..., i:i + block].sum(-1, keepdim=True) for i in range(0, rows.shape[-1], block)]
    total = parts[-1]
    for part in reversed(parts[:-1]):
        total = total + part
    return total


def _rows(t: torch.Tensor, dim: int) -> torch.Tensor:
    return t.movedim(dim, -1).to(F32)


def _back(rows: torch.Tensor, like: torch.Tensor, dim: int) -> torch.Tensor:
    return rows.to(like.dtype).movedim(-1, dim)


# -- correct softmax kernels -------------------------------------------------------------------
def softmax_sequential(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    rows = _rows(x, dim)
    e = torch.exp(rows - rows.amax(-1, keepdim=True))
    return _back(e / sequential_sum(e), x, dim)


def _online_stats(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Running max and sum, one element at a time, the sum rescaled whenever the max grows."""
    m = torch.full(rows.shape[:-1], -math.inf, dtype=F32)
    total = torch.zeros(rows.shape[:-1], dtype=F32)
    for k in range(rows.shape[-1]):
        new_m = torch.maximum(m, rows[..., k])
        total = total * torch.exp(m - new_m) + torch.exp(rows[..., k] - new_m)
        m = new_m
    return m.unsqueeze(-1), total.unsqueeze(-1)


def softmax_online(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    rows = _rows(x, dim)
    m, total = _online_stats(rows)
    return _back(torch.exp(rows - m) * (1 / total), x, dim)


def softmax_blocked_exp2(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """exp2 of an fma with log2 e, blocked row sum, weights rounded to the output format before the division."""
    rows = _rows(x, dim)
    log2e = torch.tensor(math.log2(math.e), dtype=F32)
    e = torch.exp2(torch.addcmul(-(rows.amax(-1, keepdim=True) * log2e), rows, log2e))
    stored = e.to(x.dtype).to(F32)
    return _back(stored / blocked_sum(stored), x, dim)


def log_softmax_online(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    rows = _rows(x, dim)
    m, total = _online_stats(rows)
    return _back(rows - (m + torch.log(total)), x, dim)


def log_softmax_stored_like_torch_cpu(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """torch's CPU f16/bf16 log_softmax over the last dim, bit for bit (torch 2.13; 829,440 outputs of rows
    of 64 to 4096 checked): the row sum of exp(x - m) in f32, stored in the input format, its log stored in
    the input format too, then x - m - L in f32 rounded to the output."""
    rows = _rows(x, dim)
    m = rows.amax(-1, keepdim=True)
    row_sum = torch.exp(rows - m).sum(-1, keepdim=True).to(x.dtype).to(F32)
    log_sum = torch.log(row_sum).to(x.dtype).to(F32)
    return _back(rows - m - log_sum, x, dim)


def softmax_backward_sequential(grad_y: torch.Tensor, y: torch.Tensor, *, dim: int) -> torch.Tensor:
    g, p = _rows(grad_y, dim), _rows(y, dim)
    dot = sequential_sum(g * p, reverse=True)
    return _back(p * g - p * dot, y, dim)


def log_softmax_backward_blocked(grad_y: torch.Tensor, y: torch.Tensor, *, dim: int) -> torch.Tensor:
    g, z = _rows(grad_y, dim), _rows(y, dim)
    return _back(g - torch.exp(z) * blocked_sum(g), y, dim)


# -- wrong softmax kernels ------------------------------------------------------------------------
def softmax_no_max(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """softmax without subtracting the row's max: overflows on large rows."""
    e = torch.exp(_rows(x, dim))
    return _back(e / e.sum(-1, keepdim=True), x, dim)


def softmax_in_input_format(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """Every step in the input format (x - m, exp, the row sum, the division each rounded to f16 or bf16), as JAX's
    softmax computes for f16 and bf16 on the CPU: the compute-format probe names it."""
    m = x.amax(dim=dim, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=dim, keepdim=True)


def log_softmax_no_max(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    rows = _rows(x, dim)
    return _back(rows - torch.log(torch.exp(rows).sum(-1, keepdim=True)), x, dim)


def log_softmax_sum_in_input_format(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """The row sum accumulated in the input format, one rounding per addition: it stalls once the sum's
    ulp outgrows the weights."""
    rows = _rows(x, dim)
    m = rows.amax(-1, keepdim=True)
    weights = torch.exp(rows - m).to(x.dtype)
    total = torch.zeros_like(weights[..., :1])
    for k in range(weights.shape[-1]):
        total = total + weights[..., k:k + 1]
    return _back(rows - m - torch.log(total.to(F32)), x, dim)


def log_softmax_stores_m_plus_log_l(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """m + log l stored in the input format, then x minus it: the offset's digits go."""
    rows = _rows(x, dim)
    m = rows.amax(-1, keepdim=True)
    shift = (m + torch.log(torch.exp(rows - m).sum(-1, keepdim=True))).to(x.dtype).to(F32)
    return _back(rows - shift, x, dim)


def softmax_backward_wrong_sign(grad_y: torch.Tensor, y: torch.Tensor, *, dim: int) -> torch.Tensor:
    g, p = _rows(grad_y, dim), _rows(y, dim)
    return _back(p * ((g * p).sum(-1, keepdim=True) - g), y, dim)


def softmax_backward_no_sum(grad_y: torch.Tensor, y: torch.Tensor, *, dim: int) -> torch.Tensor:
    return _back(_rows(grad_y, dim) * _rows(y, dim), y, dim)


# -- norms ------------------------------------------------------------------------------------------
def _norm_rows(x: torch.Tensor, normalized_shape: tuple[int, ...]) -> torch.Tensor:
    return x.to(F32).reshape(*x.shape[:x.dim() - len(normalized_shape)], math.prod(normalized_shape))


def _affine(x_hat: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None,
            bias: torch.Tensor | None) -> torch.Tensor:
    y = x_hat if weight is None else x_hat * weight.to(F32).reshape(-1)
    if bias is not None:
        y = y + bias.to(F32).reshape(-1)
    return y.reshape(x.shape).to(x.dtype)


def welford(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and biased variance, one element at a time (Welford's update)."""
    mean = torch.zeros(rows.shape[:-1], dtype=rows.dtype)
    m2 = torch.zeros_like(mean)
    for k in range(rows.shape[-1]):
        delta = rows[..., k] - mean
        mean = mean + delta / (k + 1)
        m2 = m2 + delta * (rows[..., k] - mean)
    return mean.unsqueeze(-1), (m2 / rows.shape[-1]).unsqueeze(-1)


def two_pass(rows: torch.Tensor, divisor: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    n = rows.shape[-1]
    mean = blocked_sum(rows) / n
    d = rows - mean
    return mean, blocked_sum(d * d) / (divisor or n)


def layer_norm_welford_rsqrt(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *,
                             normalized_shape: tuple[int, ...], eps: float) -> torch.Tensor:
    rows = _norm_rows(x, normalized_shape)
    mean, var = welford(rows)
    return _affine((rows - mean) * torch.rsqrt(var + eps), x, weight, bias)


def layer_norm_two_pass_recip(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *,
                              normalized_shape: tuple[int, ...], eps: float) -> torch.Tensor:
    rows = _norm_rows(x, normalized_shape)
    mean, var = two_pass(rows)
    return _affine((rows - mean) * (1 / torch.sqrt(var + eps)), x, weight, bias)


def rms_norm_sequential(x: torch.Tensor, weight: torch.Tensor | None, *, normalized_shape: tuple[int, ...],
                        eps: float) -> torch.Tensor:
    rows = _norm_rows(x, normalized_shape)
    ms = sequential_sum(rows * rows) / rows.shape[-1]
    return _affine(rows / torch.sqrt(ms + eps), x, weight, None)


def layer_norm_unbiased(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *,
                        normalized_shape: tuple[int, ...], eps: float) -> torch.Tensor:
    """layer_norm dividing the variance by n - 1 instead of n (torch's mean and sums in f32)."""
    dims = tuple(range(x.dim() - len(normalized_shape), x.dim()))
    x32 = x.to(F32)
    mean = x32.mean(dims, keepdim=True)
    var = ((x32 - mean) ** 2).sum(dims, keepdim=True) / (math.prod(normalized_shape) - 1)
    y = (x32 - mean) * torch.rsqrt(var + eps)
    if weight is not None:
        y = y * weight.to(F32)
    if bias is not None:
        y = y + bias.to(F32)
    return y.to(x.dtype)


def layer_norm_f16_reduction(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *,
                             normalized_shape: tuple[int, ...], eps: float) -> torch.Tensor:
    rows = _norm_rows(x, normalized_shape).half()
    mean = sequential_sum(rows) / rows.shape[-1]
    d = rows - mean
    var = sequential_sum(d * d) / rows.shape[-1]
    return _affine((d.float()) * torch.rsqrt(var.float() + eps), x, weight, bias)


def rms_norm_f16_reduction(x: torch.Tensor, weight: torch.Tensor | None, *, normalized_shape: tuple[int, ...],
                           eps: float) -> torch.Tensor:
    rows = _norm_rows(x, normalized_shape).half()
    ms = sequential_sum(rows * rows).float() / rows.shape[-1]
    return _affine(rows.float() * torch.rsqrt(ms + eps), x, weight, None)


def layer_norm_eps_outside(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *,
                           normalized_shape: tuple[int, ...], eps: float) -> torch.Tensor:
    rows = _norm_rows(x, normalized_shape)
    mean, var = two_pass(rows)
    return _affine((rows - mean) / (torch.sqrt(var) + eps), x, weight, bias)


def layer_norm_no_eps(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *,
                      normalized_shape: tuple[int, ...], eps: float) -> torch.Tensor:
    """eps left out: x̂ = (x - μ)/σ."""
    rows = _norm_rows(x, normalized_shape)
    mean, var = two_pass(rows)
    return _affine((rows - mean) * torch.rsqrt(var), x, weight, bias)


def rms_norm_no_eps(x: torch.Tensor, weight: torch.Tensor | None, *, normalized_shape: tuple[int, ...],
                    eps: float) -> torch.Tensor:
    rows = _norm_rows(x, normalized_shape)
    return _affine(rows * torch.rsqrt(sequential_sum(rows * rows) / rows.shape[-1]), x, weight, None)


def rms_norm_eps_outside(x: torch.Tensor, weight: torch.Tensor | None, *, normalized_shape: tuple[int, ...],
                         eps: float) -> torch.Tensor:
    rows = _norm_rows(x, normalized_shape)
    return _affine(rows / (torch.sqrt(sequential_sum(rows * rows) / rows.shape[-1]) + eps), x, weight, None)


# a loop bound off by one: the last element of each row left out of its sums (still divided by n)
def layer_norm_drops_last(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *,
                          normalized_shape: tuple[int, ...], eps: float) -> torch.Tensor:
    rows = _norm_rows(x, normalized_shape)
    n = rows.shape[-1]
    mean = blocked_sum(rows[..., :-1]) / n
    d = rows - mean
    return _affine(d * torch.rsqrt(blocked_sum((d * d)[..., :-1]) / n + eps), x, weight, bias)


def rms_norm_drops_last(x: torch.Tensor, weight: torch.Tensor | None, *, normalized_shape: tuple[int, ...],
                        eps: float) -> torch.Tensor:
    rows = _norm_rows(x, normalized_shape)
    return _affine(rows * torch.rsqrt(blocked_sum((rows * rows)[..., :-1]) / rows.shape[-1] + eps), x, weight, None)


def softmax_drops_last(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    rows = _rows(x, dim)
    e = torch.exp(rows - rows.amax(-1, keepdim=True))
    return _back(e / blocked_sum(e[..., :-1]), x, dim)


def logsumexp_drops_last(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    rows = _rows(x, dim)
    m = rows.amax(-1, keepdim=True)
    return (m + torch.log(blocked_sum(torch.exp(rows - m)[..., :-1]))).squeeze(-1).to(x.dtype)


def layer_norm_one_pass_variance(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *,
                                 normalized_shape: tuple[int, ...], eps: float) -> torch.Tensor:
    rows = _norm_rows(x, normalized_shape)
    n = rows.shape[-1]
    mean = rows.sum(-1, keepdim=True) / n
    var = (rows * rows).sum(-1, keepdim=True) / n - mean * mean
    return _affine((rows - mean) * torch.rsqrt(var + eps), x, weight, bias)


def _norm_backward_f32(grad_y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None,
                       normalized_shape: tuple[int, ...], eps: float, centered: bool) -> NormBackward:
    rows, g = _norm_rows(x, normalized_shape), _norm_rows(grad_y, normalized_shape)
    mean, var = two_pass(rows) if centered else (0.0, sequential_sum(rows * rows) / rows.shape[-1])
    r = torch.rsqrt(var + eps)
    x_hat = (rows - mean) * r
    h = g if weight is None else g * weight.to(F32).reshape(-1)
    n = rows.shape[-1]
    c = blocked_sum(h * x_hat) / n
    inner = h - x_hat * c
    if centered:
        inner = inner - blocked_sum(h) / n
    grad_x = (r * inner).reshape(x.shape).to(x.dtype)
    if weight is None:
        return grad_x
    flat = g.reshape(-1, n)
    grad_weight = sequential_sum((flat * x_hat.reshape(flat.shape)).T).reshape(weight.shape).to(x.dtype)
    if not centered:
        return grad_x, grad_weight
    return grad_x, grad_weight, sequential_sum(flat.T).reshape(weight.shape).to(x.dtype)


def layer_norm_backward_f32(grad_y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, *,
                            normalized_shape: tuple[int, ...], eps: float) -> NormBackward:
    return _norm_backward_f32(grad_y, x, weight, normalized_shape, eps, centered=True)


def layer_norm_backward_no_eps(grad_y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, *,
                              normalized_shape: tuple[int, ...], eps: float) -> NormBackward:
    """The f32 backward with eps left out of 1/σ."""
    return _norm_backward_f32(grad_y, x, weight, normalized_shape, 0.0, centered=True)


def rms_norm_backward_f32(grad_y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, *,
                          normalized_shape: tuple[int, ...], eps: float) -> NormBackward:
    return _norm_backward_f32(grad_y, x, weight, normalized_shape, eps, centered=False)
