"""Logical coordinates of output elements: (n, k, h, w) for a conv's y, (m, n) for a gemm's c."""
from __future__ import annotations

import math

import numpy as np

from e2egen import runner


def coordinate_names(problem: runner.Problem) -> tuple[str, ...]:
    """Names of the output's logical dims, as the op names them (Op.output_dim_names: a conv's fwd y
    (n, k, h, w), bwd_data dx (n, c, h, w), bwd_weight dw (k, c, r, s), gemm c (m, n) or (batch, m, n)); else
    (m, n), with a leading batch for a rank-3 output."""
    names = problem.spec.output_dim_names(problem.params, problem.direction)
    if names:
        return names
    names = ("m", "n")
    return (("batch",) if len(problem.output_shape) == 3 else ()) + names


def position(problem: runner.Problem, flat_index: int) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(flat_index), problem.output_shape))


def position_text(problem: runner.Problem, flat_index: int) -> str:
    names = coordinate_names(problem)
    return "(" + ", ".join(f"{n}={i}" for n, i in zip(names, position(problem, flat_index))) + ")"


def elements(problem: runner.Problem) -> int:
    return math.prod(problem.output_shape)
