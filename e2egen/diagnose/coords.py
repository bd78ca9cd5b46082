"""Logical coordinates of output elements: (n, k, h, w) for a conv's y, (m, n) for a gemm's c."""
from __future__ import annotations

import math

import numpy as np

from e2egen import runner
from e2egen.runner.ops.product_sum.conv import ConvParams

_SPATIAL = {1: ("w",), 2: ("h", "w"), 3: ("d", "h", "w")}
_KERNEL = {1: ("s",), 2: ("r", "s"), 3: ("t", "r", "s")}


def coordinate_names(problem: runner.Problem) -> tuple[str, ...]:
    """Names of the output's logical dims: fwd y (n, k, h, w), bwd_data dx (n, c, h, w),
    bwd_weight dw (k, c, r, s), gemm c (m, n) or (batch, m, n)."""
    p = problem.params
    if isinstance(p, ConvParams):
        dims = p.spatial_dims
        return {
            "fwd": ("n", "k", *_SPATIAL[dims]),
            "bwd_data": ("n", "c", *_SPATIAL[dims]),
            "bwd_weight": ("k", "c", *_KERNEL[dims]),
        }[problem.direction]
    names = ("m", "n")
    return (("batch",) if len(problem.output_shape) == 3 else ()) + names


def position(problem: runner.Problem, flat_index: int) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(flat_index), problem.output_shape))


def position_text(problem: runner.Problem, flat_index: int) -> str:
    names = coordinate_names(problem)
    return "(" + ", ".join(f"{n}={i}" for n, i in zip(names, position(problem, flat_index))) + ")"


def elements(problem: runner.Problem) -> int:
    return math.prod(problem.output_shape)
