"""The normalisations: softmax, log_softmax (over one axis), layer_norm, rms_norm (over the trailing dims),
forward and backward; logsumexp (over one axis, forward and backward), softmax's log-normaliser; and group_norm and
batch_norm (over groups of channels, over the batch), forward and backward.

Catalogue parameters (runner/ops/normalization/params.py): `shape` (1 to 5 dims) and `offset` (default
0, a large common value added to every row of the input); softmax and log_softmax `axis` (one dim,
default -1); layer_norm and rms_norm `normalized_dims` (how many trailing dims are normalised, default
1), `eps` (default 1e-5 for layer_norm, 1e-6 for rms_norm, torch's), `affine` (default true: a weight,
and for layer_norm a bias, of the normalised shape).

Kernel contracts (tensors on the device in the case's dtype; outputs in it too, like torch):
    softmax, log_softmax  fwd      f(x, *, dim) -> y
    logsumexp             fwd      f(x, *, dim) -> y   (y without the dim: log Σ exp(x) over it)
                          bwd_data f(grad_y, x, *, dim) -> grad_x   (grad_y without the dim; grad_x = grad_y ·
                                   softmax(x) along it, as torch's autograd gives)
                          bwd_data f(grad_y, y, *, dim) -> grad_x   (y: the forward's output; for
                                   log_softmax its log-probabilities, as torch's _log_softmax_backward_data)
    layer_norm            fwd      f(x, weight, bias, *, normalized_shape, eps) -> y
                          bwd_data f(grad_y, x, weight, *, normalized_shape, eps) -> (grad_x, grad_weight, grad_bias)
    rms_norm              fwd      f(x, weight, *, normalized_shape, eps) -> y
                          bwd_data f(grad_y, x, weight, *, normalized_shape, eps) -> (grad_x, grad_weight)
    group_norm            fwd      f(x, weight, bias, *, groups, eps) -> y
                          bwd_data f(grad_y, x, weight, *, groups, eps) -> (grad_x, grad_weight, grad_bias)
    batch_norm            fwd      f(x, weight, bias, *, eps) -> y   (the batch's own statistics, as training)
                          bwd_data f(grad_y, x, weight, *, eps) -> (grad_x, grad_weight, grad_bias)
dim is >= 0; normalized_shape a tuple of ints. Without `affine`, weight and bias are None and the backward
returns grad_x alone; group_norm's and batch_norm's grad_weight and grad_bias have one value per channel. The variance is the biased one (divided by n), as torch's. group_norm and batch_norm
take x as (N, C, spatial...) (2 to 5 dims) with a weight and a bias of C each, and `groups` (dividing C;
default 1) for group_norm: group g holds channels g·C/G to (g+1)·C/G - 1, as torch.nn.functional.group_norm's.

Backward inputs: grad_y is drawn like any input; softmax's y is the softmax (log_softmax's the log_softmax)
of drawn logits, computed in float64 and then rounded, so that it is an output a forward pass can give.

Layouts: runner/ops/tensor_layouts.py (contiguous, strided, channels_last); weight and bias keep their own order.

This is the ops' torch-free spec; their numerics (input kinds, layouts, the kernel call, reference and bound)
are numerics.py, the float64 formulas normalization_math.py, the bounds bound.py, and the kernels (torch's,
alternates and planted bugs) kernels.py.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping, TypeVar

from e2egen.runner.dtypes import output_dtype_name
from e2egen.runner.ops.base import Direction, Op, Shape, TensorSpec, frozen_mapping
from e2egen.runner.ops.normalization.params import (BATCH_NORM_DEFAULTS, GROUP_NORM_DEFAULTS, LAYER_NORM_DEFAULTS,
                                                    RMS_NORM_DEFAULTS, SOFTMAX_DEFAULTS, ChannelNormParams, NormParams,
                                                    SoftmaxParams, build_channel_norm_params, build_norm_params,
                                                    build_softmax_params)
from e2egen.runner.ops.tensor_layouts import TENSOR_LAYOUTS, layout_problem_for_shape

NORMALIZATION_DIRECTIONS: tuple[Direction, ...] = ("fwd", "bwd_data")
PER_FEATURE_INPUTS = ("weight", "bias")  # of the normalised shape: they keep their own order in every layout
# Operations per element, for throughput figures: max, exp, sum, divide; mean, variance, scale and shift.
_SOFTMAX_FLOPS = {"fwd": 4, "bwd_data": 4}
_NORM_FLOPS = {"fwd": 8, "bwd_data": 12}
PROBE_ROWS, PROBE_ROW_LENGTH = 4, 64  # the eps probe's problem: each leading dim, each normalised dim at most
PROBE_SOFTMAX_ROW = 256  # the softmax compute-format probe's row length at most


TensorParamsT = TypeVar("TensorParamsT", SoftmaxParams, NormParams, ChannelNormParams)

class _TensorOp(Op[TensorParamsT]):
    """What the normalisations share: a shape-parameterised tensor, the tensor layouts, two directions."""

    directions = NORMALIZATION_DIRECTIONS
    layouts = TENSOR_LAYOUTS

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"

    def layout_params_problem(self, params: SoftmaxParams | NormParams, layout: str) -> str | None:
        return layout_problem_for_shape(layout, params.shape)

    def reduction_size(self, params: SoftmaxParams | NormParams, direction: str) -> int:
        return params.row_length

    def shared_rounding(self, params: SoftmaxParams | NormParams, direction: Direction = "fwd") -> str:
        return ("every element of a row shares the row's sum and its reciprocal (layer_norm, rms_norm: the mean and "
                "1/sigma): a correct kernel's few-ulp error there scales the whole row by one factor "
                "(docs/concepts/normalization-bound.md, \"bias_z\")")

    def outputs(self, params: SoftmaxParams | NormParams, direction: str, dtype: str) -> dict[str, TensorSpec]:
        shapes = self.output_shapes(params, direction)
        return {name: TensorSpec(shapes[name], output_dtype_name(dtype)) for name in self.output_names(params, direction)}

    def output_shape(self, params: SoftmaxParams | NormParams, direction: str) -> Shape:
        return params.shape

    def output_shapes(self, params: SoftmaxParams | NormParams, direction: str) -> dict[str, Shape]:
        return {name: params.shape for name in self.output_names(params, direction)}


# -- softmax, log_softmax -------------------------------------------------------------------------
class SoftmaxOp(_TensorOp[SoftmaxParams]):
    """softmax (log=False) or log_softmax (log=True) over `axis`."""

    param_names = ("shape",)
    optional_params = frozen_mapping(SOFTMAX_DEFAULTS)
    numerics = "e2egen.runner.ops.normalization.numerics:SoftmaxNumerics"

    def __init__(self, log: bool = False):
        self.log = log
        self.name = "log_softmax" if log else "softmax"

    @property
    def params_type(self) -> type:
        return SoftmaxParams

    def _build_params(self, raw: Mapping[str, Any]) -> SoftmaxParams:
        return build_softmax_params(raw)

    def input_shapes(self, params: SoftmaxParams, direction: str) -> dict[str, Shape]:
        return {"x": params.shape} if direction == "fwd" else {"grad_y": params.shape, "y": params.shape}

    def output_names(self, params: SoftmaxParams, direction: str) -> tuple[str, ...]:
        return ("y",) if direction == "fwd" else ("grad_x",)

    def flops(self, params: SoftmaxParams, direction: str) -> int:
        return _SOFTMAX_FLOPS[direction] * math.prod(params.shape)

    def probe_params(self, params: SoftmaxParams, direction: str) -> SoftmaxParams | None:
        """The compute-format probe's problem (runner/ops/normalization/probes.py), forward only; the row-sum probe
        (row_sum_probe.py) makes its own long row from it."""
        return softmax_probe_params(params, direction)

    def unprobed_reason(self, params: SoftmaxParams, direction: str) -> str:
        return f"{self.name}'s backward has no probes"


def softmax_probe_params(params: SoftmaxParams, direction: str) -> SoftmaxParams | None:
    """Forward only: the same rank and axis, at most PROBE_ROWS along each other dim and PROBE_SOFTMAX_ROW along the
    axis; no offset."""
    if direction != "fwd":
        return None
    shape = tuple(min(size, PROBE_SOFTMAX_ROW if dim == params.axis else PROBE_ROWS)
                  for dim, size in enumerate(params.shape))
    return replace(params, shape=shape, offset=0.0)


class LogSumExpOp(_TensorOp[SoftmaxParams]):
    """logsumexp over `axis`: y = m + log Σ exp(x - m), one value per row (the axis removed); its backward
    grad_x = grad_y · softmax(x) along the axis."""

    name = "logsumexp"
    param_names = ("shape",)
    optional_params = frozen_mapping(SOFTMAX_DEFAULTS)
    numerics = "e2egen.runner.ops.normalization.numerics:LogSumExpNumerics"

    def __repr__(self) -> str:
        return "LogSumExpOp(logsumexp)"

    @property
    def params_type(self) -> type:
        return SoftmaxParams

    def _build_params(self, raw: Mapping[str, Any]) -> SoftmaxParams:
        return build_softmax_params(raw)

    def probe_params(self, params: SoftmaxParams, direction: str) -> SoftmaxParams | None:
        """The row-sum probe's starting problem (row_sum_probe.py), forward only."""
        return softmax_probe_params(params, direction)

    def unprobed_reason(self, params: SoftmaxParams, direction: str) -> str:
        return "logsumexp's backward has no probes"

    def shared_rounding(self, params: SoftmaxParams, direction: Direction = "fwd") -> str:
        if direction == "fwd":
            return ""  # one output per row: no rounding is shared between outputs
        return ("every element of a row's gradient shares the row's sum of exp (or its log): a correct kernel's "
                "few-ulp error there scales the whole row by one factor (docs/concepts/normalization-bound.md, \"bias_z\")")

    def input_shapes(self, params: SoftmaxParams, direction: str) -> dict[str, Shape]:
        if direction == "fwd":
            return {"x": params.shape}
        return {"grad_y": self.output_shape(params, "fwd"), "x": params.shape}

    def output_names(self, params: SoftmaxParams, direction: str) -> tuple[str, ...]:
        return ("y",) if direction == "fwd" else ("grad_x",)

    def output_shape(self, params: SoftmaxParams, direction: str) -> Shape:
        if direction != "fwd":
            return params.shape
        return tuple(size for dim, size in enumerate(params.shape) if dim != params.axis)

    def output_shapes(self, params: SoftmaxParams, direction: str) -> dict[str, Shape]:
        return {self.output_names(params, direction)[0]: self.output_shape(params, direction)}

    def flops(self, params: SoftmaxParams, direction: str) -> int:
        return 3 * math.prod(params.shape)  # max, exp, sum


