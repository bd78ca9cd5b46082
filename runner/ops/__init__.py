"""The ops the catalogue can name, by name.

`register_op` adds an op written against the protocol in base.py (a team's own
fused op, or a test's); the built-in ones are always there.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from e2egen.runner.ops.attention.spec import AttentionOp
from e2egen.runner.ops.attention.params import AttentionParams
from e2egen.runner.ops.base import Op, ProductSumOp, TensorSpec
from e2egen.runner.ops.product_sum.conv import ConvOp, ConvParams
from e2egen.runner.ops.chains.conv_gemm import ConvGemmOp, ConvGemmParams
from e2egen.runner.ops.product_sum.gemm import GemmOp, GemmParams
from e2egen.runner.ops.chains.gemm_gemm import GemmGemmOp, GemmGemmParams
from e2egen.runner.ops.normalization.spec import NORMALIZATION_OPS
from e2egen.runner.ops.pointwise.spec import POINTWISE_OPS, PointwiseOp, PointwiseParams
from e2egen.runner.ops.reductions.spec import REDUCTION_OPS, ReductionOp, ReductionParams
from e2egen.runner.ops.scaled_gemm.spec import ScaledGemmOp, ScaledGemmParams

_BUILT_IN = (ConvOp(1), ConvOp(2), ConvOp(3), GemmOp(), ScaledGemmOp(), AttentionOp(), GemmGemmOp(), ConvGemmOp(), *POINTWISE_OPS, *REDUCTION_OPS, *NORMALIZATION_OPS)
_REGISTRY: dict[str, Op] = {op.name: op for op in _BUILT_IN}
OPS: Mapping[str, Op] = MappingProxyType(_REGISTRY)


def register_op(op: Op) -> None:
    """Make `op` nameable in catalogues and problems; a name already taken is a ValueError."""
    if not isinstance(op, Op):
        raise TypeError(f"expected an Op, got {type(op).__name__}")
    if op.name in _REGISTRY:
        raise ValueError(f"an op named {op.name!r} is already registered")
    _REGISTRY[op.name] = op


def unregister_op(name: str) -> None:
    """Remove an op `register_op` added (built-in ops stay)."""
    if any(op.name == name for op in _BUILT_IN):
        raise ValueError(f"{name!r} is a built-in op")
    _REGISTRY.pop(name, None)


__all__ = ["OPS", "Op", "ProductSumOp", "TensorSpec", "AttentionOp", "AttentionParams", "ConvOp", "ConvParams", "ConvGemmOp", "ConvGemmParams", "GemmOp", "GemmParams", "GemmGemmOp", "GemmGemmParams", "PointwiseOp", "PointwiseParams", "ReductionOp", "ReductionParams",
           "ScaledGemmOp", "ScaledGemmParams",
           "register_op", "unregister_op"]
