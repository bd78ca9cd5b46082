"""An op's numerics: the torch half of an op, beside its torch-free spec (runner/ops/base.py).

The numerics, in the order a case uses them:

    adjust_inputs     (optional) shape the drawn values into the op's input kinds
    quantize_inputs   the drawn float64 values as the kernel's inputs
    arrange_inputs    how a layout stores each input (arrange, one tensor)
    default_kernel    torch's own implementation, following the kernel contract
    call              how a kernel is called (positional tensors, keyword geometry)
    reference         each output in float64 from the float64 inputs
    error_bound       each output's bound, composed of runner.bound's pieces
    probe_arithmetic  what a kernel's arithmetic is, on the spec's probe_params problem

Each family keeps its numerics in runner/ops/<family>/numerics.py; the spec names that class
(Op.numerics) and the registry builds it from the spec the first time a case runs the op.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterator, Mapping, TypeVar

import torch

from e2egen.runner.bound import ErrorBound, PartialsKind, product_sum_bound
from e2egen.runner.errors import ProblemError
from e2egen.runner.gemm_form import GemmForm
from e2egen.runner.inputs import round_to_format
from e2egen.runner.ops.base import Op, named_outputs

if TYPE_CHECKING:
    from e2egen.runner.arithmetic.model import Arithmetic
    from e2egen.runner.problem import Problem

Kernel = Callable[..., Any]
SpecT = TypeVar("SpecT", bound=Op)


class OpNumerics(ABC, Generic[SpecT]):
    """The torch side of one op; `spec` is the op it computes."""

    def __init__(self, spec: SpecT) -> None:
        self.spec = spec

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.name})"

    # -- inputs -----------------------------------------------------------------
    def adjust_inputs(self, params: Any, drawn: dict[str, torch.Tensor]) -> None:
        """Shape the drawn float64 values in place before they are rounded (an op's input kinds, such as
        attention's peaky or offset scores). By default the uniform draw stays as it is."""

    def quantize_inputs(self, params: Any, drawn: dict[str, torch.Tensor], formats: Mapping[str, str]) -> dict[str, torch.Tensor]:
        """The drawn float64 values as the kernel's inputs: by default each rounded once (nearest even) to its
        format. An op that quantizes (a scaled gemm: a shared scale per block, then the elements) overrides
        this; the reference then consumes exactly what it returns."""
        return {name: round_to_format(values, formats[name]) for name, values in drawn.items()}

    @abstractmethod
    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        """A logical tensor stored in the layout's memory order (same values, same logical shape)."""

    def arrange_inputs(self, params: Any, tensors: Mapping[str, torch.Tensor], layout: str) -> dict[str, torch.Tensor]:
        """Every kernel input as the kernel receives it: by default each stored by arrange; an op whose layouts
        need the problem's sizes (conv's that split the groups out) overrides this."""
        return {name: self.arrange(name, tensor, layout) for name, tensor in tensors.items()}

    @property
    def keeps_uniform_draw(self) -> bool:
        """Whether the drawn values reach the kernel only rounded to their formats (neither adjust_inputs nor
        quantize_inputs overridden): then an f32 draw serves the narrow formats (runner/inputs.py)."""
        own = type(self)
        return own.adjust_inputs is OpNumerics.adjust_inputs and own.quantize_inputs is OpNumerics.quantize_inputs

    # -- kernels ------------------------------------------------------------------
    @abstractmethod
    def default_kernel(self, direction: str) -> Kernel:
        """torch's own implementation, following the kernel contract."""

    @abstractmethod
    def call(self, kernel: Kernel, direction: str, params: Any, tensors: Mapping[str, torch.Tensor]) -> Any:
        """Call a kernel the way the contract says (positional tensors, keyword geometry)."""

    # -- reference and bound --------------------------------------------------------
    def reference(self, problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Every output in float64 from the float64 inputs, on their device.

        By default torch's own kernel run on float64 tensors (exact to float64 for the product-sum ops); an
        op whose torch kernel cannot run in float64 overrides this."""
        result = self.call(self.default_kernel(problem.direction), problem.direction, problem.params, inputs64)
        return named_outputs(problem.output_names, result, lambda text: ValueError(f"{self.spec.name} reference: {text}"))

    def error_bound(self, problem: Problem, inputs64: Mapping[str, torch.Tensor],
                    arithmetic: Arithmetic | None = None) -> Mapping[str, ErrorBound]:
        """Each output's per-element bound, composed from runner.bound's pieces.

        arithmetic: the kernel's measured arithmetic, for pieces that need more than the inputs when the
        kernel keeps partial sums (None: not measured)."""
        raise ProblemError("bound_ratio", None, f"op {self.spec.name} has no error model: choose other metrics")

    def reduction_partials(self, problem: Problem, inputs: Mapping[str, torch.Tensor],
                           kind: PartialsKind) -> Iterator[torch.Tensor] | None:
        """The partial sums of a "taps" or "samples" cut, in the documented reduction order, computed in the
        inputs' dtype (f32 or float64: bound.PartialSums covers each partial's own error); None where the op
        cannot cut its reduction that way."""
        return None

    # -- arithmetic probes (runner/arithmetic) --------------------------------------
    def probe_arithmetic(self, problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
        """The kernel's arithmetic measured on `problem` (the spec's probe_params problem). Called only for ops
        whose spec has probe_params."""
        raise ProblemError("op", self.spec.name, "has probe_params but no probe_arithmetic")

    # -- hooks added by the op families (each with its default) ----------------------
    def lowered(self, problem: Problem, inputs: Mapping[str, torch.Tensor]) -> GemmForm | None:
        """The op on these logical inputs written as one batched matrix product lhs @ rhs, its reduction in
        the op's documented order (runner/gemm_form.py): the `accumulate = k` reference, `e2egen explain`'s
        accumulator models and im2col kernels use it. None where the op has no such form."""
        return None


class ProductSumNumerics(OpNumerics[SpecT]):
    """The numerics of an op each of whose outputs sums products, then rounds (conv, gemm, scaled gemm)."""

    def error_bound(self, problem: Problem, inputs64: Mapping[str, torch.Tensor],
                    arithmetic: Arithmetic | None = None) -> Mapping[str, ErrorBound]:
        return {problem.primary_output: product_sum_bound(problem, inputs64, arithmetic)}


__all__ = ["Kernel", "OpNumerics", "ProductSumNumerics"]

