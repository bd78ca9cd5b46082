"""The op registry: the ops a catalogue can name, each a torch-free spec paired with its numerics.

Specs are imported here (no torch); an op's numerics (runner/ops/<family>/numerics.py) are imported the
first time `numerics_of` is asked for them, when a case runs: the one deferred import of the runner, so
`e2egen gen` never loads torch. `register_op` adds a team's own op (a spec and its numerics).
"""
from __future__ import annotations

import importlib
from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping

from e2egen.runner.ops.attention.params import AttentionParams
from e2egen.runner.ops.attention.spec import AttentionOp
from e2egen.runner.ops.base import Op, ProductSumOp, TensorSpec
from e2egen.runner.ops.chains.conv_gemm import ConvGemmOp, ConvGemmParams
from e2egen.runner.ops.chains.gemm_gemm import GemmGemmOp, GemmGemmParams
from e2egen.runner.ops.pointwise.spec import PointwiseOp, PointwiseParams
from e2egen.runner.ops.product_sum.conv import ConvOp, ConvParams
from e2egen.runner.ops.product_sum.gemm import GemmOp, GemmParams
from e2egen.runner.ops.reductions.spec import ReductionOp, ReductionParams
from e2egen.runner.ops.scaled_gemm.spec import ScaledGemmOp, ScaledGemmParams

from e2egen.runner.ops.normalization import spec as normalization
from e2egen.runner.ops.pointwise import spec as pointwise
from e2egen.runner.ops.reductions import spec as reductions

if TYPE_CHECKING:
    from e2egen.runner.ops.numerics import OpNumerics

# The built-in ops, one line an op (or a family's list of ops), in the order `e2egen` lists them.
_BUILT_IN: tuple[Op, ...] = (
    ConvOp(1), ConvOp(2), ConvOp(3),
    GemmOp(),
    ScaledGemmOp(),
    AttentionOp(),
    GemmGemmOp(),
    ConvGemmOp(),
    *pointwise.POINTWISE_OPS,
    *reductions.REDUCTION_OPS,
    reductions.CUMSUM_OP,
    *normalization.NORMALIZATION_OPS,
)
_REGISTRY: dict[str, Op] = {op.name: op for op in _BUILT_IN}
_REGISTERED_NUMERICS: dict[str, OpNumerics] = {}
_LOADED_NUMERICS: dict[str, OpNumerics] = {}
OPS: Mapping[str, Op] = MappingProxyType(_REGISTRY)


def numerics_of(op: str | Op) -> OpNumerics:
    """The numerics of a registered op (by name or spec), built from its spec on first use."""
    name = op if isinstance(op, str) else op.name
    known = _REGISTERED_NUMERICS.get(name) or _LOADED_NUMERICS.get(name)
    if known is not None:
        return known
    spec = _REGISTRY[name]
    module_name, _, class_name = spec.numerics.partition(":")
    if not class_name:
        raise ValueError(f"op {name!r} names no numerics (Op.numerics = 'package.module:Class') and none was registered")
    numerics = getattr(importlib.import_module(module_name), class_name)(spec)
    _LOADED_NUMERICS[name] = numerics
    return numerics


def register_op(op: Op, numerics: OpNumerics | None = None) -> None:
    """Make `op` nameable in catalogues and problems, computed by `numerics` (or by the class its spec names
    in Op.numerics); a name already taken is a ValueError."""
    if not isinstance(op, Op):
        raise TypeError(f"expected an Op, got {type(op).__name__}")
    if op.name in _REGISTRY:
        raise ValueError(f"an op named {op.name!r} is already registered")
    _REGISTRY[op.name] = op
    if numerics is not None:
        _REGISTERED_NUMERICS[op.name] = numerics


def unregister_op(name: str) -> None:
    """Remove an op `register_op` added (built-in ops stay)."""
    if any(op.name == name for op in _BUILT_IN):
        raise ValueError(f"{name!r} is a built-in op")
    _REGISTRY.pop(name, None)
    _REGISTERED_NUMERICS.pop(name, None)
    _LOADED_NUMERICS.pop(name, None)


__all__ = ["OPS", "Op", "ProductSumOp", "TensorSpec", "AttentionOp", "AttentionParams", "ConvOp", "ConvParams", "ConvGemmOp", "ConvGemmParams", "GemmOp", "GemmParams", "GemmGemmOp", "GemmGemmParams", "PointwiseOp", "PointwiseParams", "ReductionOp", "ReductionParams",
           "ScaledGemmOp", "ScaledGemmParams",
           "numerics_of", "register_op", "unregister_op"]
