"""Scaled matrix multiply: C = (A ⊙ scale_a) · (B ⊙ scale_b), low-bit elements, one scale per block.

Logical shapes: a (m, k), b (k, n), c (m, n), with a leading batch dim on every tensor when batch >= 1.
`scaling` says which elements share a scale (runner/ops/scaled_gemm/scaling.py cuts an operand into blocks):

    scaling     A's block     B's block     scale_a        scale_b
    tensor      (m, k)        (k, n)        (1, 1)         (1, 1)
    rowwise     (1, k)        (k, 1)        (m, 1)         (1, n)
    blockwise   (1, blk)      (blk, blk)    (m, ⌈k/blk⌉)    (⌈k/blk⌉, ⌈n/blk⌉)     blk 128 by default
    mx          (1, blk)      (blk, 1)      (m, ⌈k/blk⌉)    (⌈k/blk⌉, n)           blk 32 by default (OCP MX)

Scales are e8m0 (OCP MX's power-of-two scale, torch.float8_e8m0fnu) or f32: `scale_a_dtype` and
`scale_b_dtype`, e8m0 by default for mx and f32 otherwise. Elements: the fp8 dtypes and pairs, and f4e2m1
(packed two a byte along K, runner/fp4.py). Inputs are real quantized data: values drawn from the case's
range, each block's scale computed from its largest magnitude, the elements quantized with saturation
(runner/ops/scaled_gemm/scaling.py); `pattern` "varied" gives the blocks different magnitudes (so different scales), and
the other patterns choose structured inputs whose results are exact.

Kernel contract: f(a, b, scale_a, scale_b, *, out_dtype, scaling, block) -> c in out_dtype (a torch dtype;
`out_dtype` f32 by default, or bf16 / f16). Layouts: two letters for A and B as gemm's ("t": stored
transposed); the scales then lie with K contiguous (scale_a row-major, scale_b column-major, as MX
hardware reads them). Four letters set the scales' storage too: "nnnn" stores scale_b row-major
(rocMLIR's -transScaleB).

Verdict: random data gets the composed bound (runner/ops/scaled_gemm/bound.py); a structured pattern must come back
exact, rounded once to the output format.

This module is the op's torch-free description, with the block structure of its operands (`Blocks`); the
torch side (quantizing the inputs, the kernel call, reference, bound, probes) is
runner/ops/scaled_gemm/numerics.py.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from typing import Any, Literal, Mapping, get_args

from e2egen.runner.dtypes import (FLOAT4, FLOAT8, FLOAT8_PAIRS, SATURATING_OUT_DTYPES, SCALE_DTYPES, largest_finite,
                                 operand_formats)
from e2egen.runner.edge_data import EdgeData
from e2egen.runner.errors import ProblemError
from e2egen.runner.ops.base import Direction, ProductSumOp, Shape, TensorSpec, frozen_mapping, require_int
from e2egen.runner.ops.product_sum.gemm import GEMM_LAYOUTS, GemmOp, check_out_dtype

Scaling = Literal["tensor", "rowwise", "blockwise", "mx"]
SCALINGS: tuple[Scaling, ...] = get_args(Scaling)
# The inputs a case draws (runner/ops/scaled_gemm/scaling.py): real quantized data, or a structured pattern
Pattern = Literal["random", "varied", "identity_a", "identity_b", "ones", "double_a_scale", "double_b_scale"]
PATTERNS: tuple[Pattern, ...] = get_args(Pattern)
DEFAULT_BLOCK: Mapping[str, int] = frozen_mapping({"blockwise": 128, "mx": 32})
SCALED_DTYPES = (*FLOAT8, *FLOAT8_PAIRS, *FLOAT4)
SCALED_LAYOUTS = (*GEMM_LAYOUTS, *("".join(letters) for letters in itertools.product("nt", repeat=4)))
SCALE_NAMES = ("scale_a", "scale_b")


@dataclass(frozen=True)
class Blocks:
    """How an operand of (…, rows, cols) shares its scales: blocks of (block_rows, block_cols); the last block
    of a dim may be partial. runner/ops/scaled_gemm/scaling.py expands scales and reduces values by it."""

    rows: int
    cols: int
    block_rows: int
    block_cols: int

    @property
    def scale_shape(self) -> tuple[int, int]:
        return (math.ceil(self.rows / self.block_rows), math.ceil(self.cols / self.block_cols))


def operand_blocks(scaling: Scaling, block: int, m: int, n: int, k: int) -> dict[str, Blocks]:
    """A scaled gemm's block structure of A (m, k) and B (k, n), by input name: the module docstring's table
    of scalings."""
    a_block, b_block = {"tensor": ((m, k), (k, n)), "rowwise": ((1, k), (k, 1)),
                        "blockwise": ((1, block), (block, block)), "mx": ((1, block), (block, 1))}[scaling]
    return {"a": Blocks(m, k, *a_block), "b": Blocks(k, n, *b_block)}


def _choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ProblemError.unknown(key, value, choices)
    return value


@dataclass(frozen=True)
class ScaledGemmParams:
    m: int
    n: int
    k: int
    batch: int = 0
    scaling: Scaling = "mx"
    block: int = 0  # 0: the scaling's default (DEFAULT_BLOCK); tensor and rowwise have none
    scale_a_dtype: str = ""  # "": e8m0 for mx, f32 otherwise
    scale_b_dtype: str = ""
    pattern: Pattern = "random"
    out_dtype: str = ""  # "": f32

    def __post_init__(self) -> None:
        for key in ("m", "n", "k"):
            require_int(key, getattr(self, key), 1)
        require_int("batch", self.batch, 0)
        _choice("scaling", self.scaling, SCALINGS)
        require_int("block", self.block, 0)
        if self.block and self.scaling not in DEFAULT_BLOCK:
            raise ProblemError("block", self.block, f"{self.scaling} scaling has no block size; leave block out")
        for key in ("scale_a_dtype", "scale_b_dtype"):
            if getattr(self, key):
                _choice(key, getattr(self, key), SCALE_DTYPES)
        _choice("pattern", self.pattern, PATTERNS)
        check_out_dtype(self.out_dtype)
        if self.out_dtype in SATURATING_OUT_DTYPES:  # an fp8 output would need its own output scale
            raise ProblemError("out_dtype", self.out_dtype, f"scaled_gemm writes f32, bf16 or f16, not "
                               f"{self.out_dtype}: an fp8 output needs an output scale, which its contract lacks",
                               ("f32", "bf16", "f16"))

    @property
    def block_size(self) -> int:
        return self.block or DEFAULT_BLOCK.get(self.scaling, 0)

    @property
    def scale_formats(self) -> tuple[str, str]:
        default = "e8m0" if self.scaling == "mx" else "f32"
        return self.scale_a_dtype or default, self.scale_b_dtype or default

    @property
    def output_format(self) -> str:
        return self.out_dtype or "f32"

    @property
    def batch_dims(self) -> Shape:
        return (self.batch,) if self.batch else ()

    @property
    def blocks(self) -> dict[str, Blocks]:
        """Each operand's block structure (runner/ops/scaled_gemm/scaling.py), by input name."""
        return operand_blocks(self.scaling, self.block_size, self.m, self.n, self.k)

    def to_catalogue(self) -> dict[str, Any]:
        optional = {"batch": self.batch, "scaling": self.scaling, "block": self.block, "scale_a_dtype": self.scale_a_dtype,
                    "scale_b_dtype": self.scale_b_dtype, "pattern": self.pattern, "out_dtype": self.out_dtype}
        defaults = ScaledGemmOp.optional_params
        return {"m": self.m, "n": self.n, "k": self.k, **{key: value for key, value in optional.items() if value != defaults[key]}}

    def describe(self) -> str:
        sa, sb = self.scale_formats
        text = f"m={self.m} n={self.n} k={self.k}" + (f" batch={self.batch}" if self.batch else "")
        text += f" {self.scaling}" + (f"{self.block_size}" if self.block_size else "") + f" scales={sa},{sb}"
        text += (f" pattern={self.pattern}" if self.pattern != "random" else "") + f" out={self.output_format}"
        return text


