"""Scaled operands: which block of an operand shares a scale, how scales are computed, and the structured
inputs whose results are exact.

An operand (…, rows, cols) is cut into blocks of (block_rows, block_cols) (spec.Blocks, by the spec's table
of scalings); the last block of a dim may be partial (K or M/N not a multiple of the block). Block (i, j)
shares the scale s[…, i, j]: the operand's value at (r, c) is element[r, c] · s[r // block_rows, c // block_cols].

Quantizing real data (`quantize`), per block with amax = max |x| over the block:

* e8m0 scales (OCP Microscaling v1.0, section 6.3): s = 2^(floor(log2 amax) - emax_elem), emax_elem the
  element format's largest exponent; amax 0 gives 2^-127. x / s may then exceed the element format's
  largest value (up to 2^(emax_elem + 1)): the element saturates to it, as the spec says.
* f32 scales (torch's and Transformer Engine's recipe): s = f32(amax / max_elem), 1 where amax is 0;
  x / s then lies within the element format's range up to f32's rounding, and saturation catches that.

The elements are round_elem(x / s) with saturation, to nearest even. The reference consumes exactly these
elements and scales.

`varied` is real data whose blocks differ in magnitude: each block of the uniform draw is multiplied by
2^e, e uniform in -4..4, before it is quantized, as activations and weights differ from block to block.
Uniform data give almost every block the same largest power of two, hence the same e8m0 scale, so a
kernel that reads another block's scale returns the same result there (docs/evidence/lowbit.md);
varied blocks get different scales and show it. The composed bound applies as for `random`.

Structured inputs (`pattern`) make every correct kernel's result exact, so a kernel must return it bit
for bit (after the one rounding to its output format): all scales are powers of two, the data are ones,
an identity, or real data quantized with power-of-two scales:

    identity_a       A = I (its scales 1), B real data:   C[i, j] = b[i, j] · sb of (i, j)
    identity_b       B = I, A real data:                  C[i, j] = a[i, j] · sa of (i, j)
    ones             A = B = 1, each block's scale 2^e, e uniform in -2..2
    double_a_scale   A = B = 1, every scale 1 but one block of A's, which is 2
    double_b_scale   the same in B

They catch what random data with loose tolerances misses: a scale read from the wrong block, a scale
applied per row where it is per column, a transposed scale tensor read as untransposed.
"""
from __future__ import annotations

from typing import Mapping

import torch

from e2egen import metrics
from e2egen.metrics.encoding import mx_scale_exponent
from e2egen.runner.ops.scaled_gemm.spec import PATTERNS, Blocks, Pattern

_ONES_EXPONENTS = 5  # "ones": scale exponents -2..2
_VARIED_EXPONENTS = 9  # "varied": block magnitudes 2^-4..2^4


def expand_scales(blocks: Blocks, scales: torch.Tensor) -> torch.Tensor:
    """Scales (…, R, C) -> one per element (…, rows, cols)."""
    full = scales.repeat_interleave(blocks.block_rows, dim=-2).repeat_interleave(blocks.block_cols, dim=-1)
    return full[..., :blocks.rows, :blocks.cols]


def block_amax(blocks: Blocks, values: torch.Tensor) -> torch.Tensor:
    """max |x| per block (…, R, C), float64; a partial block's missing elements count as 0."""
    scale_rows, scale_cols = blocks.scale_shape
    padded = values.new_zeros((*values.shape[:-2], scale_rows * blocks.block_rows, scale_cols * blocks.block_cols))
    padded[..., :blocks.rows, :blocks.cols] = values.abs()
    per_block = padded.reshape(*values.shape[:-2], scale_rows, blocks.block_rows, scale_cols, blocks.block_cols)
    return per_block.amax(dim=(-3, -1))


def scales_for(amax: torch.Tensor, element_fmt: str, scale_fmt: str, *, power_of_two: bool = False) -> torch.Tensor:
    """Each block's scale (float64) from its amax, as the module docstring says; `power_of_two` rounds an f32
    scale up to a power of two (structured inputs: every product then exact)."""
    if scale_fmt == "e8m0":
        return torch.ldexp(torch.ones_like(amax), mx_scale_exponent(amax, element_fmt))
    largest = metrics.get_format(element_fmt).max
    scales = torch.where(amax > 0, amax / largest, 1.0)
    if power_of_two:
        _, exponent = torch.frexp(scales)
        scales = torch.where(scales == torch.ldexp(torch.full_like(scales, 0.5), exponent), scales,
                             torch.ldexp(torch.ones_like(scales), exponent))
        return scales
    rounded = metrics.round_to(scales, "f32")
    return torch.where(rounded > 0, rounded, 1.0)  # an amax below f32's range: any scale quantizes it to 0


