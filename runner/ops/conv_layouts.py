"""Conv layouts as data: each tensor's memory order, outermost first, in rocMLIR's spelling.

A layout is "nchw" or "nhwc" (every tensor, the shorthands), or three orders joined by "-":
input, filter, output, e.g. "nhwc-yxck-nhwk" or "ngchw-gkyxc-ngkhw". Letters:

    input   n c  + spatial     filter  k c  + spatial     output  n k  + spatial
    spatial: input/output "w" | "hw" | "dhw", filter "x" | "yx" | "zyx", or digits "0", "01", "012"
             (rocMLIR's 3-d spelling) in either
    g        the groups: in rocMLIR's layouts a separate dim; here it must come just before the dim it
             splits (c in the input, k in the filter and the output), where it is the same memory as
             that dim alone ("ngchw" is "nchw", "gkyxc" is "kyxc")

Every logical dim appears once. A kernel receives each tensor with its logical shape ((N, C, *spatial),
(K, C/g, *kernel), (N, K, *out)) as a strided view whose memory follows its order; which string
applies to which tensor follows the direction (fwd: x input, w filter; bwd_data: dy output, w filter;
bwd_weight: x input, dy output). Layouts whose group dim is not next to the dim it splits
("nghwc", "hwcgn") cannot be such a view and are refused.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .base import UNKNOWN_LAYOUT, stored_in_order

if TYPE_CHECKING:
    import torch

SHORTHANDS = ("nchw", "nhwc")
_CHANNELS = {"input": ("n", "c"), "filter": ("k", "c"), "output": ("n", "k")}
_SPLIT = {"input": "c", "filter": "k", "output": "k"}  # the dim the groups split
_SPATIAL = {"input": ("w", "hw", "dhw"), "filter": ("x", "yx", "zyx"), "output": ("w", "hw", "dhw")}
ROLE_OF_TENSOR = {"x": "input", "dx": "input", "w": "filter", "dw": "filter", "y": "output", "dy": "output"}


def layout_problem(layout: str, spatial_dims: int) -> str | None:
    """Why `layout` is not a conv layout for that many spatial dims: None when it is one, UNKNOWN_LAYOUT
    for a name (no "-") other than the shorthands, else what is wrong with the orders."""
    if layout in SHORTHANDS:
        return None
    if "-" not in layout:
        return UNKNOWN_LAYOUT
    parts = layout.split("-")
    if len(parts) != 3:
        return (f"expected nchw, nhwc, or three orders input-filter-output such as "
                f"{example(spatial_dims)}, got {layout!r}")
    for role, part in zip(("input", "filter", "output"), parts):
        problem = _order_problem(role, part, spatial_dims)
        if problem:
            return f"{role} order {part!r}: {problem}"
    return None


def example(spatial_dims: int) -> str:
    return {1: "nwc-kxc-nwk", 2: "nhwc-yxck-nhwk", 3: "nc012-kc012-nk012"}[spatial_dims]


def _names(role: str, spatial_dims: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(logical letters, digit form of the same) of a role."""
    letters = _CHANNELS[role] + tuple(_SPATIAL[role][spatial_dims - 1])
    digits = _CHANNELS[role] + tuple(str(d) for d in range(spatial_dims))
    return letters, digits


def _order_problem(role: str, order: str, spatial_dims: int) -> str | None:
    grouped = order.replace("g", "") if "g" in order else order
    if order.count("g") > 1:
        return "g appears more than once"
    if "g" in order:
        at = order.index("g")
        if at + 1 >= len(order) or order[at + 1] != _SPLIT[role]:
            return (f"g must come just before {_SPLIT[role]}, the dim the groups split (a separate group dim "
                    "elsewhere is not a strided view of the logical tensor)")
    for names in _names(role, spatial_dims):
        if sorted(grouped) == sorted(names):
            return None
    letters, digits = _names(role, spatial_dims)
    return f"expected a permutation of {''.join(letters)!r} (or {''.join(digits)!r}), with an optional g"


def memory_order(name: str, layout: str, spatial_dims: int) -> list[int]:
    """The logical dims of tensor `name`, outermost first in memory."""
    if layout == "nchw":
        return list(range(2 + spatial_dims))
    if layout == "nhwc":
        return [0, *range(2, 2 + spatial_dims), 1]
    role = ROLE_OF_TENSOR[name]
    order = dict(zip(("input", "filter", "output"), layout.split("-")))[role].replace("g", "")
    letters, digits = _names(role, spatial_dims)
    names = letters if sorted(order) == sorted(letters) else digits
    return [names.index(letter) for letter in order]


def arrange(name: str, tensor: torch.Tensor, layout: str, spatial_dims: int) -> torch.Tensor:
    """The logical tensor stored in the layout's memory order (same values, same logical shape)."""
    return stored_in_order(tensor, memory_order(name, layout, spatial_dims))