# -- layer_norm, rms_norm ---------------------------------------------------------------------------
class NormOp(_TensorOp[NormParams]):
    """layer_norm (centered=True: subtracts the mean, has a bias) or rms_norm (centered=False)."""

    param_names = ("shape",)
    numerics = "e2egen.runner.ops.normalization.numerics:NormNumerics"

    def __init__(self, centered: bool = True):
        self.centered = centered
        self.name = "layer_norm" if centered else "rms_norm"
        self.optional_params = frozen_mapping(LAYER_NORM_DEFAULTS if centered else RMS_NORM_DEFAULTS)

    @property
    def params_type(self) -> type:
        return NormParams

    def _build_params(self, raw: Mapping[str, Any]) -> NormParams:
        return build_norm_params(raw)

    def _per_feature(self, params: NormParams, direction: str) -> tuple[str, ...]:
        if not params.affine:
            return ()
        return PER_FEATURE_INPUTS if self.centered and direction == "fwd" else ("weight",)

    def input_shapes(self, params: NormParams, direction: str) -> dict[str, Shape]:
        main = {"x": params.shape} if direction == "fwd" else {"grad_y": params.shape, "x": params.shape}
        return {**main, **{name: params.normalized_shape for name in self._per_feature(params, direction)}}

    def output_names(self, params: NormParams, direction: str) -> tuple[str, ...]:
        if direction == "fwd":
            return ("y",)
        if not params.affine:
            return ("grad_x",)
        return ("grad_x", "grad_weight", "grad_bias") if self.centered else ("grad_x", "grad_weight")

    def output_shapes(self, params: NormParams, direction: str) -> dict[str, Shape]:
        return {name: params.shape if name in ("y", "grad_x") else params.normalized_shape
                for name in self.output_names(params, direction)}

    def flops(self, params: NormParams, direction: str) -> int:
        return _NORM_FLOPS[direction] * math.prod(params.shape)

    def probe_params(self, params: NormParams, direction: str) -> NormParams:
        """The eps probe's problem (runner/ops/normalization/probes.py): the same rank, normalised dims, eps and
        affine; at most PROBE_ROWS rows of at most PROBE_ROW_LENGTH elements each dim; no offset."""
        leading = len(params.shape) - params.normalized_dims
        shape = tuple(min(size, PROBE_ROWS if dim < leading else PROBE_ROW_LENGTH) for dim, size in enumerate(params.shape))
        return replace(params, shape=shape, offset=0.0)


