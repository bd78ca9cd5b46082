"""Conv layouts as data: each tensor's memory order, outermost first, in rocMLIR's spelling.

A layout is "nchw" or "nhwc" (every tensor, the shorthands), or three orders joined by "-":
input, filter, output, e.g. "nhwc-yxck-nhwk", "ngchw-gkyxc-ngkhw" or "nghwc-gkyxc-nghwk". Letters:

    input   n c  + spatial     filter  k c  + spatial     output  n k  + spatial
    spatial: input/output "w" | "hw" | "dhw", filter "x" | "yx" | "zyx", or digits "0", "01", "012"
             (logical spatial dims in order: 0 is d in 3-d, h in 2-d) in either
    g        the groups, at most once per order: a separate dim of the dim it splits (c in the input,
             k in the filter and the output)

Every logical dim appears once. Which string applies to which tensor follows the direction (fwd: x input,
w filter; bwd_data: dy output, w filter; bwd_weight: x input, dy output). A kernel receives:

- when every g comes just before the dim it splits (or there is none): each tensor with its logical shape
  ((N, C, *spatial), (K, C/G, *kernel), (N, K, *out)) as a strided view whose memory follows its order;
  there g and the dim it splits are one run of memory, so "ngchw" is "nchw" and "gkyxc" is "kyxc";
- when some order puts g elsewhere ("nghwc", "hwcgn"): no strided view of the logical shapes has that
  memory, so every tensor of the case, the output the kernel returns included, has the groups split out:
  input (N, G, C/G, *spatial), filter (G, K/G, C/G, *kernel), output (N, G, K/G, *out), a strided view
  whose memory follows its order (an order without g keeps each group's run together: g just before the
  dim it splits).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from e2egen.runner.ops.base import UNKNOWN_LAYOUT
from e2egen.runner.ops.tensor_layouts import stored_in_order

if TYPE_CHECKING:
    import torch

SHORTHANDS = ("nchw", "nhwc")
ROLES = ("input", "filter", "output")
_CHANNELS = {"input": ("n", "c"), "filter": ("k", "c"), "output": ("n", "k")}
_GROUPED_CHANNELS = {"input": ("n", "g", "c"), "filter": ("g", "k", "c"), "output": ("n", "g", "k")}
_SPLIT = {"input": "c", "filter": "k", "output": "k"}  # the dim the groups split
GROUP_AXIS = {"input": 1, "filter": 0, "output": 1}  # where the grouped shape has G
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
    for role, part in zip(ROLES, parts):
        problem = _order_problem(role, part, spatial_dims)
        if problem:
            return f"{role} order {part!r}: {problem}"
    return None


def example(spatial_dims: int) -> str:
    return {1: "nwc-kxc-nwk", 2: "nhwc-yxck-nhwk", 3: "nc012-kc012-nk012"}[spatial_dims]


def _names(role: str, spatial_dims: int, grouped: bool = False) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(logical letters, digit form of the same) of a role's dims, in logical (or grouped) shape order."""
    channels = (_GROUPED_CHANNELS if grouped else _CHANNELS)[role]
    return channels + tuple(_SPATIAL[role][spatial_dims - 1]), channels + tuple(str(d) for d in range(spatial_dims))


def _order_problem(role: str, order: str, spatial_dims: int) -> str | None:
    if order.count("g") > 1:
        return "g appears more than once"
    for names in _names(role, spatial_dims):
        if sorted(order.replace("g", "")) == sorted(names):
            return None
    letters, digits = _names(role, spatial_dims)
    return f"expected a permutation of {''.join(letters)!r} (or {''.join(digits)!r}), with an optional g"


def _orders(layout: str) -> dict[str, str]:
    return dict(zip(ROLES, layout.split("-")))


def splits_groups(layout: str) -> bool:
    """Whether some order of `layout` puts g away from the dim it splits: then the case's tensors reach
    the kernel with the groups split out (the module docstring)."""
    if layout in SHORTHANDS:
        return False
    return any("g" in order and order[order.index("g") + 1:order.index("g") + 2] != _SPLIT[role]
               for role, order in _orders(layout).items())


def grouped_shape(name: str, shape: tuple[int, ...], groups: int) -> tuple[int, ...]:
    """The shape tensor `name` has with its groups split out."""
    axis = GROUP_AXIS[ROLE_OF_TENSOR[name]]
    return (*shape[:axis], groups, shape[axis] // groups, *shape[axis + 1:])


def ungrouped(name: str, tensor: torch.Tensor) -> torch.Tensor:
    """A grouped tensor back in its logical shape (the same values)."""
    axis = GROUP_AXIS[ROLE_OF_TENSOR[name]]
    return tensor.flatten(axis, axis + 1)


def memory_order(name: str, layout: str, spatial_dims: int, grouped: bool = False) -> list[int]:
    """The dims of tensor `name` (of its logical shape, or of its grouped shape), outermost first in memory."""
    if layout == "nchw":
        return list(range(2 + spatial_dims))
    if layout == "nhwc":
        return [0, *range(2, 2 + spatial_dims), 1]
    role = ROLE_OF_TENSOR[name]
    order = _orders(layout)[role]
    if not grouped:
        order = order.replace("g", "")
    elif "g" not in order:
        order = order.replace(_SPLIT[role], "g" + _SPLIT[role])
    letters, digits = _names(role, spatial_dims, grouped)
    names = letters if sorted(order) == sorted(letters) else digits
    return [names.index(letter) for letter in order]


def arrange(name: str, tensor: torch.Tensor, layout: str, spatial_dims: int, groups: int) -> torch.Tensor:
    """The logical tensor as the kernel receives it: stored in the layout's memory order, same values, in
    its logical shape, or in its grouped shape when the layout splits groups."""
    if splits_groups(layout):
        grouped = tensor.unflatten(GROUP_AXIS[ROLE_OF_TENSOR[name]], (groups, -1))
        return stored_in_order(grouped, memory_order(name, layout, spatial_dims, grouped=True))
    return stored_in_order(tensor, memory_order(name, layout, spatial_dims))