class ScaledGemmOp(ProductSumOp[ScaledGemmParams]):
    name = "scaled_gemm"
    numerics = "e2egen.runner.ops.scaled_gemm.numerics:ScaledGemmNumerics"
    dtypes = SCALED_DTYPES
    directions = ("fwd",)
    layouts = SCALED_LAYOUTS
    param_names = ("m", "n", "k")
    optional_params = frozen_mapping({"batch": 0, "scaling": "mx", "block": 0, "scale_a_dtype": "", "scale_b_dtype": "",
                                      "pattern": "random", "out_dtype": ""})
    catalogue_minimums = frozen_mapping({
        **GemmOp.catalogue_minimums,
        "block": (1, "block is the number of k values sharing a scale; leave it out for the scaling's default "
                     f"({', '.join(f'{s} {b}' for s, b in DEFAULT_BLOCK.items())})"),
    })
    torch_kernel_widens = False  # its default kernel takes the fp8 tensors (torch._scaled_mm where torch has it)

    def __repr__(self) -> str:
        return "ScaledGemmOp(scaled_gemm)"

    @property
    def params_type(self) -> type:
        return ScaledGemmParams

    def _build_params(self, raw: Mapping[str, Any]) -> ScaledGemmParams:
        return ScaledGemmParams(**{key: raw[key] for key in (*self.param_names, *self.optional_params)})

    # -- tensors ---------------------------------------------------------------------------------
    def input_shapes(self, params: ScaledGemmParams, direction: str) -> dict[str, Shape]:
        blocks = params.blocks
        batch = params.batch_dims
        return {"a": (*batch, params.m, params.k), "b": (*batch, params.k, params.n),
                "scale_a": (*batch, *blocks["a"].scale_shape), "scale_b": (*batch, *blocks["b"].scale_shape)}

    def output_shape(self, params: ScaledGemmParams, direction: str) -> Shape:
        return (*params.batch_dims, params.m, params.n)

    def output_names(self, params: ScaledGemmParams, direction: str) -> tuple[str, ...]:
        return ("c",)

    def bound_magnitude_inputs(self, params: ScaledGemmParams, direction: str) -> tuple[str, ...]:
        return ()  # low-bit codes and scales: its bound multiplies their decoded products

    def outputs(self, params: ScaledGemmParams, direction: str, dtype: str) -> dict[str, TensorSpec]:
        return {"c": TensorSpec(self.output_shape(params, direction), params.output_format)}

    def input_formats(self, params: ScaledGemmParams, direction: str, dtype: str) -> dict[str, str]:
        first, second = operand_formats(dtype)
        scale_a, scale_b = params.scale_formats
        return {"a": first, "b": second, "scale_a": scale_a, "scale_b": scale_b}

    def shared_rounding(self, params: ScaledGemmParams, direction: Direction = "fwd") -> str:
        if "f32" not in params.scale_formats:
            return ""  # e8m0 scales are powers of two: applying them is exact
        return ("an f32 scale product (sa·sb) may be rounded once and applied to every element of a tensor, "
                "row or block, so a correct kernel's errors may all lean one way")

    def edge_data(self, params: ScaledGemmParams, direction: str, dtype: str) -> EdgeData | None:
        """Random data quantized block by block reaches every format's largest value already (a block's amax sets its
        scale); what uniform data never gives is blocks of different scales, so the edges case draws pattern
        "varied". None where the config's pattern is varied already or structured, and for one tensor scale."""
        if params.pattern != "random" or params.scaling == "tensor":
            return None
        return EdgeData(-1.0, 1.0, "uniform", frozen_mapping({"pattern": "varied"}))  # blocks of magnitudes 2^-4..2^4

    def largest_input(self, params: ScaledGemmParams, dtype: str) -> float:
        """The scales carry the magnitude: any range within f32's (a block's amax sets its scale)."""
        return largest_finite("f32")

    def input_ranges(self, params: ScaledGemmParams, case_range: tuple[float, float]) -> Mapping[str, tuple[float, float]]:
        """The scales' draws are uniform in [0, 1): the structured patterns pick their scales from them."""
        return {"scale_a": (0.0, 1.0), "scale_b": (0.0, 1.0)}

    def reduction_size(self, params: ScaledGemmParams, direction: str) -> int:
        return params.k

    def shape_class(self, params: ScaledGemmParams, direction: str) -> str:
        sa, sb = params.scale_formats
        parts = ("batched" if params.batch else "", f"{params.scaling}{params.block_size or ''}", f"{sa}-{sb}",
                 f"out-{params.output_format}")
        return "/".join(part for part in parts if part)

    def probe_params(self, params: ScaledGemmParams, direction: str) -> ScaledGemmParams:
        """gemm's probes run on this problem with every scale 1 (runner/ops/scaled_gemm/probes.py)."""
        return replace(params, m=32, n=32, k=256, batch=2 if params.batch else 0, pattern="random")
