"""Matrix multiply C = A·B, plain (2-d) or batched (3-d).

Logical shapes: a (m, k), b (k, n), c (m, n); with batch >= 1 every tensor
gets a leading batch dim (even batch = 1, which is a 3-d bmm, not a 2-d mm).

Kernel contract: f(a, b) -> c, tensors on the device in the case's dtype;
batched when a and b are 3-d.

Layouts "nn", "nt", "tn", "tt": the first letter is A's, the second B's; "t"
means the operand is stored transposed, i.e. the kernel receives the
transposed view of a contiguous (…, cols, rows) tensor, as a column-major
operand would arrive. The logical shapes and values do not change.

fp4 (f4e2m1) operands arrive packed two a byte along K (runner/fp4.py): A (…, m, k/2),
B (…, k/2, n), row- or column-major by the layout letter. `out_dtype` (f32, bf16, f16, f8e4m3fn, f8e5m2; fp8
and fp4 only, f32 by default) asks for the output in that format: the kernel is then called f(a, b, out_dtype=…)
with the torch dtype.

This module is the spec (no torch); torch's kernel is in kernels.py, the numerics in numerics.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping

from e2egen.runner.dtypes import DTYPES, INTEGER_DTYPES, OUT_DTYPES, SATURATING_OUT_DTYPES, is_low_bit
from e2egen.runner.errors import ProblemError
from e2egen.runner.ops.base import ProductSumOp, Shape, frozen_mapping, require_int

GemmLayout = Literal["nn", "nt", "tn", "tt"]
GEMM_LAYOUTS: tuple[GemmLayout, ...] = ("nn", "nt", "tn", "tt")


@dataclass(frozen=True)
class GemmParams:
    m: int
    n: int
    k: int
    batch: int = 0  # 0: plain 2-d matmul; >= 1: 3-d batched tensors
    out_dtype: str = ""  # "": the dtype's own output format

    def __post_init__(self) -> None:
        for key in ("m", "n", "k"):
            require_int(key, getattr(self, key), 1)
        require_int("batch", self.batch, 0)
        check_out_dtype(self.out_dtype)

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
        return {"m": self.m, "n": self.n, "k": self.k, **({"batch": self.batch} if self.batch else {}),
                **({"out_dtype": self.out_dtype} if self.out_dtype else {})}

    def describe(self) -> str:
        return (f"m={self.m} n={self.n} k={self.k}" + (f" batch={self.batch}" if self.batch else "")
                + (f" out={self.out_dtype}" if self.out_dtype else ""))


def check_out_dtype(value: Any) -> str:
    if value != "" and value not in OUT_DTYPES:
        raise ProblemError.unknown("out_dtype", value, OUT_DTYPES)
    return value


def probe_out_dtype(out_dtype: str) -> str:
    """The output format the probes call the kernel with: the case's, but f32 for an fp8 output, whose 2 or 3
    mantissa bits could not show an accumulator's width (the accumulator is the kernel's, the conversion its
    epilogue's)."""
    return "f32" if out_dtype in SATURATING_OUT_DTYPES else out_dtype


def out_dtype_problem(out_dtype: str, dtype: str) -> str | None:
    """Why `out_dtype` cannot go with the case dtype (None when it can): only low-bit float gemms choose."""
    if out_dtype and (not is_low_bit(dtype) or dtype in INTEGER_DTYPES):
        return f"out_dtype applies to fp8 and fp4 dtypes (their tensor cores write f32, bf16 or f16); {dtype} writes its own format"
    return None


class GemmOp(ProductSumOp[GemmParams]):
    name = "gemm"
    numerics = "e2egen.runner.ops.product_sum.numerics:GemmNumerics"
    dtypes = DTYPES
    directions = ("fwd",)
    layouts = GEMM_LAYOUTS
    param_names = ("m", "n", "k")
    optional_params = frozen_mapping({"batch": 0, "out_dtype": ""})
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
                          k=require_int("k", raw["k"], 1), batch=require_int("batch", raw["batch"], 0),
                          out_dtype=check_out_dtype(raw["out_dtype"]))

    def dtype_params_problem(self, params: GemmParams, dtype: str) -> str | None:
        return out_dtype_problem(params.out_dtype, dtype)


    def input_shapes(self, params: GemmParams, direction: str) -> dict[str, Shape]:
        return {"a": params.a_shape, "b": params.b_shape}

    def output_shape(self, params: GemmParams, direction: str) -> Shape:
        return params.c_shape

    def output_names(self, params: GemmParams, direction: str) -> tuple[str, ...]:
        return ("c",)

    def reduction_size(self, params: GemmParams, direction: str) -> int:
        return params.k

    def shape_class(self, params: GemmParams, direction: str) -> str:
        parts = ("batched" if params.batch else "", f"out-{params.out_dtype}" if params.out_dtype else "")
        return "/".join(part for part in parts if part)

    def probe_params(self, params: GemmParams, direction: str) -> GemmParams:
        return GemmParams(m=32, n=32, k=256, batch=2 if params.batch else 0, out_dtype=probe_out_dtype(params.out_dtype))

    def lowered_dims(self, params: GemmParams, direction: str) -> tuple[int, int, int, int]:
        return (max(params.batch, 1), params.m, params.k, params.n)

    def output_dim_names(self, params: GemmParams, direction: str) -> tuple[str, ...]:
        return (("batch",) if params.batch else ()) + ("m", "n")
