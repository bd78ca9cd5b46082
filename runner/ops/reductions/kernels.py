"""The reductions' kernels, written against the contract (runner/ops/reductions/spec.py): f(x, *, dim) -> out,
and f(x, *, dim, correction) -> out for var; the output in x's dtype. cumsum's take one dim (an int).

torch's own (torch.sum, torch.mean, torch.amax, torch.var) are the default kernels. CORRECT ones sum in
another order than torch (pairwise, reversed, blocked) or compute the variance another way (two-pass,
Welford, blocks of Welford merged by Chan's formulas), all in f32; WRONG ones have one bug each. The tests
(tests/ops/reductions/) name one as impl "e2egen.runner.ops.reductions.kernels:NAME".
"""
from __future__ import annotations

from typing import Callable, Mapping

import torch

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
