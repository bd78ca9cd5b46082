"""The catalogue parameters of the normalisations: softmax and log_softmax over one axis, layer_norm and
rms_norm over the trailing dims, group_norm and batch_norm over channels' groups and the batch
(runner/ops/normalization/spec.py has the ops and their kernel contracts).

Every normalisation takes `shape` (1 to 5 dims) and `offset` (default 0): a large common value added to
the input so that a kernel without the max subtraction overflows (softmax) or one computing the variance
as E[x²] - mean² loses it to cancellation (layer_norm). Each row gets offset·(1 + 5 % of a value drawn for
it), so that the rounding of the large term differs from row to row instead of biasing a correct kernel.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Mapping

from e2egen.runner.errors import ProblemError
from e2egen.runner.ops.base import require_int
from e2egen.runner.ops.tensor_layouts import parse_axes, parse_shape

SOFTMAX_DEFAULTS = {"axis": -1, "offset": 0.0}
LAYER_NORM_DEFAULTS = {"normalized_dims": 1, "eps": 1e-5, "affine": True, "offset": 0.0}
RMS_NORM_DEFAULTS = {"normalized_dims": 1, "eps": 1e-6, "affine": True, "offset": 0.0}
GROUP_NORM_DEFAULTS = {"groups": 1, "eps": 1e-5, "affine": True, "offset": 0.0}
BATCH_NORM_DEFAULTS = {"eps": 1e-5, "affine": True, "offset": 0.0}
OFFSET_SPREAD = 0.05  # each row's offset lies within 5 % of the catalogue's


def _finite_number(key: str, value: Any, minimum: float | None = None, exclusive: bool = False) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
        raise ProblemError(key, value, f"expected a finite number, got {value!r}")
    if minimum is not None and (value <= minimum if exclusive else value < minimum):
        raise ProblemError(key, value, f"must be {'>' if exclusive else '>='} {minimum:g}, got {value!r}")
    return float(value)


def _shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


@dataclass(frozen=True)
class SoftmaxParams:
    """softmax / log_softmax over `axis` (>= 0 once parsed) of a tensor of `shape`."""

    shape: tuple[int, ...]
    axis: int
    offset: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.axis < len(self.shape):
            raise ProblemError("axis", self.axis, f"expected a dim of shape {list(self.shape)}")

    @property
    def row_length(self) -> int:
        return self.shape[self.axis]

    def to_catalogue(self) -> dict[str, Any]:
        extra = {"offset": self.offset} if self.offset else {}
        return {"shape": list(self.shape), "axis": self.axis, **extra}

    def describe(self) -> str:
        return f"shape={_shape_text(self.shape)} axis={self.axis}" + (f" offset={self.offset:g}" if self.offset else "")


@dataclass(frozen=True)
class NormParams:
    """layer_norm / rms_norm over the last `normalized_dims` dims of a tensor of `shape`."""

    shape: tuple[int, ...]
    normalized_dims: int
    eps: float
    affine: bool = True
    offset: float = 0.0

    def __post_init__(self) -> None:
        if not 1 <= self.normalized_dims <= len(self.shape):
            raise ProblemError("normalized_dims", self.normalized_dims,
                               f"expected 1 to {len(self.shape)} (the rank of shape {list(self.shape)})")

    @property
    def normalized_shape(self) -> tuple[int, ...]:
        return self.shape[len(self.shape) - self.normalized_dims:]

    @property
    def row_length(self) -> int:
        return math.prod(self.normalized_shape)

    @property
    def rows(self) -> int:
        return math.prod(self.shape) // self.row_length

    def to_catalogue(self) -> dict[str, Any]:
        extra = {"offset": self.offset} if self.offset else {}
        return {"shape": list(self.shape), "normalized_dims": self.normalized_dims, "eps": self.eps,
                "affine": self.affine, **extra}

    def describe(self) -> str:
        return (f"shape={_shape_text(self.shape)} normalized={_shape_text(self.normalized_shape)} eps={self.eps:g}"
                + ("" if self.affine else " affine=false") + (f" offset={self.offset:g}" if self.offset else ""))


@dataclass(frozen=True)
class ChannelNormParams:
    """group_norm and batch_norm of x of `shape` (N, C, spatial...), 2 to 5 dims, with a weight and a bias per channel.
    group_norm (`groups` G, dividing C): one normalisation per sample and group of C/G channels, over those
    channels and the spatial dims. batch_norm (groups None): one per channel, over the batch and the spatial dims,
    with the batch's own statistics (training mode; no running statistics)."""

    shape: tuple[int, ...]
    groups: int | None
    eps: float
    affine: bool = True
    offset: float = 0.0

    def __post_init__(self) -> None:
        if len(self.shape) < 2:
            raise ProblemError("shape", list(self.shape), f"expected (N, C, spatial...): 2 to 5 dims, got {list(self.shape)}")
        if self.groups is not None and self.shape[1] % self.groups:
            raise ProblemError("groups", self.groups, f"must divide the {self.shape[1]} channels of shape {list(self.shape)}")

    @property
    def channels(self) -> int:
        return self.shape[1]

    @property
    def spatial(self) -> int:
        return math.prod(self.shape[2:])

    @property
    def row_length(self) -> int:
        """The elements each normalisation covers."""
        if self.groups is None:
            return self.shape[0] * self.spatial
        return self.channels // self.groups * self.spatial

    @property
    def rows(self) -> int:
        return self.channels if self.groups is None else self.shape[0] * self.groups

    def to_catalogue(self) -> dict[str, Any]:
        extra = {"offset": self.offset} if self.offset else {}
        groups = {} if self.groups is None else {"groups": self.groups}
        return {"shape": list(self.shape), **groups, "eps": self.eps, "affine": self.affine, **extra}

    def describe(self) -> str:
        return (f"shape={_shape_text(self.shape)}" + ("" if self.groups is None else f" groups={self.groups}")
                + f" eps={self.eps:g}" + ("" if self.affine else " affine=false")
                + (f" offset={self.offset:g}" if self.offset else ""))


