"""compare()'s options in one object: checked and built once at its entry, handed whole to the backend.

compare.py builds a CompareOptions from compare()'s arguments (after checking them, and after choosing
the backend by the one rule of backend.py); fused_numba.partials and fused_torch.partials read what they
need from it, instead of taking each option as an argument of its own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from e2egen.metrics.formats import Format
from e2egen.metrics.names import ROUNDING_CODES

Backend = Literal["numba", "torch"]
# Raised by either backend when a bound element is negative or NaN (each checks it inside its own pass).
BAD_BOUND_MESSAGE = "bound must be >= 0 everywhere (it has a negative or NaN element)"


@dataclass(frozen=True)
class CompareOptions:
    """How one comparison of float outputs runs: the options compare() was given, checked."""

    fmt: Format  # the output's format as the fused passes read its bits (compare.pass_format)
    ftz: bool  # accept ±0 outputs where 0 < |ref| < min_normal
    rel_floor: float  # finite, >= 0 (a -0 made +0: its bit pattern would count zero refs above it in numba)
    rounding: str  # the kernel's final rounding by name: bias_z's centre (names.ROUNDING_CODES; else nearest)
    backend: Backend  # which fused pass runs (backend.choose)
    chunk: int  # elements per chunk

    @property
    def mode(self) -> int:
        """The rounding as the passes take it: 0 nearest even, 1 toward zero, 2 up, 3 down."""
        return ROUNDING_CODES.get(self.rounding, 0)
