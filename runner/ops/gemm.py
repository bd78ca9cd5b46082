"""Matrix multiply C = A·B, plain (2-d) or batched (3-d).

Logical shapes: a (m, k), b (k, n), c (m, n); with batch >= 1 every tensor
gets a leading batch dim (even batch = 1, which is a 3-d bmm, not a 2-d mm).

Kernel contract: f(a, b) -> c, tensors on the device in the case's dtype;
batched when a and b are 3-d.

Layouts "nn", "nt", "tn", "tt": the first letter is A's, the second B's; "t"
means the operand is stored transposed, i.e. the kernel receives the
transposed view of a contiguous (…, cols, rows) tensor, as a column-major
operand would arrive. The logical shapes and values do not change.

torch is imported when a case runs, so generating a suite stays fast.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..dtypes import DTYPES
from .base import ProductSumOp, Shape, frozen_mapping, require_int, stored_transposed

if TYPE_CHECKING:
    import torch

GEMM_LAYOUTS = ("nn", "nt", "tn", "tt")


@dataclass(frozen=True)
class GemmParams:
    m: int
    n: int
    k: int
    batch: int = 0  # 0: plain 2-d matmul; >= 1: 3-d batched tensors

    def __post_init__(self) -> None:
        for key in ("m", "n", "k"):
            require_int(key, getattr(self, key), 1)
        require_int("batch", self.batch, 0)

    @property
    def batch_dims(self) -> Shape:
        return (self.batch,) if self.batch else ()

    @property
    def a_shape(self) -> Shape:
        return (*self.batch_dims, self.m, self.k)

    @property
    def b_shape(self) -> Shape:
        return (*self.batch_dims, self.k, self.n)

    @property
    def c_shape(self) -> Shape:
        return (*self.batch_dims, self.m, self.n)

    def to_catalogue(self) -> dict[str, Any]:
        return {"m": self.m, "n": self.n, "k": self.k, **({"batch": self.batch} if self.batch else {})}

    def describe(self) -> str:
        return f"m={self.m} n={self.n} k={self.k}" + (f" batch={self.batch}" if self.batch else "")


class GemmOp(ProductSumOp):
    name = "gemm"
    dtypes = DTYPES
    directions = ("fwd",)
    layouts = GEMM_LAYOUTS
    param_names = ("m", "n", "k")
    optional_params = frozen_mapping({"batch": 0})
    # batch 0 is the runner's "no batch"; a catalogue leaves batch out for that, and a batch it writes counts
    # matrices (the generator's loader checks these minimums: key -> (minimum, hint)).
    catalogue_minimums = frozen_mapping({"batch": (1, "batch counts the matrices; leave it out for a plain 2-d gemm")})

    def __repr__(self) -> str:
        return "GemmOp(gemm)"

    @property
    def params_type(self) -> type:
        return GemmParams

    def _build_params(self, raw: Mapping[str, Any]) -> GemmParams:
        return GemmParams(m=require_int("m", raw["m"], 1), n=require_int("n", raw["n"], 1),
                          k=require_int("k", raw["k"], 1), batch=require_int("batch", raw["batch"], 0))

    def input_shapes(self, params: GemmParams, direction: str) -> dict[str, Shape]:
        return {"a": params.a_shape, "b": params.b_shape}

    def output_shape(self, params: GemmParams, direction: str) -> Shape:
        return params.c_shape

    def output_names(self, params: GemmParams, direction: str) -> tuple[str, ...]:
        return ("c",)

    def reduction_size(self, params: GemmParams, direction: str) -> int:
        return params.k

    def shape_class(self, params: GemmParams, direction: str) -> str:
        return "batched" if params.batch else ""

    def probe_params(self, params: GemmParams, direction: str) -> GemmParams:
        return GemmParams(m=32, n=32, k=256, batch=2 if params.batch else 0)

    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        transposed = layout[0 if name == "a" else 1] == "t"
        if not transposed:
            return tensor.contiguous()
        return stored_transposed(tensor)

    def default_kernel(self, direction: str) -> Callable[..., torch.Tensor]:
        return torch_gemm

    def call(self, kernel: Callable[..., torch.Tensor], direction: str, params: GemmParams,
             tensors: Mapping[str, torch.Tensor]) -> Any:
        return kernel(tensors["a"], tensors["b"])


def torch_gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    import torch  # here, not at the top: describing a gemm problem needs no torch

    return torch.matmul(a, b)