# -- group_norm, batch_norm ----------------------------------------------------------------------------
class ChannelNormOp(_TensorOp[ChannelNormParams]):
    """group_norm (grouped=True: per sample and group of channels) or batch_norm (per channel, over the batch),
    forward and backward; a weight and a bias per channel (affine)."""

    param_names = ("shape",)
    numerics = "e2egen.runner.ops.normalization.numerics:ChannelNormNumerics"

    def __init__(self, grouped: bool):
        self.grouped = grouped
        self.name = "group_norm" if grouped else "batch_norm"
        self.optional_params = frozen_mapping(GROUP_NORM_DEFAULTS if grouped else BATCH_NORM_DEFAULTS)

    @property
    def params_type(self) -> type:
        return ChannelNormParams

    def _build_params(self, raw: Mapping[str, Any]) -> ChannelNormParams:
        return build_channel_norm_params(raw, self.grouped)

    def input_shapes(self, params: ChannelNormParams, direction: str) -> dict[str, Shape]:
        per_channel = (PER_FEATURE_INPUTS if direction == "fwd" else ("weight",)) if params.affine else ()
        main = {"x": params.shape} if direction == "fwd" else {"grad_y": params.shape, "x": params.shape}
        return {**main, **{name: (params.channels,) for name in per_channel}}

    def output_names(self, params: ChannelNormParams, direction: str) -> tuple[str, ...]:
        if direction == "fwd":
            return ("y",)
        return ("grad_x", "grad_weight", "grad_bias") if params.affine else ("grad_x",)

    def output_shapes(self, params: ChannelNormParams, direction: str) -> dict[str, Shape]:
        return {name: params.shape if name in ("y", "grad_x") else (params.channels,)
                for name in self.output_names(params, direction)}

    def flops(self, params: ChannelNormParams, direction: str) -> int:
        return _NORM_FLOPS[direction] * math.prod(params.shape)

    def probe_params(self, params: ChannelNormParams, direction: str) -> ChannelNormParams:
        """The eps probe's problem (runner/ops/normalization/probes.py): at most PROBE_ROWS samples, 4 channels a
        group (group_norm; batch_norm: at most 2·PROBE_ROWS channels), 8 positions each spatial dim; no offset."""
        channels = (params.groups * min(params.channels // params.groups, 4) if params.groups is not None
                    else min(params.channels, 2 * PROBE_ROWS))
        spatial = tuple(min(size, 8) for size in params.shape[2:])
        return replace(params, shape=(min(params.shape[0], PROBE_ROWS), channels, *spatial), offset=0.0)


NORMALIZATION_OPS = (SoftmaxOp(log=False), SoftmaxOp(log=True), LogSumExpOp(), NormOp(centered=True),
                     NormOp(centered=False), ChannelNormOp(grouped=True), ChannelNormOp(grouped=False))
