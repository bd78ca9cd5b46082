"""Attention's numerics (the torch half of runner/ops/attention/spec.py): its input kinds, how a layout stores
q, k and v, the kernel call under the contract, the float64 reference and the composed bound."""
from __future__ import annotations

import math
from typing import Mapping

import torch

from e2egen.runner.arithmetic.model import Arithmetic
from e2egen.runner.bound import ErrorBound
from e2egen.runner.ops.attention.attention_math import attention_float64
from e2egen.runner.ops.attention.bound import attention_bound
from e2egen.runner.ops.attention.chunks import chunked_attention
from e2egen.runner.ops.attention.kernels import torch_attention
from e2egen.runner.ops.attention.params import AttentionParams, blocks_keys, query_chunks
from e2egen.runner.ops.attention.probes import probe_attention
from e2egen.runner.ops.attention.spec import TRANSPOSABLE, AttentionOp, storage_order
from e2egen.runner.ops.numerics import Kernel, OpNumerics
from e2egen.runner.ops.tensor_layouts import stored_in_order
from e2egen.runner.problem import Problem


class AttentionNumerics(OpNumerics[AttentionOp]):
    # -- inputs -----------------------------------------------------------------------
    def adjust_inputs(self, params: AttentionParams, drawn: dict[str, torch.Tensor]) -> None:
        """Shape the drawn float64 values (before rounding) into the input kinds the params ask for:
        q scaled by q_gain (peaky scores); q's and k's feature 0 set so that every score of query row i
        gains the same c_i, within 5 % of score_offset (a kernel without the max subtraction overflows
        in exp). c_i varies between rows (with q's drawn feature 0) so that the rounding of the large
        common term is not one and the same error in every row, which would bias a correct kernel."""
        if params.quant_bias is not None:
            drawn["quant_bias"].fill_(params.quant_bias)
        if params.quant_scale is not None:
            drawn["quant_scale"].fill_(params.quant_scale)
        if params.q_gain != 1.0:
            drawn["q"].mul_(params.q_gain)
        if params.score_offset:
            feature = math.sqrt(params.score_offset / abs(params.softmax_scale))
            spread = drawn["q"][..., 0] / max(drawn["q"][..., 0].abs().max().item(), 1e-300)
            drawn["q"][..., 0] = spread.mul_(0.05).add_(1.0).mul_(feature * (1 if params.softmax_scale > 0 else -1))
            drawn["k"][..., 0] = feature

    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        if name not in TRANSPOSABLE:
            return tensor.contiguous()
        return stored_in_order(tensor, storage_order(name, layout))

    # -- kernels ------------------------------------------------------------------------
    def default_kernel(self, direction: str) -> Kernel:
        return torch_attention

    def call(self, kernel: Kernel, direction: str, params: AttentionParams,
             tensors: Mapping[str, torch.Tensor]) -> torch.Tensor | tuple[torch.Tensor, ...]:
        device = tensors["q"].device

        def per_batch(values: tuple[int, ...] | None) -> torch.Tensor | None:
            return None if values is None else torch.tensor(values, dtype=torch.int64, device=device)

        extra = {"quant_bias": tensors["quant_bias"], "quant_scale": tensors["quant_scale"]} if params.quantized else {}
        if params.look_back is not None:  # passed only when set: kernels without sliding windows need not know it
            extra["look_back"] = params.look_back
        return kernel(tensors["q"], tensors["k"], tensors["v"], scale=params.softmax_scale, causal=params.causal,
                      align=params.align, window=params.window, kv_lengths=per_batch(params.kv_lengths),
                      prefix_offset=per_batch(params.prefix_offset), score_scale=tensors.get("score_scale"),
                      score_bias=tensors.get("score_bias"), return_lse=params.return_lse, **extra)

    # -- reference and bound ----------------------------------------------------------------
    def reference(self, problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        if _in_chunks(problem):
            return dict(chunked_attention(problem, inputs64).reference)
        rows = attention_float64(problem.params, inputs64)
        values = {"o": rows.o}
        if problem.params.return_lse:
            values["lse"] = rows.lse
        return values

    def error_bound(self, problem: Problem, inputs64: Mapping[str, torch.Tensor],
                    arithmetic: Arithmetic | None = None) -> Mapping[str, ErrorBound]:
        if _in_chunks(problem):
            return dict(chunked_attention(problem, inputs64).bounds)
        return attention_bound(problem, inputs64)

    # -- arithmetic probes (probes.py) ------------------------------------------------------
    def probe_arithmetic(self, problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
        return probe_attention(problem, kernel, device, label)


def _in_chunks(problem: Problem) -> bool:
    """Whether the reference and the bound run in chunks of query rows or blocks of keys (chunks.py) rather than over the whole case
    (which computes its rows once for both and its bound only when asked)."""
    return len(query_chunks(problem.params)) > 1 or blocks_keys(problem.params)
