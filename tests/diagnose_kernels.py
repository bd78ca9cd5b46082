"""Plug-in kernels with one known numerical defect each, for the tests of `e2egen explain`.

Each follows the runner's kernel contract (runner/kernels.py) for conv2d fwd
(groups = 1): f(x, w, *, stride, padding, dilation, groups) -> y, f16 in, f16 out
(bf16_inputs_conv_fwd: f32 or f16 in, the same out).

    flush_subnormals_conv_fwd   computes in f32, rounds once to f16, but flushes subnormal inputs and
                                outputs to zero (as MI200's mfma does in the seed)
    f16_chunked_conv_fwd        sums 4 input channels (36 products for a 3x3 kernel) at a time in f32,
                                and keeps the running sum in f16 between chunks
    dropped_channel_conv_fwd    an indexing bug: the loop over input channels stops one short
    bf16_inputs_conv_fwd        rounds both inputs to bf16, then computes in f32 and returns the case's
                                dtype (f32 or f16): a library's silent "performance" precision
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

F16_MIN_NORMAL = 2.0 ** -14
CHANNELS_PER_CHUNK = 4


def _flush(t: torch.Tensor) -> torch.Tensor:
    return torch.where(t.abs() < F16_MIN_NORMAL, torch.zeros_like(t), t)


def _conv32(x, w, stride, padding, dilation, groups):
    return F.conv2d(x.float(), w.float(), None, stride, padding, dilation, groups)


def flush_subnormals_conv_fwd(x, w, *, stride, padding, dilation, groups):
    y = _conv32(_flush(x), _flush(w), stride, padding, dilation, groups).to(torch.float16)
    return _flush(y)


def f16_chunked_conv_fwd(x, w, *, stride, padding, dilation, groups):
    if groups != 1:
        raise ValueError("f16_chunked_conv_fwd supports groups = 1 only")
    running = None
    for start in range(0, x.shape[1], CHANNELS_PER_CHUNK):
        part = _conv32(x[:, start:start + CHANNELS_PER_CHUNK], w[:, start:start + CHANNELS_PER_CHUNK],
                       stride, padding, dilation, 1)
        running = part.to(torch.float16) if running is None else (running.float() + part).to(torch.float16)
    return running


def dropped_channel_conv_fwd(x, w, *, stride, padding, dilation, groups):
    if groups != 1:
        raise ValueError("dropped_channel_conv_fwd supports groups = 1 only")
    last = x.shape[1] - 1  # bug: `range(c - 1)` instead of `range(c)`
    return _conv32(x[:, :last], w[:, :last], stride, padding, dilation, 1).to(torch.float16)


def bf16_inputs_conv_fwd(x, w, *, stride, padding, dilation, groups):
    return _conv32(x.to(torch.bfloat16), w.to(torch.bfloat16), stride, padding, dilation, groups).to(x.dtype)
