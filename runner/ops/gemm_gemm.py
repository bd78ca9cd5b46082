"""Fused gemm→gemm: out = R_T(A·B)·C, the intermediate rounded to the case's element type T before the
second product (what rocMLIR's gemm_gemm kernels and reference do).

Logical shapes: a (m, k), b (k, n), c (n, o), out (m, o); with batch >= 1 every tensor gets a leading
batch dim.

Kernel contract: f(a, b, c) -> out, tensors on the device in the case's dtype; the kernel must round
A·B to that dtype before multiplying by C (a kernel that keeps it in f32 computes another function and
fails where the difference shows).

Layouts: three letters, A's, B's and C's, each "n" or "t" (stored transposed: the kernel receives the
transposed view of a contiguous tensor, as a column-major operand arrives), as rocMLIR's
--transA/B/C. The output comes back as a logical-shape tensor in any memory order.

torch is imported when a case runs, so generating a suite stays fast.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .base import Op, Shape, frozen_mapping, require_int, stored_transposed

if TYPE_CHECKING:
    import torch

GEMM_GEMM_LAYOUTS = tuple("".join(letters) for letters in itertools.product("nt", repeat=3))
_OPERANDS = ("a", "b", "c")


@dataclass(frozen=True)
class GemmGemmParams:
    m: int
    n: int
    k: int
    o: int
    batch: int = 0  # 0: plain 2-d; >= 1: 3-d batched tensors

    def __post_init__(self) -> None:
        for key in ("m", "n", "k", "o"):
            require_int(key, getattr(self, key), 1)
        require_int("batch", self.batch, 0)

    @property
    def batch_dims(self) -> Shape:
        return (self.batch,) if self.batch else ()

    def shapes(self) -> dict[str, Shape]:
        lead = self.batch_dims
        return {"a": (*lead, self.m, self.k), "b": (*lead, self.k, self.n), "c": (*lead, self.n, self.o)}

    @property
    def out_shape(self) -> Shape:
        return (*self.batch_dims, self.m, self.o)

    def to_catalogue(self) -> dict[str, Any]:
        return {"m": self.m, "n": self.n, "k": self.k, "o": self.o, **({"batch": self.batch} if self.batch else {})}

    def describe(self) -> str:
        return f"m={self.m} n={self.n} k={self.k} o={self.o}" + (f" batch={self.batch}" if self.batch else "")


class GemmGemmOp(Op):
    name = "gemm_gemm"
    directions = ("fwd",)
    layouts = GEMM_GEMM_LAYOUTS
    param_names = ("m", "n", "k", "o")
    optional_params = frozen_mapping({"batch": 0})
    catalogue_minimums = frozen_mapping({"batch": (1, "batch counts the matrices; leave it out for a plain 2-d gemm_gemm")})

    def __repr__(self) -> str:
        return "GemmGemmOp(gemm_gemm)"

    @property
    def params_type(self) -> type:
        return GemmGemmParams

    def _build_params(self, raw: Mapping[str, Any]) -> GemmGemmParams:
        return GemmGemmParams(**{key: require_int(key, raw[key], 0 if key == "batch" else 1)
                                 for key in ("m", "n", "k", "o", "batch")})

    def input_shapes(self, params: GemmGemmParams, direction: str) -> dict[str, Shape]:
        return params.shapes()

    def output_shape(self, params: GemmGemmParams, direction: str) -> Shape:
        return params.out_shape

    def reduction_size(self, params: GemmGemmParams, direction: str) -> int:
        return params.k + params.n

    def flops(self, params: GemmGemmParams, direction: str) -> int:
        rows = max(params.batch, 1) * params.m
        return 2 * rows * params.n * (params.k + params.o)

    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        if layout[_OPERANDS.index(name)] == "t":
            return stored_transposed(tensor)
        return tensor.contiguous()

    def default_kernel(self, direction: str) -> Callable[..., Any]:
        return torch_gemm_gemm

    def call(self, kernel: Callable[..., Any], direction: str, params: GemmGemmParams,
             tensors: Mapping[str, torch.Tensor]) -> Any:
        return kernel(tensors["a"], tensors["b"], tensors["c"])

    def reference(self, problem: Any, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        import torch

        from e2egen import metrics

        intermediate = metrics.round_to(torch.matmul(inputs64["a"], inputs64["b"]), problem.out_dtype)
        return {"out": torch.matmul(intermediate, inputs64["c"])}

    def error_bound(self, problem: Any, inputs64: Mapping[str, torch.Tensor], arithmetic: Any = None) -> Mapping[str, Any]:
        from ..chain_bound import gemm_gemm_bound

        return {"out": gemm_gemm_bound(problem, inputs64)}


def torch_gemm_gemm(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.matmul(torch.matmul(a, b), c)  # the first product comes back in the dtype: rounded
