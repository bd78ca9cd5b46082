"""Scaled dot-product attention, forward: O = softmax(S) · V with S = scale · Q·Kᵀ (· score_scale + score_bias).

Logical shapes (whatever the layout):
    q (batch, heads_q, seq_q, head_dim_qk)     k (batch, heads_kv, seq_k, head_dim_qk)
    v (batch, heads_kv, seq_k, head_dim_v)     o (batch, heads_q, seq_q, head_dim_v)
    score_scale, score_bias (batch, heads_q, seq_q, seq_k), when asked for
    lse (batch, heads_q, seq_q), f32, when return_lse: log Σ_j exp(S_ij) over the allowed keys (natural log)
q head h uses kv head h // (heads_q / heads_kv) (MHA, GQA, MQA). Masks: params.py.

Kernel contract: f(q, k, v, *, scale, causal, align, window, kv_lengths, prefix_offset, score_scale,
score_bias, return_lse) -> o, or (o, lse) when return_lse. Every keyword is always passed:
scale a float; causal, return_lse bools; align "top-left" | "bottom-right"; window None or (left, right)
with -1 for an unbounded side; kv_lengths, prefix_offset None or an int64 tensor of `batch` entries on
the device; score_scale, score_bias None or a tensor in the case's dtype. A fully masked row must give
o = 0 and lse = -inf. A case with rocMLIR's sliding window (params.look_back) passes one more keyword,
look_back, an int W: keys before max(0, P[b] - W) are masked, P[b] the batch's last valid key.

Low-bit dtypes (docs/concepts/lowbit-attention.md):
- i8 is rocMLIR's quantized attention (params.quantized): q, k i8; v f16; the keywords quant_bias (i8)
  and quant_scale (f16), tensors of shape (1, 1, 1, 1), are passed too; score_scale and score_bias are
  f16; o and lse are f16. S = R16(R16(R16(R16(Q·Kᵀ - quant_bias) · quant_scale) · score_scale) +
  score_bias) with Q·Kᵀ exact in i32, softmax in f32, P in f16, P·V accumulated in f32.
- fp8 (f8e4m3fn, f8e5m2 and the FNUZ pair): q, k, v in the format; score_scale and score_bias f32; o
  and lse f32: products exact, sums in f32.

Layouts: "bhsd" stores q, k, v as their logical shapes; "bshd" stores each (batch, seq, heads, dim)
(the kernel receives the permuted view, logical shape unchanged). A suffix "-qt", "-kt", "-vt" (in
that order, any subset) stores that tensor with seq and dim exchanged in that order (bhsd-kt: batch,
heads, dim, seq, as rocMLIR's --transQ/K/V do, rocMLIR's default K; bshd-kt: batch, dim, heads, seq).

This is the op's torch-free spec, so generating a suite stays fast; its numerics (inputs, layouts, the
kernel call, reference and bound) are numerics.py, its probes probes.py, its kernels kernels.py (torch's)
and variants.py (alternates and planted bugs).
"""
from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any, Mapping

from e2egen.runner.dtypes import FLOAT8, FLOAT_DTYPES, INTEGER_DTYPES, element_size, largest_finite, output_dtype_name
from e2egen.runner.ops.attention.params import (KEY_INPUTS, OPTIONAL_PARAMS, AttentionParams, blocks_keys, build_params,
                                                chunk_rows, key_block_size)
from e2egen.runner.edge_data import EdgeData
from e2egen.runner.ops.base import Op, Shape, TensorSpec, frozen_mapping

TRANSPOSABLE = ("q", "k", "v")  # the inputs a layout may store with seq and dim exchanged
ATTENTION_LAYOUTS = tuple(
    base + "".join(f"-{name}t" for name, on in zip(TRANSPOSABLE, flags) if on)
    for base in ("bhsd", "bshd") for flags in itertools.product((False, True), repeat=3))


def transposed_tensors(layout: str) -> set[str]:
    """Which of q, k, v the layout stores with (dim, seq) swapped."""
    return {part[0] for part in layout.split("-")[1:]}


def storage_order(name: str, layout: str) -> list[int]:
    """The logical dims (batch 0, heads 1, seq 2, dim 3) of q, k or v from outermost to innermost in memory:
    the base order (bhsd or bshd) with seq and dim exchanged for a transposed tensor (bshd-kt: b, d, h, s)."""
    order = [0, 1, 2, 3] if layout.startswith("bhsd") else [0, 2, 1, 3]
    if name in transposed_tensors(layout):
        order = [3 if dim == 2 else 2 if dim == 3 else dim for dim in order]
    return order


