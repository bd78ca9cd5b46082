"""The arithmetic probes of a scaled gemm: gemm's probes run on the kernel with every scale 1.

With unit scales a scaled gemm is a plain gemm of its elements, so what the probes find (how products
see the inputs, the accumulator's bits and grouping, its rounding, subnormals) is the kernel's
arithmetic on the elements; the scales are judged by the structured patterns and the bound's scale term.
gemm's probes are reached through the registry (gemm's numerics), not imported from its family.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from e2egen.runner.arithmetic.model import Arithmetic
from e2egen.runner.dtypes import storage_dtype
from e2egen.runner.ops import numerics_of
from e2egen.runner.ops.numerics import Kernel
from e2egen.runner.ops.product_sum.gemm import GemmParams
from e2egen.runner.problem import Problem


def probe_scaled_arithmetic(problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
    params = problem.params
    gemm = replace(problem, op="gemm", layout=problem.layout[:2],
                   params=GemmParams(params.m, params.n, params.k, params.batch, params.out_dtype))
    spec, numerics = problem.spec, problem.numerics
    unit_scales = {name: torch.ones(shape, dtype=torch.float64)
                   for name, shape in problem.input_shapes.items() if name.startswith("scale_")}
    formats = spec.input_formats(params, problem.direction, problem.dtype)

    def with_unit_scales(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype | None = None) -> torch.Tensor:
        """The scaled kernel as a gemm kernel (gemm's contract): its scales all 1, stored as the layout says."""
        scales = {name: numerics.arrange(name, values.to(storage_dtype(formats[name])).to(a.device), problem.layout)
                  for name, values in unit_scales.items()}
        return numerics.call(kernel, problem.direction, params, {"a": a, "b": b, **scales})

    return numerics_of(gemm.spec).probe_arithmetic(gemm, with_unit_scales, device, label)
