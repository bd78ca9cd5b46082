"""The tool's own torch ops never mix f32 and float64 tensors of any size.

torch computes such an op element by element with a conversion for each element, off its vectorised path:
adding an f32 tensor into a float64 one took 3.98 ms for 2.4M elements against 0.23 ms for two float64
tensors (issue 20, eleventh round, in the bound on a kernel's partial sums). The PR subset's smallest case of
every op runs here under a dispatch mode that records every op whose floating-point tensor arguments are
f32 and float64 together, with at least 4096 elements (conversions, copies and comparisons aside). The
kernels under test run on the case's dtype (f16 and bf16 kernels mix in f32, never float64), so whatever
this finds is the tool's.
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from small_cases import smallest_cases

MIXED = {torch.float32, torch.float64}
# Conversions, copies and comparisons convert once per element by definition; the others should not.
CONVERTING = {"_to_copy", "copy_", "to", "clone", "lift_fresh", "eq", "ne", "lt", "le", "gt", "ge", "equal"}


class _MixedOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.found: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        dtypes = {t.dtype for t in tensors if t.is_floating_point() and t.numel() > 1}
        name = func.overloadpacket.__name__
        if dtypes == MIXED and max(t.numel() for t in tensors) >= 4096 and name not in CONVERTING:
            self.found.add(str(func))
        return func(*args, **kwargs)


def test_the_check_tells_a_mixed_add() -> None:
    with _MixedOps() as mode:
        torch.zeros(5000, dtype=torch.float64).add_(torch.ones(5000, dtype=torch.float32))
        torch.zeros(5000, dtype=torch.float64).add_(torch.ones(5000, dtype=torch.float64))
    assert mode.found == {"aten.add_.Tensor"}


def test_a_small_case_of_every_op_runs_no_mixed_f32_float64_op() -> None:
    from e2egen.generator.execute import execute

    found = set()
    for case in smallest_cases():
        with _MixedOps() as mode:
            outcome = execute(case, device="cpu")
        assert outcome.status == "passed", (case.id, outcome.reason)
        found |= {f"{op} ({case.id})" for op in mode.found}
    assert not found, sorted(found)