def build_channel_norm_params(raw: Mapping[str, Any], grouped: bool) -> ChannelNormParams:
    shape = parse_shape("shape", raw["shape"])
    groups = require_int("groups", raw["groups"], 1) if grouped else None
    if not isinstance(raw["affine"], bool):
        raise ProblemError("affine", raw["affine"], f"expected true or false, got {raw['affine']!r}", (True, False))
    return ChannelNormParams(shape, groups, _finite_number("eps", raw["eps"], minimum=0.0, exclusive=True),
                             raw["affine"], _finite_number("offset", raw["offset"], minimum=0.0))


def build_softmax_params(raw: Mapping[str, Any]) -> SoftmaxParams:
    shape = parse_shape("shape", raw["shape"])
    axes = parse_axes("axis", raw["axis"], len(shape))
    if len(axes) != 1:
        raise ProblemError("axis", raw["axis"], f"softmax normalises over one dim, got {len(axes)}")
    return SoftmaxParams(shape, axes[0], _finite_number("offset", raw["offset"], minimum=0.0))


def build_norm_params(raw: Mapping[str, Any]) -> NormParams:
    shape = parse_shape("shape", raw["shape"])
    dims = require_int("normalized_dims", raw["normalized_dims"], 1)
    if dims > len(shape):
        raise ProblemError("normalized_dims", dims, f"expected 1 to {len(shape)} (the rank of shape {list(shape)})")
    if not isinstance(raw["affine"], bool):
        raise ProblemError("affine", raw["affine"], f"expected true or false, got {raw['affine']!r}", (True, False))
    return NormParams(shape, dims, _finite_number("eps", raw["eps"], minimum=0.0, exclusive=True), raw["affine"],
                      _finite_number("offset", raw["offset"], minimum=0.0))
