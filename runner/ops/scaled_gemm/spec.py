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
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from e2egen.runner.dtypes import FLOAT4, FLOAT8, FLOAT8_PAIRS, SCALE_DTYPES, operand_formats
from e2egen.runner.errors import ProblemError
from e2egen.runner.ops.scaled_gemm.scaling import PATTERNS, Blocks, operand_blocks
from e2egen.runner.ops.base import ProductSumOp, Shape, TensorSpec, frozen_mapping, require_int
from e2egen.runner.ops.product_sum.gemm import GEMM_LAYOUTS, GemmOp, check_out_dtype, stored_operand

if TYPE_CHECKING:
    import torch

SCALINGS = ("tensor", "rowwise", "blockwise", "mx")
DEFAULT_BLOCK = {"blockwise": 128, "mx": 32}
SCALED_DTYPES = (*FLOAT8, *FLOAT8_PAIRS, *FLOAT4)
SCALED_LAYOUTS = (*GEMM_LAYOUTS, *("".join(letters) for letters in itertools.product("nt", repeat=4)))
SCALE_NAMES = ("scale_a", "scale_b")


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
    scaling: str = "mx"
    block: int = 0  # 0: the scaling's default (DEFAULT_BLOCK); tensor and rowwise have none
    scale_a_dtype: str = ""  # "": e8m0 for mx, f32 otherwise
    scale_b_dtype: str = ""
    pattern: str = "random"
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


class ScaledGemmOp(ProductSumOp):
    name = "scaled_gemm"
    dtypes = SCALED_DTYPES
    directions = ("fwd",)
    layouts = SCALED_LAYOUTS
    param_names = ("m", "n", "k")
    optional_params = frozen_mapping({"batch": 0, "scaling": "mx", "block": 0, "scale_a_dtype": "", "scale_b_dtype": "",
                                      "pattern": "random", "out_dtype": ""})
    catalogue_minimums = GemmOp.catalogue_minimums
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

    def shared_rounding(self, params: ScaledGemmParams) -> str:
        if "f32" not in params.scale_formats:
            return ""  # e8m0 scales are powers of two: applying them is exact
        return ("an f32 scale product (sa·sb) may be rounded once and applied to every element of a tensor, "
                "row or block, so a correct kernel's errors may all lean one way")

    def largest_input(self, params: ScaledGemmParams, dtype: str) -> float:
        """The scales carry the magnitude: any range within f32's (a block's amax sets its scale)."""
        from e2egen.runner.dtypes import largest_finite

        return largest_finite("f32")

    def input_ranges(self, params: ScaledGemmParams, case_range: tuple[float, float]) -> Mapping[str, tuple[float, float]]:
        """The scales' draws are uniform in [0, 1): the structured patterns pick their scales from them."""
        return {"scale_a": (0.0, 1.0), "scale_b": (0.0, 1.0)}

    def quantize_inputs(self, params: ScaledGemmParams, drawn: dict[str, torch.Tensor],
                        formats: Mapping[str, str]) -> dict[str, torch.Tensor]:
        from e2egen.runner.inputs import store_exact
        from e2egen.runner.ops.scaled_gemm.scaling import quantized_operands

        values = quantized_operands(params.pattern, params.blocks, drawn, formats)
        return {name: store_exact(tensor, formats[name]) for name, tensor in values.items()}

    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        letters = layout if len(layout) == 4 else layout + "nt"
        return stored_operand(name, tensor, letters[("a", "b", "scale_a", "scale_b").index(name)] == "t")

    # -- kernels -----------------------------------------------------------------------------------
    def default_kernel(self, direction: str) -> Callable[..., torch.Tensor]:
        from e2egen.runner.ops.scaled_gemm.kernels import torch_scaled_gemm

        return torch_scaled_gemm

    def call(self, kernel: Callable[..., torch.Tensor], direction: str, params: ScaledGemmParams,
             tensors: Mapping[str, torch.Tensor]) -> Any:
        from e2egen.runner.dtypes import storage_dtype

        return kernel(tensors["a"], tensors["b"], tensors["scale_a"], tensors["scale_b"],
                      out_dtype=storage_dtype(params.output_format), scaling=params.scaling, block=params.block_size)

    # -- reference, bound, cost ------------------------------------------------------------------------
    def dequantized(self, params: ScaledGemmParams, inputs64: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(A ⊙ scale_a, B ⊙ scale_b) in float64 (exact)."""
        from e2egen.runner.ops.scaled_gemm.scaling import dequantized

        blocks = params.blocks
        return (dequantized(inputs64["a"], inputs64["scale_a"], blocks["a"]),
                dequantized(inputs64["b"], inputs64["scale_b"], blocks["b"]))

    def reference(self, problem: Any, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        import torch

        a, b = self.dequantized(problem.params, inputs64)
        return {"c": torch.matmul(a, b)}

    def error_bound(self, problem: Any, inputs64: Mapping[str, torch.Tensor], arithmetic: Any = None) -> Mapping[str, Any]:
        from e2egen.runner.ops.scaled_gemm.bound import scaled_gemm_bound

        return {"c": scaled_gemm_bound(problem, *self.dequantized(problem.params, inputs64))}

    def reduction_size(self, params: ScaledGemmParams, direction: str) -> int:
        return params.k

    def shape_class(self, params: ScaledGemmParams, direction: str) -> str:
        sa, sb = params.scale_formats
        parts = ("batched" if params.batch else "", f"{params.scaling}{params.block_size or ''}", f"{sa}-{sb}",
                 f"out-{params.output_format}")
        return "/".join(part for part in parts if part)

    def probe_params(self, params: ScaledGemmParams, direction: str) -> ScaledGemmParams:
        from dataclasses import replace

        return replace(params, m=32, n=32, k=256, batch=2 if params.batch else 0, pattern="random")

    def probe_arithmetic(self, problem: Any, kernel: Callable[..., Any], device: Any, label: str) -> Any:
        """The gemm probes on the kernel with every scale 1: what its products and accumulator do."""
        from e2egen.runner.ops.scaled_gemm.probes import probe_scaled_arithmetic

        return probe_scaled_arithmetic(problem, kernel, device, label)