def quantize(values: torch.Tensor, blocks: Blocks, element_fmt: str, scale_fmt: str, *,
             power_of_two: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(elements, scales) as float64 values of their formats: the elements rounded with saturation, once, in
    float64 (quantize_inputs then stores them without rounding again)."""
    scales = scales_for(block_amax(blocks, values), element_fmt, scale_fmt, power_of_two=power_of_two)
    return metrics.round_to(values / expand_scales(blocks, scales), element_fmt, saturate=True), scales


def dequantized(elements: torch.Tensor, scales: torch.Tensor, blocks: Blocks) -> torch.Tensor:
    """element · scale per element, float64 (exact: a product of at most 4 + 24 significant bits)."""
    return elements * expand_scales(blocks, scales)


def identity(shape: tuple[int, ...]) -> torch.Tensor:
    """(…, rows, cols) with ones on the main diagonal, float64."""
    rows, cols = shape[-2:]
    eye = torch.eye(rows, cols, dtype=torch.float64)
    return eye.expand(*shape).clone()


def exponent_scales(uniform: torch.Tensor) -> torch.Tensor:
    """Powers of two 2^e, e in -2..2, one per uniform draw in [0, 1) (the "ones" pattern's scales)."""
    exponents = (uniform * _ONES_EXPONENTS).floor().clamp(0, _ONES_EXPONENTS - 1) - _ONES_EXPONENTS // 2
    return torch.ldexp(torch.ones_like(uniform), exponents.to(torch.int64))


def one_doubled(uniform: torch.Tensor) -> torch.Tensor:
    """Scales of 1 except a 2 at the block of the largest draw (one per batch, the same everywhere)."""
    scales = torch.ones_like(uniform)
    flat = uniform.reshape(-1, uniform.shape[-2] * uniform.shape[-1])
    scales.view(flat.shape)[torch.arange(flat.shape[0]), flat.argmax(dim=1)] = 2.0
    return scales


def quantized_operands(pattern: Pattern, blocks: Mapping[str, Blocks], drawn: Mapping[str, torch.Tensor],
                       formats: Mapping[str, str]) -> dict[str, torch.Tensor]:
    """A scaled gemm's inputs (a, b, scale_a, scale_b) as float64 values of their formats, from the draws:
    real data quantized (`random`), or a structured pattern (module docstring)."""
    structured = pattern not in ("random", "varied")

    def real(name: str) -> tuple[torch.Tensor, torch.Tensor]:
        values = drawn[name]
        if pattern == "varied":
            exponents = (drawn[f"scale_{name}"] * _VARIED_EXPONENTS).floor().clamp(0, _VARIED_EXPONENTS - 1)
            values = values * expand_scales(blocks[name], torch.exp2(exponents - _VARIED_EXPONENTS // 2))
        return quantize(values, blocks[name], formats[name], formats[f"scale_{name}"], power_of_two=structured)

    def ones(name: str) -> torch.Tensor:
        return torch.ones_like(drawn[name])

    if pattern in ("random", "varied"):
        (a, scale_a), (b, scale_b) = real("a"), real("b")
    elif pattern == "identity_a":
        (b, scale_b) = real("b")
        a, scale_a = identity(tuple(drawn["a"].shape)), ones("scale_a")
    elif pattern == "identity_b":
        (a, scale_a) = real("a")
        b, scale_b = identity(tuple(drawn["b"].shape)), ones("scale_b")
    elif pattern == "ones":
        a, b = ones("a"), ones("b")
        scale_a, scale_b = exponent_scales(drawn["scale_a"]), exponent_scales(drawn["scale_b"])
    elif pattern == "double_a_scale":
        a, b, scale_a, scale_b = ones("a"), ones("b"), one_doubled(drawn["scale_a"]), ones("scale_b")
    elif pattern == "double_b_scale":
        a, b, scale_a, scale_b = ones("a"), ones("b"), ones("scale_a"), one_doubled(drawn["scale_b"])
    else:
        raise ValueError(f"unknown pattern {pattern!r}; valid: {', '.join(PATTERNS)}")
    return {"a": a, "b": b, "scale_a": scale_a, "scale_b": scale_b}
