"""The normalisations' numerics (the torch half of runner/ops/normalization/spec.py): their input kinds (offset
rows, backward inputs that a forward pass can give), how a layout stores each input, the kernel call under
the contracts, the float64 reference (normalization_math.py), the bounds (bound.py) and layer_norm's and
rms_norm's eps probe (probes.py)."""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping, TypeVar

import torch

from e2egen.runner.arithmetic.model import Arithmetic
from e2egen.runner.bound import ErrorBound
from e2egen.runner.ops.normalization import channel_kernels, kernels
from e2egen.runner.ops.normalization.bound import (channel_norm_backward_bounds, channel_norm_bound, logsumexp_backward_bound, log_softmax_backward_bound, log_softmax_forward_bound,
                                                   logsumexp_bound,
                                                   norm_backward_bounds, norm_forward_bound, softmax_backward_bound,
                                                   softmax_forward_bound)
from e2egen.runner.ops.normalization.normalization_math import (add_row_offsets, channel_norm_rows, channel_values_by_row,
                                                                from_channel_norm_rows, from_softmax_rows,
                                                                log_softmax_backward_float64, norm_backward_float64,
                                                                norm_float64, norm_forward_float64, norm_rows,
                                                                softmax_backward_float64, softmax_float64, softmax_rows)
from e2egen.runner.ops.normalization.params import ChannelNormParams, NormParams, SoftmaxParams
from e2egen.runner.ops.normalization.probes import probe_compute_format, probe_eps
from e2egen.runner.ops.normalization.row_sum_probe import probe_row_sum
from e2egen.runner.ops.normalization.spec import PER_FEATURE_INPUTS, ChannelNormOp, LogSumExpOp, NormOp, SoftmaxOp
from e2egen.runner.ops.numerics import Kernel, OpNumerics
from e2egen.runner.ops.tensor_layouts import arrange_tensor
from e2egen.runner.problem import Problem

NormalizationSpec = TypeVar("NormalizationSpec", SoftmaxOp, NormOp, ChannelNormOp)


class _TensorNumerics(OpNumerics[NormalizationSpec]):
    """What the normalisations share: the tensor layouts, where weight and bias keep their own order."""

    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        return arrange_tensor(tensor, layout, primary=name not in PER_FEATURE_INPUTS)


