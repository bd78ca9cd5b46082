"""How a matrix product's operand reaches the kernel: row-major, or column-major (the transposed view of a
contiguous tensor) as a layout letter "t" says; fp4 codes packed two a byte along K first (runner/fp4.py).
Shared by the ops whose operands are stored so (gemm, scaled gemm)."""
from __future__ import annotations

import torch

from e2egen.runner import fp4
from e2egen.runner.ops.tensor_layouts import stored_transposed


def stored_operand(name: str, tensor: torch.Tensor, transposed: bool) -> torch.Tensor:
    """A gemm operand as the kernel receives it: row-major, or column-major when `transposed`; fp4 codes
    packed along K first (A's last dim, B's second to last: runner/fp4.py)."""
    if fp4.is_codes(tensor):
        packed = fp4.pack_along(tensor, -1 if name == "a" else -2)
        return fp4.as_packed(stored_transposed(packed) if transposed else packed)
    return stored_transposed(tensor) if transposed else tensor.contiguous()


__all__ = ["stored_operand"]