class AttentionOp(Op[AttentionParams]):
    name = "attention"
    directions = ("fwd",)
    layouts = ATTENTION_LAYOUTS
    param_names = ("seq_q", "seq_k", "head_dim_qk")
    optional_params = frozen_mapping(OPTIONAL_PARAMS)
    dtypes = (*FLOAT_DTYPES, *FLOAT8, *INTEGER_DTYPES)
    numerics = "e2egen.runner.ops.attention.numerics:AttentionNumerics"
    torch_kernel_widens = False  # its default kernel takes the i8 and fp8 tensors itself (kernels.py)

    def __repr__(self) -> str:
        return "AttentionOp(attention)"

    @property
    def params_type(self) -> type:
        return AttentionParams

    def _build_params(self, raw: Mapping[str, Any]) -> AttentionParams:
        return build_params(dict(raw))

    # -- tensors ------------------------------------------------------------------
    def input_shapes(self, params: AttentionParams, direction: str) -> dict[str, Shape]:
        return params.shapes()

    def output_shape(self, params: AttentionParams, direction: str) -> Shape:
        return params.out_shape

    def output_names(self, params: AttentionParams, direction: str) -> tuple[str, ...]:
        return ("o", "lse") if params.return_lse else ("o",)

    def outputs(self, params: AttentionParams, direction: str, dtype: str) -> dict[str, TensorSpec]:
        quantized = dtype in INTEGER_DTYPES  # rocMLIR writes o and lse of its quantized attention in f16
        specs = {"o": TensorSpec(params.out_shape, "f16" if quantized else output_dtype_name(dtype))}
        if params.return_lse:
            specs["lse"] = TensorSpec(params.lse_shape, "f16" if quantized else "f32")
        return specs

    def dtype_params_problem(self, params: AttentionParams, dtype: str) -> str | None:
        if dtype in INTEGER_DTYPES and not params.quantized:
            return ("i8 attention is rocMLIR's quantized attention (i8 Q and K, an i8 quant_bias and an f16 "
                    "quant_scale, f16 V and output): set quantized = true")
        if params.quantized and dtype not in INTEGER_DTYPES:
            return (f"quantized attention (quantized = true) runs in i8 only, not {dtype}; valid: i8 (exclude {dtype} "
                    "for this config, or give it a suite of its own)")
        return None

    def bound_magnitude_inputs(self, params: AttentionParams, direction: str) -> tuple[str, ...]:
        return ("q", "k", "v")  # |Q|·|K|ᵀ and the products with |V|; not the score tensors

    def streamed_inputs(self, params: AttentionParams, direction: str) -> tuple[str, ...]:
        return KEY_INPUTS if blocks_keys(params) else ()  # runner/ops/attention/key_blocks.py

    def input_formats(self, params: AttentionParams, direction: str, dtype: str) -> dict[str, str]:
        """i8 (quantized): Q, K and the quant bias i8, everything else f16 (rocMLIR's types); fp8: Q, K, V in
        the format, the score tensors f32; else every input in the dtype's format."""
        names = self.input_shapes(params, direction)
        if dtype in INTEGER_DTYPES:
            return {name: "i8" if name in ("q", "k", "quant_bias") else "f16" for name in names}
        if dtype in FLOAT8:
            return {name: dtype if name in TRANSPOSABLE else "f32" for name in names}
        return super().input_formats(params, direction, dtype)

    def edge_data(self, params: AttentionParams, direction: str, dtype: str) -> EdgeData | None:
        """fp8: the format's whole range (rows turn one-hot; V's codes reach the output). None for i8: rocMLIR's f16
        scores, Q·Kᵀ times an f16 quant scale, overflow long before Q and K reach i8's edges."""
        return None if dtype in INTEGER_DTYPES else super().edge_data(params, direction, dtype)

    def largest_input(self, params: AttentionParams, dtype: str) -> float:
        return largest_finite(dtype)  # i8: 127 (V and the f16 tensors hold more); fp8: the format's

    # -- cost -------------------------------------------------------------------------
    def reduction_size(self, params: AttentionParams, direction: str) -> int:
        return params.seq_k

    def scratch_elements(self, params: AttentionParams, direction: str) -> int:
        """Score-sized (batch, heads_q, rows, keys) tensors held at once by the reference and the softmax
        bound, rows those of a chunk (params.query_chunks), keys those of a block (params.key_blocks): scores,
        mask, exponentials, probabilities and their magnitudes (measured: tests/runner/test_runner_memory.py)."""
        keys = key_block_size(params)
        scores = 6 * params.batch * params.heads_q * chunk_rows(params) * keys
        if not blocks_keys(params):
            return scores
        # a block of K and V widened, |K|, |V| and V² as the bound's products take them (key_blocks.py)
        return scores + 4 * params.batch * params.heads_kv * keys * (params.head_dim_qk + params.head_dim_v)

    def kernel_scratch_bytes(self, params: AttentionParams, direction: str, dtype: str) -> int:
        """torch's SDPA streams its scores; the default kernel's lse and score-tensor path
        (kernels._scores_in_f32) holds them in f32, logsumexp's f32 temporary, their exponentials in place, and P
        rounded to the input format and back to f32: 14 bytes per f16 score, of which 11.5 were measured at
        once (512 x 32768 keys, 8 heads: benchmarks/bench_attention_memory.py), the heap's holes included."""
        if not (params.return_lse or params.score_scale or params.quantized):
            return 0
        per_score = 16 if params.quantized else 12 + min(element_size(dtype), 4)  # quantized: float64 products too
        return per_score * params.batch * params.heads_q * params.seq_q * params.seq_k

    def flops(self, params: AttentionParams, direction: str) -> int:
        rows = params.batch * params.heads_q * params.seq_q * params.seq_k
        return 2 * rows * (params.head_dim_qk + params.head_dim_v)

    # -- arithmetic probes (runner/ops/attention/probes.py) -----------------------------
    def shape_class(self, params: AttentionParams, direction: str) -> str:
        """Kernels pick their algorithm by every size and option (torch's SDPA does): one cell per geometry."""
        return params.geometry()

    def probe_params(self, params: AttentionParams, direction: str) -> AttentionParams:
        """The case's own geometry, without the input kinds (the probes write every value themselves)."""
        return replace(params, q_gain=1.0, score_offset=0.0)
