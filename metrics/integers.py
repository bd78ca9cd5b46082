"""Exact comparison of integer outputs (i8, i32) with a float64 reference.

Every integer of these formats is exact in float64, so out is upcast and
compared for equality. Chunked torch ops, device-agnostic, one host copy.
"""
from __future__ import annotations

import torch

from e2egen.metrics.formats import IntegerFormat


def integer_totals(ref: torch.Tensor, out: torch.Tensor, fmt: IntegerFormat, chunk: int) -> dict[str, tuple]:
    """name -> (value, flat index or -1) for mismatches, max_abs_diff and the counted classes.

    Counts carry their first element; max_abs_diff (over ref finite and inside
    the format's range) its first maximal element.
    """
    rows = []
    for start in range(0, ref.numel(), chunk):
        r = ref[start:start + chunk]
        o = out[start:start + chunk].to(torch.float64)
        nan = torch.isnan(r)
        inf = torch.isinf(r)
        representable = ~nan & ~inf & (r >= fmt.min) & (r <= fmt.max)
        outside = ~nan & ~inf & ~representable
        differs = r != o  # NaN ref differs from everything
        diff = torch.where(representable, (r - o).abs(), torch.full_like(r, -1.0))
        worst = torch.argmax(diff)
        row = [diff[worst], worst + start]
        for mask in (differs, nan, inf, outside):
            row += [mask.sum().to(torch.float64), torch.argmax(mask.to(torch.uint8)) + start]
        rows.append(torch.stack([v.to(torch.float64) for v in row]))
    table = torch.stack(rows).cpu().numpy()

    def first_max(col: int) -> tuple[float, int]:
        k = int(table[:, col].argmax())
        value = float(table[k, col])
        return (max(value, 0.0), int(table[k, col + 1]) if value >= 0 else -1)

    def counted(col: int) -> tuple[int, int]:
        nonzero = (table[:, col] > 0).nonzero()[0]
        return int(table[:, col].sum()), (int(table[nonzero[0], col + 1]) if nonzero.size else -1)

    return {
        "max_abs_diff": first_max(0),
        "mismatches": counted(2),
        "nan_mismatch": counted(4),
        "inf_mismatch": counted(6),
        "overflow": counted(8),
    }
