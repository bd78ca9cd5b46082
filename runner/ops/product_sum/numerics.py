"""The product-sum ops' numerics (torch): how conv's and gemm's layouts store their inputs, how a kernel
is called, the float64 reference, the partial sums of a per-tap or per-sample cut, the lowered form, and
the arithmetic probes (probes.py); the bound is ProductSumNumerics' (runner/bound.py's product-sum bound).
The specs are conv.py and gemm.py.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Iterator, Mapping

import torch

from e2egen.runner.bound import PartialsKind
from e2egen.runner.arithmetic.model import Arithmetic
from e2egen.runner.dtypes import storage_dtype
from e2egen.runner.gemm_form import GemmForm
from e2egen.runner.gemm_operands import stored_operand
from e2egen.runner.ops.numerics import Kernel, ProductSumNumerics, SpecT
from e2egen.runner.ops.product_sum import conv_layouts
from e2egen.runner.ops.product_sum.conv import CONV_LAYOUTS, ConvOp, ConvParams
from e2egen.runner.ops.product_sum.conv_depth import by_depth_is_faster, conv3d_by_depth
from e2egen.runner.ops.product_sum.conv_taps import bwd_data_tap_partials, tap_partial
from e2egen.runner.ops.product_sum.gemm import GemmOp, GemmParams
from e2egen.runner.ops.product_sum.kernels import TORCH_CONV_KERNELS, torch_gemm, with_out_dtype
from e2egen.runner.ops.product_sum.lowering import lower
from e2egen.runner.ops.product_sum.probes import probe_arithmetic
from e2egen.runner.problem import Problem

def channels_last(tensor: torch.Tensor) -> torch.Tensor:
    """Store a (N, C, *spatial) tensor with C fastest; the logical shape is unchanged."""
    if tensor.dim() == 4:
        return tensor.contiguous(memory_format=torch.channels_last)
    if tensor.dim() == 5:
        return tensor.contiguous(memory_format=torch.channels_last_3d)
    # torch has no memory format for 3-d tensors: a transposed view of (N, L, C) storage.
    return tensor.movedim(1, -1).contiguous().movedim(-1, 1)


class _ProductSumCommon(ProductSumNumerics[SpecT]):
    """What conv and gemm share: the product-sum probes and lowering.py's form."""

    def probe_arithmetic(self, problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
        """Every product-sum probe (probes.py) on the probe problem. Raises the runner's KernelFailure / Skip
        if the kernel fails."""
        return probe_arithmetic(problem, kernel, device, label)

    def lowered(self, problem: Problem, inputs: Mapping[str, torch.Tensor]) -> GemmForm:
        return lower(problem, inputs)


class ConvNumerics(_ProductSumCommon[ConvOp]):
    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        if layout in CONV_LAYOUTS:
            return channels_last(tensor) if layout == "nhwc" else tensor.contiguous()
        if conv_layouts.splits_groups(layout):
            raise ValueError(f"layout {layout} splits the groups out: its tensors need the group count "
                             "(arrange_inputs)")
        return conv_layouts.arrange(name, tensor, layout, self.spec.spatial_dims, groups=1)

    def arrange_inputs(self, params: ConvParams, tensors: Mapping[str, torch.Tensor],
                       layout: str) -> dict[str, torch.Tensor]:
        if not conv_layouts.splits_groups(layout):
            return super().arrange_inputs(params, tensors, layout)
        return {name: conv_layouts.arrange(name, t, layout, self.spec.spatial_dims, params.groups)
                for name, t in tensors.items()}

    def default_kernel(self, direction: str) -> Kernel:
        return with_out_dtype(TORCH_CONV_KERNELS[direction])

    def call(self, kernel: Kernel, direction: str, params: ConvParams, tensors: Mapping[str, torch.Tensor]) -> Any:
        # Tensors one rank up from the logical one come from a layout that splits the groups out (arrange_inputs).
        grouped = any(t.dim() == self.spec.spatial_dims + 3 for t in tensors.values())
        shape_of = (functools.partial(conv_layouts.grouped_shape, groups=params.groups) if grouped
                    else lambda name, shape: shape)
        keywords = dict(params.geometry)
        if params.out_dtype:
            keywords["out_dtype"] = storage_dtype(params.out_dtype)
        if direction == "fwd":
            result = kernel(tensors["x"], tensors["w"], **keywords)
        elif direction == "bwd_data":
            result = kernel(tensors["dy"], tensors["w"], input_shape=shape_of("dx", params.x_shape), **keywords)
        else:
            result = kernel(tensors["x"], tensors["dy"], weight_shape=shape_of("dw", params.w_shape), **keywords)
        if not grouped:
            return result
        (name,) = self.spec.output_names(params, direction)
        expected = shape_of(name, self.spec.output_shape(params, direction))
        got = tuple(result.shape) if hasattr(result, "shape") else type(result).__name__
        if got != expected:
            raise ValueError(f"returned {got}, expected {name} in its grouped shape {expected} (the layout splits "
                             "the groups out)")
        return conv_layouts.ungrouped(name, result)

    def reference(self, problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """torch's conv on the float64 inputs; a 3-d one on the CPU as 2-d convs per depth tap where that is
        faster (conv_depth). Also the bound's Σ|x|·|w| in f32 (magnitude.widened_sum)."""
        by_depth = self._by_depth_taps(problem.direction, problem.params, inputs64)
        if by_depth is not None:
            (name,) = self.spec.output_names(problem.params, problem.direction)
            return {name: by_depth}
        return super().reference(problem, inputs64)

    def reduction_partials(self, problem: Problem, inputs: Mapping[str, torch.Tensor],
                           kind: PartialsKind) -> Iterator[torch.Tensor] | None:
        # The partials keep the inputs' dtype: a case's out_dtype (fp8 convs with bf16 outputs) would round
        # f32 partials to its format on the way out of torch's conv (with_out_dtype).
        params, direction = dataclasses.replace(problem.params, out_dtype=""), problem.direction
        kernel = self.default_kernel(direction)
        if kind == "samples" and direction == "bwd_weight":
            samples = ({"x": inputs["x"][i:i + 1], "dy": inputs["dy"][i:i + 1]} for i in range(params.n))
            return (self._sample_weight_gradient(kernel, params, sample) for sample in samples)
        if kind == "taps" and direction != "bwd_weight":
            window = math.prod(params.kernel)
            if direction == "bwd_data":  # its reduction runs over the flipped kernel (lowering.py): last tap first
                return bwd_data_tap_partials(params, inputs, range(window - 1, -1, -1))
            return (tap_partial(direction, params, inputs, t) for t in range(window))
        return None

    def _sample_weight_gradient(self, kernel: Kernel, params: ConvParams,
                                sample: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """One sample's weight gradient, as the reference would compute it for a batch of one (a 3-d one by
        depth taps: torch's CPU conv3d unfolds one sample's windows 1.8–3.7× slower)."""
        by_depth = self._by_depth_taps("bwd_weight", dataclasses.replace(params, n=1), sample)
        return by_depth if by_depth is not None else self.call(kernel, "bwd_weight", params, sample)

    def _by_depth_taps(self, direction: str, params: ConvParams, tensors: Mapping[str, torch.Tensor]) -> torch.Tensor | None:
        """A 3-d convolution on the CPU as 2-d convolutions per depth tap, where that is faster than torch's
        conv3d (conv_depth.by_depth_is_faster); None elsewhere (torch's own convolution then runs)."""
        if self.spec.spatial_dims != 3 or any(t.device.type != "cpu" for t in tensors.values()):
            return None
        if not by_depth_is_faster(params, direction, next(iter(tensors.values())).dtype):
            return None
        return conv3d_by_depth(direction, params, tensors)


class GemmNumerics(_ProductSumCommon[GemmOp]):
    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        return stored_operand(name, tensor, layout[0 if name == "a" else 1] == "t")

    def default_kernel(self, direction: str) -> Kernel:
        return torch_gemm

    def reference(self, problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A·B in float64 (whatever out_dtype the kernel writes)."""
        return {"c": torch_gemm(inputs64["a"], inputs64["b"])}

    def call(self, kernel: Kernel, direction: str, params: GemmParams, tensors: Mapping[str, torch.Tensor]) -> Any:
        if params.out_dtype:
            return kernel(tensors["a"], tensors["b"], out_dtype=storage_dtype(params.out_dtype))
        return kernel(tensors["a"], tensors["b"])


__all__ = ["ConvNumerics", "GemmNumerics", "channels_last"]
