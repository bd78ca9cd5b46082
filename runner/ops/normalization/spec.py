"""The normalisations: softmax, log_softmax (over one axis), layer_norm, rms_norm (over the trailing dims),
forward and backward.

Catalogue parameters (runner/ops/normalization/params.py): `shape` (1 to 5 dims) and `offset` (default
0, a large common value added to every row of the input); softmax and log_softmax `axis` (one dim,
default -1); layer_norm and rms_norm `normalized_dims` (how many trailing dims are normalised, default
1), `eps` (default 1e-5 for layer_norm, 1e-6 for rms_norm, torch's), `affine` (default true: a weight,
and for layer_norm a bias, of the normalised shape).

Kernel contracts (tensors on the device in the case's dtype; outputs in it too, like torch):
    softmax, log_softmax  fwd      f(x, *, dim) -> y
                          bwd_data f(grad_y, y, *, dim) -> grad_x   (y: the forward's output; for
                                   log_softmax its log-probabilities, as torch's _log_softmax_backward_data)
    layer_norm            fwd      f(x, weight, bias, *, normalized_shape, eps) -> y
                          bwd_data f(grad_y, x, weight, *, normalized_shape, eps) -> (grad_x, grad_weight, grad_bias)
    rms_norm              fwd      f(x, weight, *, normalized_shape, eps) -> y
                          bwd_data f(grad_y, x, weight, *, normalized_shape, eps) -> (grad_x, grad_weight)
dim is >= 0; normalized_shape a tuple of ints. Without `affine`, weight and bias are None and the backward
returns grad_x alone. The variance is the biased one (divided by n), as torch's.

Backward inputs: grad_y is drawn like any input; softmax's y is the softmax (log_softmax's the log_softmax)
of drawn logits, computed in float64 and then rounded, so that it is an output a forward pass can give.

Layouts: runner/ops/tensor_layouts.py (contiguous, strided, channels_last); weight and bias keep their own order.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping

from e2egen.runner.ops.base import Op, Shape, TensorSpec, frozen_mapping
from e2egen.runner.ops.normalization.normalization_math import (add_row_offsets, from_softmax_rows, log_softmax_backward_float64,
                                 norm_backward_float64, norm_float64, norm_forward_float64, norm_rows,
                                 softmax_backward_float64, softmax_float64, softmax_rows)
from e2egen.runner.ops.normalization.params import (LAYER_NORM_DEFAULTS, RMS_NORM_DEFAULTS, SOFTMAX_DEFAULTS, NormParams, SoftmaxParams,
                                   build_norm_params, build_softmax_params)
from e2egen.runner.ops.tensor_layouts import TENSOR_LAYOUTS, arrange_tensor, layout_problem_for_shape

if TYPE_CHECKING:
    import torch

NORMALIZATION_DIRECTIONS = ("fwd", "bwd_data")
_PER_FEATURE = ("weight", "bias")
# Operations per element, for throughput figures: max, exp, sum, divide; mean, variance, scale and shift.
_SOFTMAX_FLOPS = {"fwd": 4, "bwd_data": 4}
_NORM_FLOPS = {"fwd": 8, "bwd_data": 12}


class _TensorOp(Op):
    """What the normalisations share: a shape-parameterised tensor, the tensor layouts, two directions."""

    directions = NORMALIZATION_DIRECTIONS
    layouts = TENSOR_LAYOUTS

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"

    def layout_params_problem(self, params: Any, layout: str) -> str | None:
        return layout_problem_for_shape(layout, params.shape)

    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        return arrange_tensor(tensor, layout, primary=name not in _PER_FEATURE)

    def reduction_size(self, params: Any, direction: str) -> int:
        return params.row_length

    def shared_rounding(self, params: Any) -> str:
        return ("every element of a row shares the row's sum and its reciprocal (layer_norm, rms_norm: the mean and "
                "1/sigma): a correct kernel's few-ulp error there scales the whole row by one factor "
                "(docs/normalization-bound.md, \"bias_z\")")

    def outputs(self, params: Any, direction: str, dtype: str) -> dict[str, TensorSpec]:
        from e2egen.runner.dtypes import output_dtype_name

        shapes = self.output_shapes(params, direction)
        return {name: TensorSpec(shapes[name], output_dtype_name(dtype)) for name in self.output_names(params, direction)}

    def output_shape(self, params: Any, direction: str) -> Shape:
        return params.shape

    def output_shapes(self, params: Any, direction: str) -> dict[str, Shape]:
        return {name: params.shape for name in self.output_names(params, direction)}


# -- softmax, log_softmax -------------------------------------------------------------------------
class SoftmaxOp(_TensorOp):
    """softmax (log=False) or log_softmax (log=True) over `axis`."""

    param_names = ("shape",)
    optional_params = frozen_mapping(SOFTMAX_DEFAULTS)

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
        import math

        return _SOFTMAX_FLOPS[direction] * math.prod(params.shape)

    def adjust_inputs(self, params: SoftmaxParams, drawn: dict[str, torch.Tensor]) -> None:
        """fwd: every row of x gets its offset. bwd: y becomes the (log_)softmax of the drawn logits."""
        if "x" in drawn:
            add_row_offsets(softmax_rows(drawn["x"], params), params.offset)
            return
        logits = softmax_rows(drawn["y"], params)
        add_row_offsets(logits, params.offset)
        rows = softmax_float64(logits)
        drawn["y"] = from_softmax_rows(rows.z if self.log else rows.y, params).contiguous()

    def default_kernel(self, direction: str) -> Callable[..., Any]:
        from e2egen.runner.ops import normalization_torch as kernels

        if direction == "fwd":
            return kernels.torch_log_softmax if self.log else kernels.torch_softmax
        return kernels.torch_log_softmax_backward if self.log else kernels.torch_softmax_backward

    def call(self, kernel: Callable[..., Any], direction: str, params: SoftmaxParams,
             tensors: Mapping[str, torch.Tensor]) -> Any:
        if direction == "fwd":
            return kernel(tensors["x"], dim=params.axis)
        return kernel(tensors["grad_y"], tensors["y"], dim=params.axis)

    def reference(self, problem: Any, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        params = problem.params
        if problem.direction == "fwd":
            rows = softmax_float64(softmax_rows(inputs64["x"], params))
            return {"y": from_softmax_rows(rows.z if self.log else rows.y, params)}
        grad, y = softmax_rows(inputs64["grad_y"], params), softmax_rows(inputs64["y"], params)
        backward = log_softmax_backward_float64 if self.log else softmax_backward_float64
        return {"grad_x": from_softmax_rows(backward(grad, y), params)}

    def error_bound(self, problem: Any, inputs64: Mapping[str, torch.Tensor], arithmetic: Any = None) -> Mapping[str, Any]:
        from e2egen.runner import normalization_bound as bounds

        if problem.direction == "fwd":
            forward = bounds.log_softmax_forward_bound if self.log else bounds.softmax_forward_bound
            return {"y": forward(problem, inputs64["x"])}
        backward = bounds.log_softmax_backward_bound if self.log else bounds.softmax_backward_bound
        return {"grad_x": backward(problem, inputs64["grad_y"], inputs64["y"])}


# -- layer_norm, rms_norm ---------------------------------------------------------------------------
class NormOp(_TensorOp):
    """layer_norm (centered=True: subtracts the mean, has a bias) or rms_norm (centered=False)."""

    param_names = ("shape",)

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
        return ("weight", "bias") if self.centered and direction == "fwd" else ("weight",)

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
        import math

        return _NORM_FLOPS[direction] * math.prod(params.shape)

    def adjust_inputs(self, params: NormParams, drawn: dict[str, torch.Tensor]) -> None:
        """Every row of x gets its offset (large means: layer_norm's variance must not cancel)."""
        add_row_offsets(norm_rows(drawn["x"], params), params.offset)

    def default_kernel(self, direction: str) -> Callable[..., Any]:
        from e2egen.runner.ops import normalization_torch as kernels

        if direction == "fwd":
            return kernels.torch_layer_norm if self.centered else kernels.torch_rms_norm
        return kernels.torch_layer_norm_backward if self.centered else kernels.torch_rms_norm_backward

    def call(self, kernel: Callable[..., Any], direction: str, params: NormParams,
             tensors: Mapping[str, torch.Tensor]) -> Any:
        geometry = {"normalized_shape": params.normalized_shape, "eps": params.eps}
        weight = tensors.get("weight")
        if direction == "fwd":
            if self.centered:
                return kernel(tensors["x"], weight, tensors.get("bias"), **geometry)
            return kernel(tensors["x"], weight, **geometry)
        return kernel(tensors["grad_y"], tensors["x"], weight, **geometry)

    def reference(self, problem: Any, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        params = problem.params
        weight = inputs64.get("weight")
        if problem.direction == "fwd":
            return {"y": norm_forward_float64(params, inputs64["x"], weight, inputs64.get("bias"), self.centered)}
        norm = norm_float64(norm_rows(inputs64["x"], params), params.eps, self.centered)
        grads = norm_backward_float64(norm, norm_rows(inputs64["grad_y"], params),
                                      None if weight is None else weight.reshape(-1))
        values = {"grad_x": grads.grad_x.reshape(params.shape),
                  "grad_weight": grads.grad_weight.reshape(params.normalized_shape),
                  "grad_bias": grads.grad_bias.reshape(params.normalized_shape)}
        return {name: values[name] for name in problem.output_names}

    def error_bound(self, problem: Any, inputs64: Mapping[str, torch.Tensor], arithmetic: Any = None) -> Mapping[str, Any]:
        from e2egen.runner import normalization_bound as bounds

        if problem.direction == "fwd":
            return {"y": bounds.norm_forward_bound(problem, inputs64, self.centered)}
        return bounds.norm_backward_bounds(problem, inputs64, self.centered)


NORMALIZATION_OPS = (SoftmaxOp(log=False), SoftmaxOp(log=True), NormOp(centered=True), NormOp(centered=False))
