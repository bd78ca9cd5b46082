"""The ops the catalogue can name, by name.

`register_op` adds an op written against the protocol in base.py (a team's own
fused op, or a test's); the built-in ones are always there.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from .attention import AttentionOp
from .attention_params import AttentionParams
from .base import Op, ProductSumOp, TensorSpec
from .conv import ConvOp, ConvParams
from .conv_gemm import ConvGemmOp, ConvGemmParams
from .gemm import GemmOp, GemmParams
from .gemm_gemm import GemmGemmOp, GemmGemmParams
from .normalization import NORMALIZATION_OPS
from .pointwise import POINTWISE_OPS, PointwiseOp, PointwiseParams
from .reductions import REDUCTION_OPS, ReductionOp, ReductionParams
from .scaled_gemm import ScaledGemmOp, ScaledGemmParams

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
