"""The reductions' kernels, written against the contract (runner/ops/reductions/spec.py): f(x, *, dim) -> out,
and f(x, *, dim, correction) -> out for var; the output in x's dtype. cumsum's take one dim (an int). Backward:
f(grad_y, x, *, dim) -> grad_x; cumsum's f(grad_y, *, dim) -> grad_x.

torch's own (torch.sum, torch.mean, torch.amax, torch.var) are the default kernels. CORRECT ones sum in
another order than torch (pairwise, reversed, blocked) or compute the variance another way (two-pass,
Welford, blocks of Welford merged by Chan's formulas), all in f32; WRONG ones have one bug each. The tests
(tests/ops/reductions/) name one as impl "e2egen.runner.ops.reductions.kernels:NAME".
"""
from __future__ import annotations

from typing import Callable, Mapping

import torch

from e2egen.runner.f32_copies import on_f32_copies
from e2egen.runner.ops.reductions.spec import Reduction

BLOCK = 64


# -- torch's own ------------------------------------------------------------------------------------
def torch_sum(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    return torch.sum(x, dim=dim)


def torch_mean(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    return torch.mean(x, dim=dim)


def torch_max(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    return torch.amax(x, dim=dim)


def torch_var(x: torch.Tensor, *, dim: tuple[int, ...], correction: int) -> torch.Tensor:
    return torch.var(x, dim=dim, correction=correction)


def torch_cumsum(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    return torch.cumsum(x, dim=dim)


TORCH_KERNELS: Mapping[Reduction, Callable[..., torch.Tensor]] = {
    "sum": torch_sum, "mean": torch_mean, "max": torch_max, "var": torch_var}


# -- backward (bwd_data): torch's autograd of the forward kernels ------------------------------------------
def _autograd(forward: Callable[..., torch.Tensor], grad_y: torch.Tensor, x: torch.Tensor, **keywords) -> torch.Tensor:
    leaf = x.detach().requires_grad_()
    with torch.enable_grad():
        y = forward(leaf, **keywords)
    return torch.autograd.grad(y, leaf, grad_y)[0]


def torch_sum_backward(grad_y: torch.Tensor, x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    # autograd's is grad_y expanded, a view of it: the contract asks for a tensor of its own
    return _autograd(torch_sum, grad_y, x, dim=dim).clone(memory_format=torch.contiguous_format)


def torch_mean_backward(grad_y: torch.Tensor, x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    return _autograd(torch_mean, grad_y, x, dim=dim)


def torch_max_backward(grad_y: torch.Tensor, x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    return _autograd(torch_max, grad_y, x, dim=dim)


def torch_cumsum_backward(grad_y: torch.Tensor, *, dim: int) -> torch.Tensor:
    return _autograd(torch_cumsum, grad_y, torch.zeros_like(grad_y), dim=dim)  # its gradient does not read x


def torch_var_backward(grad_y: torch.Tensor, x: torch.Tensor, *, dim: tuple[int, ...], correction: int) -> torch.Tensor:
    """torch's own autograd of var, in x's format: WRONG for f16/bf16 (the mean, x - mean and the scale each rounded
    to the input format)."""
    return _autograd(torch_var, grad_y, x, dim=dim, correction=correction)


f32_var_backward = on_f32_copies(torch_var_backward)  # the default (float64 passes: the reference)


TORCH_BACKWARD_KERNELS: Mapping[Reduction, Callable[..., torch.Tensor]] = {
    "sum": torch_sum_backward, "mean": torch_mean_backward, "max": torch_max_backward, "var": f32_var_backward}


def rows(x: torch.Tensor, dim: tuple[int, ...], dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, tuple[int, ...]]:
    """x as (outputs, N) in `dtype`, the reduced dims last in their logical order; and the output shape."""
    kept = [d for d in range(x.dim()) if d not in dim]
    out_shape = tuple(x.shape[d] for d in kept)
    return x.permute(*kept, *dim).reshape(-1, _count(x, dim)).to(dtype), out_shape


def _count(x: torch.Tensor, dim: tuple[int, ...]) -> int:
    count = 1
    for d in dim:
        count *= x.shape[d]
    return count


def pairwise(values: torch.Tensor) -> torch.Tensor:
    """Σ over the last dim by halving, every addition in values' dtype."""
    while values.shape[-1] > 1:
        if values.shape[-1] % 2:
            values = torch.cat([values, torch.zeros_like(values[..., :1])], dim=-1)
        values = values[..., 0::2] + values[..., 1::2]
    return values[..., 0]


def sequential(values: torch.Tensor, reverse: bool = False) -> torch.Tensor:
    """Σ over the last dim one element after the other, every addition in values' dtype."""
    order = range(values.shape[-1] - 1, -1, -1) if reverse else range(values.shape[-1])
    total = torch.zeros_like(values[..., 0])
    for index in order:
        total = total + values[..., index]
    return total


def blocked(values: torch.Tensor) -> torch.Tensor:
    """Blocks of BLOCK summed sequentially, the block sums added last block first."""
    padding = (-values.shape[-1]) % BLOCK
    values = torch.cat([values, values.new_zeros(*values.shape[:-1], padding)], dim=-1)
    partials = sequential(values.reshape(*values.shape[:-1], -1, BLOCK))
    return sequential(partials, reverse=True)


def _finish(total: torch.Tensor, out_shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    return total.reshape(out_shape).to(like.dtype)


# -- correct: sum and mean in other orders (f32) ----------------------------------------------------
def pairwise_sum(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    values, shape = rows(x, dim)
    return _finish(pairwise(values), shape, x)


def reversed_sum(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    values, shape = rows(x, dim)
    return _finish(sequential(values, reverse=True), shape, x)


def blocked_sum(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    values, shape = rows(x, dim)
    return _finish(blocked(values), shape, x)


def pairwise_mean(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    values, shape = rows(x, dim)
    return _finish(pairwise(values) / values.shape[-1], shape, x)


def blocked_mean(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    values, shape = rows(x, dim)
    return _finish(blocked(values) * (1.0 / values.shape[-1]), shape, x)


def reversed_max(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    values, shape = rows(x, dim, x.dtype)
    return values.flip(-1).amax(dim=-1).reshape(shape)


# -- correct: var ------------------------------------------------------------------------------------
def two_pass_var(x: torch.Tensor, *, dim: tuple[int, ...], correction: int) -> torch.Tensor:
    values, shape = rows(x, dim)
    n = values.shape[-1]
    mean = pairwise(values) / n
    return _finish(pairwise((values - mean[:, None]).square()) / (n - correction), shape, x)


def welford_var(x: torch.Tensor, *, dim: tuple[int, ...], correction: int) -> torch.Tensor:
    values, shape = rows(x, dim)
    mean, m2 = welford(values)
    return _finish(m2 / (values.shape[-1] - correction), shape, x)


def welford(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Welford's updates over the last dim, in values' dtype: (mean, Σ(x - mean)²)."""
    mean = torch.zeros_like(values[:, 0])
    m2 = torch.zeros_like(mean)
    for k in range(values.shape[-1]):
        delta = values[:, k] - mean
        mean = mean + delta / (k + 1)
        m2 = m2 + delta * (values[:, k] - mean)
    return mean, m2


def chan_var(x: torch.Tensor, *, dim: tuple[int, ...], correction: int) -> torch.Tensor:
    """Blocks of BLOCK by Welford, merged pairwise by Chan's formulas (as parallel kernels do)."""
    values, shape = rows(x, dim)
    n = values.shape[-1]
    parts = [(float(min(BLOCK, n - start)), *welford(values[:, start:start + BLOCK])) for start in range(0, n, BLOCK)]
    while len(parts) > 1:
        merged = []
        for index in range(0, len(parts) - 1, 2):
            (na, ma, sa), (nb, mb, sb) = parts[index], parts[index + 1]
            delta = mb - ma
            total = na + nb
            merged.append((total, ma + delta * (nb / total), sa + sb + delta * delta * (na * nb / total)))
        if len(parts) % 2:
            merged.append(parts[-1])
        parts = merged
    return _finish(parts[0][2] / (n - correction), shape, x)


CORRECT: Mapping[Reduction, tuple[str, ...]] = {
    "sum": ("pairwise_sum", "reversed_sum", "blocked_sum"), "mean": ("pairwise_mean", "blocked_mean"),
    "max": ("reversed_max",), "var": ("two_pass_var", "welford_var", "chan_var")}


# -- wrong ------------------------------------------------------------------------------------------
def f16_sum(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    """Accumulates in f16, one element after the other."""
    values, shape = rows(x, dim, torch.float16)
    return _finish(sequential(values), shape, x)


def f16_mean(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    values, shape = rows(x, dim, torch.float16)
    return _finish(sequential(values) / values.shape[-1], shape, x)


def f16_var(x: torch.Tensor, *, dim: tuple[int, ...], correction: int) -> torch.Tensor:
    """Two-pass, every step in f16."""
    values, shape = rows(x, dim, torch.float16)
    n = values.shape[-1]
    mean = sequential(values) / n
    return _finish(sequential((values - mean[:, None]).square()) / (n - correction), shape, x)


def mixed_up_var(x: torch.Tensor, *, dim: tuple[int, ...], correction: int) -> torch.Tensor:
    """Biased where the case asks for unbiased and the other way round."""
    return torch.var(x, dim=dim, correction=1 - correction)


def one_pass_var(x: torch.Tensor, *, dim: tuple[int, ...], correction: int) -> torch.Tensor:
    """E[x²] - E[x]² in f32: exact algebra, catastrophic cancellation when |mean| >> spread."""
    values, shape = rows(x, dim)
    n = values.shape[-1]
    # sequential f32 sums: torch's own f32 sum may accumulate in double on the CPU, which would hide the
    # cancellation this kernel stands for
    mean = sequential(values) / n
    return _finish((sequential(values.square()) - n * mean * mean) / (n - correction), shape, x)


def drop_last_sum(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    """Loses the last reduced element (an off-by-one loop bound)."""
    values, shape = rows(x, dim)
    return _finish(values[:, :-1].sum(dim=-1), shape, x)


def unit_stride_sum(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    """Reads x's memory as if it were contiguous (ignores its strides)."""
    strides, step = [], 1
    for size in reversed(x.shape):
        strides.insert(0, step)
        step *= size
    dense = torch.as_strided(x, x.shape, strides, x.storage_offset())
    return torch.sum(dense, dim=dim)


def drop_last_max(x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    values, shape = rows(x, dim, x.dtype)
    return values[:, :-1].amax(dim=-1).reshape(shape)


# -- cumsum: a correct scan in another order, and three bugs -------------------------------------------
SCAN_BLOCK = 64


def _scan_rows(x: torch.Tensor, dim: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """x with `dim` last, as (rows, length) in `dtype`."""
    return x.movedim(dim, -1).reshape(-1, x.shape[dim]).to(dtype)


def _scan_finish(prefixes: torch.Tensor, x: torch.Tensor, dim: int) -> torch.Tensor:
    moved = x.movedim(dim, -1).shape
    return prefixes.reshape(moved).movedim(-1, dim).to(x.dtype)


def _blocked_scan(values: torch.Tensor, carry: bool) -> torch.Tensor:
    """Each block of SCAN_BLOCK scanned on its own (f32), then each block's total carried into the next."""
    blocks = values.split(SCAN_BLOCK, dim=-1)
    out, total = [], torch.zeros(values.shape[0], dtype=values.dtype)
    for block in blocks:
        scanned = torch.cumsum(block, dim=-1)
        out.append(scanned + total[:, None] if carry else scanned)
        total = total + scanned[:, -1]
    return torch.cat(out, dim=-1)


def blocked_cumsum(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """CORRECT: blocks of 64 scanned in f32, each block's running total carried into the next (a GPU's scan)."""
    return _scan_finish(_blocked_scan(_scan_rows(x, dim), carry=True), x, dim)


def carry_dropped_cumsum(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """WRONG: the blocks' totals are never carried (every block restarts at 0)."""
    return _scan_finish(_blocked_scan(_scan_rows(x, dim), carry=False), x, dim)


def exclusive_cumsum(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """WRONG: an exclusive scan (out_i sums x_0 .. x_(i-1)), the off-by-one of scans."""
    values = _scan_rows(x, dim)
    return _scan_finish(torch.cumsum(values, dim=-1) - values, x, dim)


def input_format_cumsum(x: torch.Tensor, *, dim: int) -> torch.Tensor:
    """WRONG for f16/bf16: the running sum kept in x's format, one element after the other."""
    values = _scan_rows(x, dim, x.dtype)
    running = torch.zeros(values.shape[0], dtype=x.dtype)
    out = torch.empty_like(values)
    for i in range(values.shape[1]):
        running = running + values[:, i]
        out[:, i] = running
    return _scan_finish(out, x, dim)


CORRECT_CUMSUM = ("blocked_cumsum",)
WRONG_CUMSUM = ("carry_dropped_cumsum", "exclusive_cumsum", "input_format_cumsum")


# -- backward: correct kernels written apart from autograd, and bugs --------------------------------------
def _kept(grad_y: torch.Tensor, x: torch.Tensor, dim: tuple[int, ...]) -> torch.Tensor:
    """grad_y with the reduced dims back as size-1 dims, broadcastable against x."""
    return grad_y.reshape([1 if d in dim else size for d, size in enumerate(x.shape)])


def broadcast_sum_backward(grad_y: torch.Tensor, x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    """CORRECT: grad_y copied over the reduced dims."""
    return _kept(grad_y, x, dim).expand(x.shape).contiguous()


def reciprocal_mean_backward(grad_y: torch.Tensor, x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    """CORRECT: grad_y times 1/N, both in f32 (two roundings), then rounded to the format."""
    scaled = _kept(grad_y, x, dim).float() * (1.0 / _count(x, dim))
    return scaled.expand(x.shape).to(x.dtype)


def masked_max_backward(grad_y: torch.Tensor, x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    """CORRECT: grad_y over the count of each output's maxima, in f32, at the maxima."""
    maxima = x == x.amax(dim=dim, keepdim=True)
    count = maxima.sum(dim=dim, keepdim=True)
    share = _kept(grad_y, x, dim).float() / count
    return torch.where(maxima, share, 0.0).to(x.dtype)


def blocked_cumsum_backward(grad_y: torch.Tensor, *, dim: int) -> torch.Tensor:
    """CORRECT: the reversed rows scanned by blocked_cumsum (blocks of 64 in f32, totals carried)."""
    return blocked_cumsum(grad_y.flip(dim), dim=dim).flip(dim)


def scale_first_var_backward(grad_y: torch.Tensor, x: torch.Tensor, *, dim: tuple[int, ...],
                             correction: int) -> torch.Tensor:
    """CORRECT: grad_y · (2/(N - c)) first, then times x - μ (μ a pairwise f32 mean), all in f32."""
    x32 = x.float()
    count = x32.numel() // _kept(grad_y, x, dim).numel()
    return ((_kept(grad_y, x, dim).float() * (2.0 / (count - correction))) * (x32 - x32.mean(dim=dim, keepdim=True))).to(x.dtype)


CORRECT_BACKWARD: Mapping[str, tuple[str, ...]] = {
    "sum": ("broadcast_sum_backward",), "mean": ("reciprocal_mean_backward",), "max": ("masked_max_backward",),
    "cumsum": ("blocked_cumsum_backward",), "var": ("scale_first_var_backward",)}


def half_reciprocal_mean_backward(grad_y: torch.Tensor, x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    """WRONG for f32: 1/N taken in f16 (a relative error up to 2^-11), the product in f32."""
    reciprocal = torch.tensor(1.0 / _count(x, dim), dtype=torch.float16).float()
    return (_kept(grad_y, x, dim).float() * reciprocal).expand(x.shape).to(x.dtype)


def n_minus_one_mean_backward(grad_y: torch.Tensor, x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    """WRONG: divides by N - 1 (var's unbiased divisor where mean's belongs)."""
    return (_kept(grad_y, x, dim).float() / (_count(x, dim) - 1)).expand(x.shape).to(x.dtype)


def first_max_backward(grad_y: torch.Tensor, x: torch.Tensor, *, dim: tuple[int, ...]) -> torch.Tensor:
    """WRONG under the contract: the whole gradient to the first of tied maxima (torch.max(dim)'s own rule),
    where torch.amax's gradient splits it among them."""
    values, shape = rows(x, dim, x.dtype)
    first = values.argmax(dim=-1)
    grad_rows = torch.zeros_like(values)
    grad_rows[torch.arange(values.shape[0]), first] = grad_y.reshape(-1).to(x.dtype)
    kept = [d for d in range(x.dim()) if d not in dim]
    grouped = grad_rows.reshape(*(x.shape[d] for d in kept), *(x.shape[d] for d in dim))
    order = kept + list(dim)
    return grouped.permute(*[order.index(d) for d in range(x.dim())]).contiguous()


def prefix_cumsum_backward(grad_y: torch.Tensor, *, dim: int) -> torch.Tensor:
    """WRONG: the forward's prefix sums where the backward needs suffix sums."""
    return torch.cumsum(grad_y, dim=dim)


def input_format_cumsum_backward(grad_y: torch.Tensor, *, dim: int) -> torch.Tensor:
    """WRONG for f16/bf16: the reversed running sum kept in grad_y's format."""
    return input_format_cumsum(grad_y.flip(dim), dim=dim).flip(dim)


def var_backward_biased(grad_y: torch.Tensor, x: torch.Tensor, *, dim: tuple[int, ...], correction: int) -> torch.Tensor:
    """WRONG where correction != 0: divides by N, the biased estimate's N, whatever the correction."""
    return f32_var_backward(grad_y, x, dim=dim, correction=0)


def var_backward_no_two(grad_y: torch.Tensor, x: torch.Tensor, *, dim: tuple[int, ...], correction: int) -> torch.Tensor:
    """WRONG: (x - μ)/(N - c), the derivative of the square's 2 forgotten."""
    return (f32_var_backward(grad_y.float(), x.float(), dim=dim, correction=correction) / 2).to(x.dtype)


def var_backward_mean_in_format(grad_y: torch.Tensor, x: torch.Tensor, *, dim: tuple[int, ...],
                                correction: int) -> torch.Tensor:
    """WRONG for f16/bf16: μ rounded to the input format before x - μ (every other step in f32)."""
    x32 = x.float()
    count = x32.numel() // _kept(grad_y, x, dim).numel()
    mean = x32.mean(dim=dim, keepdim=True).to(x.dtype).float()
    return (_kept(grad_y, x, dim).float() * (x32 - mean) * (2.0 / (count - correction))).to(x.dtype)


WRONG_BACKWARD: Mapping[str, tuple[str, ...]] = {
    "mean": ("half_reciprocal_mean_backward", "n_minus_one_mean_backward"), "max": ("first_max_backward",),
    "cumsum": ("prefix_cumsum_backward", "input_format_cumsum_backward"),
    "var": ("torch_var_backward", "var_backward_biased", "var_backward_no_two", "var_backward_mean_in_format")}
