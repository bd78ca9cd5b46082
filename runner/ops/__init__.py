"""The ops the catalogue can name, by name."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from .base import Op
from .conv import ConvOp, ConvParams
from .gemm import GemmOp, GemmParams

OPS: Mapping[str, Op] = MappingProxyType({op.name: op for op in (ConvOp(1), ConvOp(2), ConvOp(3), GemmOp())})

__all__ = ["OPS", "Op", "ConvOp", "ConvParams", "GemmOp", "GemmParams"]
