"""Shapes and memory layouts of the tensor ops (element-wise, reductions, normalisations).

These ops take tensors of any rank from 1 to 5, given by the catalogue's `shape = [...]`. Their layouts are
the memory arrangements kernel teams get wrong:

    contiguous     row-major
    strided        every tensor is a view that takes every other element of its last dim from a buffer
                   twice as wide, whose gaps hold NaN: a kernel that assumes unit stride reads them
    channels_last  dim 1 (channels) stored innermost: (n, c, h, w) as n, h, w, c; any rank >= 3

Per-channel or per-feature tensors (a norm's weight and bias) and reduced outputs keep their own
contiguous order. Values never depend on the layout: the drawn tensors are logical.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from e2egen.runner.errors import ProblemError
from e2egen.runner.ops.base import is_int

if TYPE_CHECKING:
    import torch

def stored_in_order(tensor: torch.Tensor, order: Sequence[int]) -> torch.Tensor:
    """The tensor, same logical shape and values, stored with its dims `order` outermost first in memory."""
    inverse = [list(order).index(dim) for dim in range(len(order))]
    return tensor.permute(*order).contiguous().permute(*inverse)


def stored_transposed(tensor: torch.Tensor) -> torch.Tensor:
    """The transposed view of a contiguous (..., cols, rows) tensor: a column-major operand."""
    return tensor.mT.contiguous().mT


TENSOR_LAYOUTS = ("contiguous", "strided", "channels_last")
MAX_RANK = 5
CHANNELS_LAST_MIN_RANK = 3


def parse_shape(key: str, value: Any) -> tuple[int, ...]:
    """A catalogue `shape`: a list of 1 to 5 positive integers."""
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)) or not 1 <= len(value) <= MAX_RANK:
        raise ProblemError(key, value, f"expected a list of 1 to {MAX_RANK} positive integers, got {value!r}")
    if not all(is_int(size) and size >= 1 for size in value):
        raise ProblemError(key, value, f"every size must be a positive integer, got {list(value)!r}")
    return tuple(int(size) for size in value)


def parse_axes(key: str, value: Any, rank: int) -> tuple[int, ...]:
    """A catalogue `axis`: one dim or a list of distinct dims, negative counting from the end; sorted, >= 0."""
    items = list(value) if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) else [value]
    if not items or not all(is_int(item) and -rank <= item < rank for item in items):
        raise ProblemError(key, value, f"expected a dim or a list of dims in [{-rank}, {rank - 1}] "
                                       f"(the shape has {rank} dims), got {value!r}")
    axes = sorted(item % rank for item in items)
    if len(set(axes)) != len(axes):
        raise ProblemError(key, value, f"a dim appears twice in {value!r}")
    return tuple(axes)


def layout_problem_for_shape(layout: str, shape: Sequence[int]) -> str | None:
    """Why `layout` cannot store a tensor of `shape` (None when it can)."""
    if layout == "channels_last" and len(shape) < CHANNELS_LAST_MIN_RANK:
        return (f"channels_last needs a shape of rank >= {CHANNELS_LAST_MIN_RANK} (dim 1 is the channel dim), "
                f"got shape {list(shape)}")
    return None


def arrange_tensor(tensor: torch.Tensor, layout: str, primary: bool = True) -> torch.Tensor:
    """The logical tensor stored as `layout` says. primary=False: a per-channel tensor, kept contiguous
    under channels_last (it has no channel dim to move) but strided under strided."""
    import torch

    if layout == "strided" and tensor.dim():
        wide = torch.full((*tensor.shape[:-1], 2 * tensor.shape[-1]), float("nan") if tensor.is_floating_point() else 0,
                          dtype=tensor.dtype, device=tensor.device)
        view = wide[..., ::2]
        view.copy_(tensor)
        return view
    if layout == "channels_last" and primary and tensor.dim() >= CHANNELS_LAST_MIN_RANK:
        return stored_in_order(tensor, (0, *range(2, tensor.dim()), 1))
    return tensor.contiguous()
