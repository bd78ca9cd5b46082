"""A kernel run on f32 copies of its inputs: the default kernel wherever torch's own rounds its steps to f16 or bf16
(its batch_norm forward, the channel norms', logsumexp's, var's, sigmoid's, rsqrt's and log1p's backward), which
e2egen's default verdict, f32 arithmetic, fails; torch's native kernels stay among the planted bugs."""
from __future__ import annotations

from typing import Any, Callable

import torch


def on_f32_copies(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """`kernel` with every floating-point tensor argument (positional or keyword) widened to f32, and each output
    rounded once back to the first tensor argument's format. float64 arguments (a reference computed through the
    default kernel) pass as they are."""
    def call(*args: Any, **keywords: Any) -> Any:
        first = next(value for value in args if isinstance(value, torch.Tensor))
        if first.dtype == torch.float64:
            return kernel(*args, **keywords)
        result = kernel(*map(_widened, args), **{key: _widened(value) for key, value in keywords.items()})
        if isinstance(result, torch.Tensor):
            return result.to(first.dtype)
        return tuple(output.to(first.dtype) for output in result)

    call.__name__ = call.__qualname__ = f"{kernel.__name__}_on_f32_copies"
    call.__doc__ = f"{kernel.__name__} on f32 copies of its inputs, rounded once (runner/f32_copies.py)."
    return call


def _widened(value: Any) -> Any:
    return value.float() if isinstance(value, torch.Tensor) and value.is_floating_point() else value


__all__ = ["on_f32_copies"]