# -- softmax, log_softmax -------------------------------------------------------------------------
class SoftmaxNumerics(_TensorNumerics[SoftmaxOp]):
    def adjust_inputs(self, params: SoftmaxParams, drawn: dict[str, torch.Tensor]) -> None:
        """fwd: every row of x gets its offset. bwd: y becomes the (log_)softmax of the drawn logits."""
        if "x" in drawn:
            add_row_offsets(softmax_rows(drawn["x"], params), params.offset)
            return
        logits = softmax_rows(drawn["y"], params)
        add_row_offsets(logits, params.offset)
        rows = softmax_float64(logits)
        drawn["y"] = from_softmax_rows(rows.z if self.spec.log else rows.y, params).contiguous()

    def default_kernel(self, direction: str) -> Kernel:
        if direction == "fwd":
            return kernels.torch_log_softmax if self.spec.log else kernels.torch_softmax
        return kernels.torch_log_softmax_backward if self.spec.log else kernels.torch_softmax_backward

    def call(self, kernel: Kernel, direction: str, params: SoftmaxParams,
             tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
        if direction == "fwd":
            return kernel(tensors["x"], dim=params.axis)
        return kernel(tensors["grad_y"], tensors["y"], dim=params.axis)

    def reference(self, problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        params = problem.params
        if problem.direction == "fwd":
            rows = softmax_float64(softmax_rows(inputs64["x"], params))
            return {"y": from_softmax_rows(rows.z if self.spec.log else rows.y, params)}
        grad, y = softmax_rows(inputs64["grad_y"], params), softmax_rows(inputs64["y"], params)
        backward = log_softmax_backward_float64 if self.spec.log else softmax_backward_float64
        return {"grad_x": from_softmax_rows(backward(grad, y), params)}

    def error_bound(self, problem: Problem, inputs64: Mapping[str, torch.Tensor],
                    arithmetic: Arithmetic | None = None) -> Mapping[str, ErrorBound]:
        if problem.direction == "fwd":
            forward = log_softmax_forward_bound if self.spec.log else softmax_forward_bound
            return {"y": forward(problem, inputs64["x"])}
        backward = log_softmax_backward_bound if self.spec.log else softmax_backward_bound
        return {"grad_x": backward(problem, inputs64["grad_y"], inputs64["y"])}

    def probe_arithmetic(self, problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
        return with_row_sum(probe_compute_format(problem, kernel, device, label), problem, kernel, device, label)


class LogSumExpNumerics(_TensorNumerics[LogSumExpOp]):
    def probe_arithmetic(self, problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
        return with_row_sum(Arithmetic(probed_with=problem.describe()), problem, kernel, device, label)

    def adjust_inputs(self, params: SoftmaxParams, drawn: dict[str, torch.Tensor]) -> None:
        add_row_offsets(softmax_rows(drawn["x"], params), params.offset)

    def default_kernel(self, direction: str) -> Kernel:
        return kernels.torch_logsumexp if direction == "fwd" else kernels.f32_logsumexp_backward

    def call(self, kernel: Kernel, direction: str, params: SoftmaxParams,
             tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
        if direction == "fwd":
            return kernel(tensors["x"], dim=params.axis)
        return kernel(tensors["grad_y"], tensors["x"], dim=params.axis)

    def reference(self, problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        params = problem.params
        rows = softmax_float64(softmax_rows(inputs64["x"], params))
        if problem.direction == "fwd":
            return {"y": (rows.row_max + rows.log_sum).squeeze(-1).contiguous()}
        grad_rows = inputs64["grad_y"].unsqueeze(-1)  # the rows' order: softmax_rows moves the axis last
        return {"grad_x": from_softmax_rows(grad_rows * rows.y, params).contiguous()}

    def error_bound(self, problem: Problem, inputs64: Mapping[str, torch.Tensor],
                    arithmetic: Arithmetic | None = None) -> Mapping[str, ErrorBound]:
        if problem.direction == "fwd":
            return {"y": logsumexp_bound(problem, inputs64["x"])}
        return {"grad_x": logsumexp_backward_bound(problem, inputs64["grad_y"], inputs64["x"])}


# -- layer_norm, rms_norm ---------------------------------------------------------------------------
class NormNumerics(_TensorNumerics[NormOp]):
    def adjust_inputs(self, params: NormParams, drawn: dict[str, torch.Tensor]) -> None:
        """Every row of x gets its offset (large means: layer_norm's variance must not cancel)."""
        add_row_offsets(norm_rows(drawn["x"], params), params.offset)

    def default_kernel(self, direction: str) -> Kernel:
        if direction == "fwd":
            return kernels.torch_layer_norm if self.spec.centered else kernels.torch_rms_norm
        return kernels.torch_layer_norm_backward if self.spec.centered else kernels.torch_rms_norm_backward

    def call(self, kernel: Kernel, direction: str, params: NormParams,
             tensors: Mapping[str, torch.Tensor]) -> torch.Tensor | tuple[torch.Tensor, ...]:
        geometry = {"normalized_shape": params.normalized_shape, "eps": params.eps}
        weight = tensors.get("weight")
        if direction == "fwd":
            if self.spec.centered:
                return kernel(tensors["x"], weight, tensors.get("bias"), **geometry)
            return kernel(tensors["x"], weight, **geometry)
        return kernel(tensors["grad_y"], tensors["x"], weight, **geometry)

    def reference(self, problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        params, centered = problem.params, self.spec.centered
        weight = inputs64.get("weight")
        if problem.direction == "fwd":
            return {"y": norm_forward_float64(params, inputs64["x"], weight, inputs64.get("bias"), centered)}
        norm = norm_float64(norm_rows(inputs64["x"], params), params.eps, centered)
        grads = norm_backward_float64(norm, norm_rows(inputs64["grad_y"], params),
                                      None if weight is None else weight.reshape(-1))
        values = {"grad_x": grads.grad_x.reshape(params.shape),
                  "grad_weight": grads.grad_weight.reshape(params.normalized_shape),
                  "grad_bias": grads.grad_bias.reshape(params.normalized_shape)}
        return {name: values[name] for name in problem.output_names}

    def error_bound(self, problem: Problem, inputs64: Mapping[str, torch.Tensor],
                    arithmetic: Arithmetic | None = None) -> Mapping[str, ErrorBound]:
        if problem.direction == "fwd":
            return {"y": norm_forward_bound(problem, inputs64, self.spec.centered)}
        return norm_backward_bounds(problem, inputs64, self.spec.centered)

    def probe_arithmetic(self, problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
        return with_compute_format(probe_eps(problem, kernel, device, label), problem, kernel, device, label)


def with_compute_format(found: Arithmetic, problem: Problem, kernel: Kernel, device: torch.device,
                        label: str) -> Arithmetic:
    """`found` (the eps probe's) with the compute-format probe's finding, forward only."""
    if problem.direction != "fwd":
        return found
    compute = probe_compute_format(problem, kernel, device, label)
    return replace(found, compute=compute.compute, notes=(*found.notes, *compute.notes),
                   unexplained=(*found.unexplained, *compute.unexplained))


def with_row_sum(found: Arithmetic, problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
    """`found` with the row-sum probe's (row_sum_probe.py): its width as acc_bits where the row sum drops small weights,
    an outcome no rounding explains as unexplained."""
    reading = probe_row_sum(problem, kernel, device, label)
    return replace(found, acc_bits=reading.bits if reading.bits is not None else found.acc_bits,
                   acc_bits_exact=reading.bits is not None or found.acc_bits_exact, notes=(*found.notes, *reading.notes),
                   unexplained=(*found.unexplained, *reading.unexplained))


# -- group_norm, batch_norm ---------------------------------------------------------------------------
class ChannelNormNumerics(_TensorNumerics[ChannelNormOp]):
    def adjust_inputs(self, params: ChannelNormParams, drawn: dict[str, torch.Tensor]) -> None:
        """Every normalised group (group_norm) or channel (batch_norm) of x gets its offset."""
        if not params.offset:
            return
        rows = channel_norm_rows(drawn["x"], params).clone()
        add_row_offsets(rows, params.offset)
        drawn["x"] = from_channel_norm_rows(rows, params).contiguous()

    def default_kernel(self, direction: str) -> Kernel:
        if direction == "fwd":
            return channel_kernels.torch_group_norm if self.spec.grouped else channel_kernels.f32_batch_norm
        return channel_kernels.f32_group_norm_backward if self.spec.grouped else channel_kernels.f32_batch_norm_backward

    def call(self, kernel: Kernel, direction: str, params: ChannelNormParams,
             tensors: Mapping[str, torch.Tensor]) -> torch.Tensor | tuple[torch.Tensor, ...]:
        groups = {"groups": params.groups} if self.spec.grouped else {}
        if direction == "fwd":
            return kernel(tensors["x"], tensors.get("weight"), tensors.get("bias"), **groups, eps=params.eps)
        return kernel(tensors["grad_y"], tensors["x"], tensors.get("weight"), **groups, eps=params.eps)

    def reference(self, problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        params = problem.params
        norm = norm_float64(channel_norm_rows(inputs64["x"], params), params.eps, centered=True)
        weight = channel_values_by_row(inputs64["weight"], params) if "weight" in inputs64 else None
        if problem.direction != "fwd":
            grads = norm_backward_float64(norm, channel_norm_rows(inputs64["grad_y"], params), weight)
            other_dims = tuple(d for d in range(len(params.shape)) if d != 1)
            grad_y = inputs64["grad_y"]
            values = {"grad_x": from_channel_norm_rows(grads.grad_x, params),
                      "grad_weight": (grad_y * from_channel_norm_rows(norm.x_hat, params)).sum(dim=other_dims),
                      "grad_bias": grad_y.sum(dim=other_dims)}
            return {name: values[name] for name in problem.output_names}
        rows = norm.x_hat if weight is None else norm.x_hat * weight
        if "bias" in inputs64:
            rows = rows + channel_values_by_row(inputs64["bias"], params)
        return {"y": from_channel_norm_rows(rows, params)}

    def error_bound(self, problem: Problem, inputs64: Mapping[str, torch.Tensor],
                    arithmetic: Arithmetic | None = None) -> Mapping[str, ErrorBound]:
        if problem.direction != "fwd":
            return channel_norm_backward_bounds(problem, inputs64)
        return {"y": channel_norm_bound(problem, inputs64)}

    def probe_arithmetic(self, problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
        return with_compute_format(probe_eps(problem, kernel, device, label), problem, kernel, device, label)
