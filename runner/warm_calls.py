"""The kernel call signatures this process has run already: a later first call with one of them is warm.

A JIT kernel (XLA, Triton, torch.compile) compiles once per signature: its inputs' shapes, strides,
dtypes and devices and the problem's parameters. torch's own kernels set up per shape too (oneDNN
generates its code per shape; cuDNN and cuBLAS choose their algorithms). Cases that differ only in their
input range or seed share a signature. Once a signature has run in this process, the next case with it meets a warm kernel, and its first call can be the recorded
time without the repeat that run._call_warm otherwise makes.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Hashable, Mapping

if TYPE_CHECKING:
    from e2egen.runner.problem import Problem

# The most recent signatures kept; a sweep that meets more forgets the oldest (their next call repeats).
LIMIT = 4096
_seen: OrderedDict[Hashable, None] = OrderedDict()


def signature(problem: "Problem", label: str, tensors: Mapping[str, Any]) -> Hashable:
    """What a kernel may compile or set up for: which kernel, the problem's shape and the tensors as passed."""
    passed = tuple((name, tuple(t.shape), tuple(t.stride()), t.dtype, t.device) if hasattr(t, "stride") else (name, repr(t))
                   for name, t in tensors.items())
    return (label, problem.op, problem.direction, problem.dtype, problem.layout, repr(problem.params), passed)


def seen(key: Hashable) -> bool:
    """Whether the kernel has run with this signature in this process (it counts as recent again)."""
    if key not in _seen:
        return False
    _seen.move_to_end(key)
    return True


def remember(key: Hashable) -> None:
    _seen[key] = None
    _seen.move_to_end(key)
    while len(_seen) > LIMIT:
        _seen.popitem(last=False)


def forget() -> None:
    """Every signature counts as new again (a kernel module reloaded, a test that needs cold calls)."""
    _seen.clear()
