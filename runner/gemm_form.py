"""An op written as one batched matrix product, lhs [G, M, R] @ rhs [G, R, Ncol] (float64), with `fold`
giving back the op's logical output: the form an op's numerics return from `lowered` (a product-sum op's
lowering, runner/ops/product_sum/lowering.py, documents the reduction order R of each op and direction).

`accumulate_chunked(form, k)` is the "accumulate k" reference of the seed: the reduction is cut into
ceil(R / k) chunks of k consecutive products; each chunk's sum is taken in float64 (one batched matmul over
every output at once), added to a running sum that is rounded to f32 after every chunk. The only Python
loop is over chunks. Cost: the plain reference's float64 FLOPs in ceil(R/k) thin matmuls, each writing a
float64 partial over the whole output that one more pass adds into the f32 running sum, plus the lowering's
own copies (a conv's im2col: about the kernel window, R·S…, times the input; bwd_data also stores the
stride's inserted zeros). benchmarks/bench_runner.py measures it against the plain reference.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class GemmForm:
    lhs: torch.Tensor  # [G, M, R]
    rhs: torch.Tensor  # [G, R, Ncol]
    fold: Callable[[torch.Tensor], torch.Tensor]  # [G, M, Ncol] -> logical output

    def __post_init__(self) -> None:
        g, _, r = self.lhs.shape
        if self.rhs.dim() != 3 or self.rhs.shape[0] != g or self.rhs.shape[1] != r:
            raise ValueError(f"lhs {tuple(self.lhs.shape)} and rhs {tuple(self.rhs.shape)} do not multiply")

    @property
    def reduction_size(self) -> int:
        return self.lhs.shape[2]

    def product(self) -> torch.Tensor:
        return self.fold(torch.bmm(self.lhs, self.rhs))


def accumulate_chunked(form: GemmForm, chunk: int) -> torch.Tensor:
    """lhs @ rhs with a running sum rounded to f32 after every `chunk` products."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    lhs, rhs = form.lhs, form.rhs
    groups, rows, reduction = lhs.shape
    cols = rhs.shape[2]
    # The running sum is an f32 value after every chunk, so it is kept in f32.
    running = torch.zeros(groups, rows, cols, dtype=torch.float32, device=lhs.device)
    partial = torch.empty(groups, rows, cols, dtype=torch.float64, device=lhs.device)
    for start in range(0, reduction, chunk):
        stop = min(start + chunk, reduction)
        torch.bmm(lhs[:, :, start:stop], rhs[:, start:stop, :], out=partial)
        # float64 + float32 is computed in float64 and rounded once (nearest
        # even, overflow to inf) when stored into the float32 `out`.
        torch.add(partial, running, out=running)
    return form.fold(running.to(torch.float64))


__all__ = ["GemmForm", "accumulate_chunked"]
