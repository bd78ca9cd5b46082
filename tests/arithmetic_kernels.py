"""Plug-in kernels whose arithmetic is emulated exactly in float64.

Each module-level instance (`correct`, `bf16_inputs`, `f16_per_tap`, ...) is
one callable that serves every direction of a suite, following the contract of
runner/kernels.py:

    conv fwd         f(x, w, *, stride, padding, dilation, groups) -> y
    conv bwd_data    f(dy, w, *, input_shape, stride, padding, dilation, groups) -> dx
    conv bwd_weight  f(x, dy, *, weight_shape, stride, padding, dilation, groups) -> dw
    gemm             f(a, b) -> c            (batched when a and b are 3-d)

so a catalogue names it as impl "arithmetic_kernels:NAME". Tests use them to
check that e2egen's arithmetic probes tell how a kernel computes.

The reduction order is e2egen's own lowering (runner/ops/product_sum/lowering.py): lhs
[G, M, R] @ rhs [G, R, Ncol] with R in the documented order (conv fwd
(c, taps), bwd_data (k, flipped taps), bwd_weight (n, out positions), gemm k).

Exactness: every value is a float64 holding a value of the format it models.
A product of two inputs is exact in float64 (at most 2 x 24 significand
bits). Every rounded addition a + b is rounded ONCE from the exact sum: the
float64 sum and its exact error (TwoSum) decide the ties and the
toward-zero boundaries, so there is no double rounding through float64. The
only inexact step is a group's partial sum (`groups` = k / "taps" /
"samples"), taken by a float64 bmm: exact whenever the group's products fit
in 53 bits at a common scale, which is the case for the values probes use.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from e2egen.runner.gemm_form import GemmForm
from e2egen.runner.ops.product_sum.conv import ConvParams
from e2egen.runner.ops.product_sum.lowering import lower_conv_bwd_data, lower_conv_bwd_weight, lower_conv_fwd

# name: (significand bits incl. the implicit one, emin, emax)
FORMATS: dict[str, tuple[int, int, int]] = {
    "f32": (24, -126, 127),
    "tf32": (11, -126, 127),
    "f16": (11, -14, 15),
    "bf16": (8, -126, 127),
}
ROUNDINGS = ("nearest", "toward-zero")
_STORAGE = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def format_max(fmt: str) -> float:
    p, _, emax = FORMATS[fmt]
    return math.ldexp((1 << p) - 1, emax - p + 1)


def format_min_normal(fmt: str) -> float:
    return math.ldexp(1.0, FORMATS[fmt][1])


def _pow2(exponent: torch.Tensor) -> torch.Tensor:
    """2.0**exponent as float64, built from its bits (exact for exponents in [-1022, 1023])."""
    return ((exponent.to(torch.int64) + 1023) << 52).view(torch.float64)


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {sorted(FORMATS)}")


def _check_mode(mode: str) -> None:
    if mode not in ROUNDINGS:
        raise ValueError(f"unknown rounding {mode!r}; expected one of {ROUNDINGS}")


def round_to_format(x: torch.Tensor, fmt: str, mode: str = "nearest", residual: torch.Tensor | None = None) -> torch.Tensor:
    """x (float64) rounded once to `fmt`, returned as float64.

    mode "nearest": round half to even, |x| >= max + ulp(max)/2 gives ±inf.
    mode "toward-zero": the format value of largest magnitude <= |x|; beyond
    max it saturates at ±max. Subnormals of the format keep fewer bits;
    0, ±inf and NaN stay as they are.

    `residual`, when given, is a float64 with x + residual the exact value to
    round and |residual| <= ulp64(x) / 2 (x = RN64(exact), e.g. TwoSum's error):
    it breaks ties and toward-zero boundaries that x alone lands on.
    """
    _check_format(fmt)
    _check_mode(mode)
    if x.dtype != torch.float64:
        raise TypeError(f"round_to_format takes float64, got {x.dtype}")
    p, emin, _ = FORMATS[fmt]
    magnitude = x.abs()
    if residual is not None:
        # The residual's direction relative to the magnitude: > 0 means the
        # exact value is farther from zero than x.
        outward = torch.where(x < 0, -residual, residual)
        if mode == "toward-zero":
            # The exact value lies strictly between x's float64 neighbour
            # toward zero and x: no format value lies in between.
            magnitude = torch.where(outward < 0, torch.nextafter(magnitude, torch.zeros_like(magnitude)), magnitude)
    _, exponent = torch.frexp(magnitude)  # magnitude = m * 2**exponent, m in [0.5, 1)
    # The quantum: 2**(max(floor(log2|x|), emin) - (p - 1)).
    quantum = exponent.to(torch.int64).clamp(min=emin + 1) - p
    scaled = magnitude * _pow2(-quantum)  # exact: a power-of-two scaling into [0, 2**p)
    if mode == "nearest":
        units = torch.round(scaled)  # half to even
        if residual is not None:
            floor = torch.floor(scaled)
            tie = (scaled - floor == 0.5) & (outward != 0)
            units = torch.where(tie, floor + (outward > 0).to(torch.float64), units)
    else:
        units = torch.trunc(scaled)
    result = units * _pow2(quantum)
    limit = format_max(fmt)
    beyond = math.inf if mode == "nearest" else limit
    result = torch.where(result > limit, torch.full_like(result, beyond), result)
    result = torch.copysign(result, x)
    return torch.where(torch.isfinite(x), result, x)


def add_rounded(a: torch.Tensor, b: torch.Tensor, fmt: str, mode: str = "nearest") -> torch.Tensor:
    """a + b (float64 tensors) rounded once to fmt ("f64" too) from the exact sum."""
    total = a + b
    if fmt == "f64" and mode == "nearest":
        return total
    # TwoSum (Knuth): total + error == a + b exactly, barring overflow.
    b_virtual = total - a
    error = (a - (total - b_virtual)) + (b - b_virtual)
    error = torch.where(torch.isfinite(total), error, torch.zeros_like(error))
    if fmt == "f64":  # toward zero: one float64 step inward when the exact sum is smaller
        inward = torch.where(total < 0, -error, error) < 0
        return torch.where(inward, torch.nextafter(total, torch.zeros_like(total)), total)
    return round_to_format(total, fmt, mode, residual=error)


def flush_subnormal(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """x with every value subnormal in fmt (0 < |x| < min normal) set to a zero of its sign."""
    subnormal = (x != 0) & (x.abs() < format_min_normal(fmt))
    return torch.where(subnormal, torch.copysign(torch.zeros_like(x), x), x)


def _round_any(x: torch.Tensor, fmt: str, mode: str) -> torch.Tensor:
    return x if fmt == "f64" else round_to_format(x, fmt, mode)


@dataclass(frozen=True)
class EmulatedKernel:
    """A kernel's arithmetic, emulated exactly: see the module docstring.

    inputs           None | "tf32" | "bf16" | "f16": every input value is rounded to this
                     format (with inputs_rounding) before products are formed
    inputs_rounding  "nearest" | "toward-zero"
    acc              "f64" | "f32" | "f16" | "bf16": format of the running sum
    groups           None: one product at a time into the running sum;
                     int k: chunks of k consecutive products (R order), each summed
                     then rounded to `inner`, then added into the running sum;
                     "taps": one partial per kernel tap (r % window; conv fwd/bwd_data);
                     "samples": one partial per sample (R // N; conv bwd_weight)
    inner            "f64" | "f32": format of a group's partial
    rounding         "nearest" | "toward-zero": every accumulation step and the
                     final conversion to the output dtype
    ftz              inputs subnormal in their storage format and outputs subnormal
                     in the output format become 0
    order            "natural" | "reversed": reversed flips R before grouping
    """

    inputs: str | None = None
    inputs_rounding: str = "nearest"
    acc: str = "f32"
    groups: int | str | None = None
    inner: str = "f32"
    rounding: str = "nearest"
    ftz: bool = False
    order: str = "natural"

    def __post_init__(self) -> None:
        if self.inputs not in (None, "tf32", "bf16", "f16"):
            raise ValueError(f"inputs must be None, 'tf32', 'bf16' or 'f16', got {self.inputs!r}")
        _check_mode(self.inputs_rounding)
        _check_mode(self.rounding)
        if self.acc not in ("f64", "f32", "f16", "bf16"):
            raise ValueError(f"acc must be 'f64', 'f32', 'f16' or 'bf16', got {self.acc!r}")
        if self.groups is not None and self.groups not in ("taps", "samples"):
            if isinstance(self.groups, bool) or not isinstance(self.groups, int) or self.groups < 1:
                raise ValueError(f"groups must be None, a positive int, 'taps' or 'samples', got {self.groups!r}")
        if self.inner not in ("f64", "f32"):
            raise ValueError(f"inner must be 'f64' or 'f32', got {self.inner!r}")
        if self.order not in ("natural", "reversed"):
            raise ValueError(f"order must be 'natural' or 'reversed', got {self.order!r}")

    # -- description ---------------------------------------------------------------
    def describe(self) -> str:
        parts = []
        if self.inputs is not None:
            mode = "" if self.inputs_rounding == "nearest" else f" ({self.inputs_rounding})"
            parts.append(f"inputs rounded to {self.inputs}{mode}")
        if self.ftz:
            parts.append("subnormals flushed")
        if self.groups is None:
            parts.append(f"one product at a time into a {self.acc} sum")
        else:
            what = {"taps": "per kernel tap", "samples": "per sample"}.get(self.groups, f"in chunks of {self.groups}")
            parts.append(f"partials {what} rounded to {self.inner}, summed in {self.acc}")
        if self.rounding != "nearest":
            parts.append(f"rounding {self.rounding}")
        if self.order != "natural":
            parts.append(f"{self.order} order")
        return ", ".join(parts)

    # -- the contract --------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        if "input_shape" in kwargs:
            return self.conv_bwd_data(*args, **kwargs)
        if "weight_shape" in kwargs:
            return self.conv_bwd_weight(*args, **kwargs)
        if "stride" in kwargs:
            return self.conv_fwd(*args, **kwargs)
        if kwargs or len(args) != 2:
            raise TypeError(f"expected gemm f(a, b) or a conv call with geometry keywords, got {len(args)} "
                            f"positional arguments and keywords {sorted(kwargs)}")
        return self.gemm(*args)

    def gemm(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if a.dim() not in (2, 3) or b.dim() != a.dim():
            raise ValueError(f"gemm takes two 2-d or two 3-d tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
        dtype = self._dtype(a, b)
        batch = a.shape[0] if a.dim() == 3 else 1
        m, k = a.shape[-2:]
        n = b.shape[-1]
        out_shape = (*a.shape[:-2], m, n)
        lhs = self._prepare(a, dtype).reshape(batch, m, k)
        rhs = self._prepare(b, dtype).reshape(batch, k, n)
        form = GemmForm(lhs, rhs, lambda out: out.reshape(out_shape))
        return self._finish(form, self._accumulate(form, window=None, samples=None), dtype)

    def conv_fwd(self, x, w, *, stride, padding, dilation, groups) -> torch.Tensor:
        dtype = self._dtype(x, w)
        form = lower_conv_fwd(self._prepare(x, dtype), self._prepare(w, dtype), tuple(stride), tuple(padding),
                               tuple(dilation), int(groups))
        return self._finish(form, self._accumulate(form, window=math.prod(w.shape[2:]), samples=None), dtype)

    def conv_bwd_data(self, dy, w, *, input_shape, stride, padding, dilation, groups) -> torch.Tensor:
        dtype = self._dtype(dy, w)
        input_shape = tuple(input_shape)
        params = ConvParams(dy.shape[0], input_shape[1], w.shape[0], tuple(input_shape[2:]), tuple(w.shape[2:]),
                            tuple(stride), tuple(padding), tuple(dilation), int(groups))
        form = lower_conv_bwd_data(self._prepare(dy, dtype), self._prepare(w, dtype), params)
        return self._finish(form, self._accumulate(form, window=math.prod(params.kernel), samples=None), dtype)

    def conv_bwd_weight(self, x, dy, *, weight_shape, stride, padding, dilation, groups) -> torch.Tensor:
        dtype = self._dtype(x, dy)
        weight_shape = tuple(weight_shape)
        params = ConvParams(x.shape[0], x.shape[1], dy.shape[1], tuple(x.shape[2:]), tuple(weight_shape[2:]),
                            tuple(stride), tuple(padding), tuple(dilation), int(groups))
        form = lower_conv_bwd_weight(self._prepare(x, dtype), self._prepare(dy, dtype), params)
        return self._finish(form, self._accumulate(form, window=None, samples=params.n), dtype)

    # -- the arithmetic ------------------------------------------------------------
    @staticmethod
    def _dtype(*tensors: torch.Tensor) -> torch.dtype:
        dtypes = {t.dtype for t in tensors}
        if len(dtypes) != 1:
            raise TypeError(f"inputs must share one dtype, got {sorted(map(str, dtypes))}")
        dtype = dtypes.pop()
        if dtype not in _STORAGE:
            raise TypeError(f"unsupported dtype {dtype}; expected float32, float16 or bfloat16")
        return dtype

    def _prepare(self, t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """The input as the float64 values the products are formed from."""
        values = t.to(torch.float64)
        if self.ftz:
            values = flush_subnormal(values, _STORAGE[dtype])
        if self.inputs is not None:
            values = round_to_format(values, self.inputs, self.inputs_rounding)
        return values

    def _accumulate(self, form: GemmForm, *, window: int | None, samples: int | None) -> torch.Tensor:
        """The running sum [G, M, Ncol] (float64 holding acc values)."""
        lhs, rhs = form.lhs, form.rhs
        if self.order == "reversed":
            lhs, rhs = lhs.flip(2), rhs.flip(1)
        g, m, r = lhs.shape
        ncol = rhs.shape[2]
        running = torch.zeros(g, m, ncol, dtype=torch.float64, device=lhs.device)
        if self.groups is None:
            columns = lhs.transpose(1, 2).contiguous()  # [G, R, M]: one product column per step
            rows = rhs.contiguous()
            for i in range(r):
                product = columns[:, i, :, None] * rows[:, i, None, :]  # exact in float64
                running = add_rounded(running, product, self.acc, self.rounding)
            return running
        for lhs_part, rhs_part in self._partitions(lhs, rhs, window, samples):
            partial = _round_any(torch.bmm(lhs_part, rhs_part), self.inner, self.rounding)
            running = add_rounded(running, partial, self.acc, self.rounding)
        return running

    def _partitions(self, lhs, rhs, window, samples):
        r = lhs.shape[2]
        if self.groups == "taps":
            if window is None:
                raise ValueError("groups='taps' applies to conv fwd and bwd_data only")
            lhs_taps = lhs.reshape(*lhs.shape[:2], r // window, window)
            rhs_taps = rhs.reshape(rhs.shape[0], r // window, window, rhs.shape[2])
            for tap in range(window):
                yield lhs_taps[..., tap], rhs_taps[:, :, tap, :]
            return
        if self.groups == "samples":
            if samples is None:
                raise ValueError("groups='samples' applies to conv bwd_weight only")
            size = r // samples
        else:
            size = self.groups
        for start in range(0, r, size):
            yield lhs[:, :, start:start + size], rhs[:, start:start + size, :]

    def _finish(self, form: GemmForm, running: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        fmt = _STORAGE[dtype]
        out = round_to_format(running, fmt, self.rounding)
        if self.ftz:
            out = flush_subnormal(out, fmt)
        return form.fold(out).to(dtype)  # exact: out holds values of dtype


correct = EmulatedKernel()
correct_reversed = EmulatedKernel(order="reversed")
correct_chunked = EmulatedKernel(groups=16, inner="f32", acc="f32")
correct_f64 = EmulatedKernel(acc="f64")
bf16_inputs = EmulatedKernel(inputs="bf16")
tf32_inputs = EmulatedKernel(inputs="tf32")
f16_inputs = EmulatedKernel(inputs="f16")
f16_acc = EmulatedKernel(acc="f16")
bf16_acc = EmulatedKernel(acc="bf16")
f16_chunks = EmulatedKernel(groups=32, inner="f32", acc="f16")
f16_per_tap = EmulatedKernel(groups="taps", inner="f32", acc="f16")
f16_per_sample = EmulatedKernel(groups="samples", inner="f32", acc="f16")
toward_zero = EmulatedKernel(rounding="toward-zero")
flush_subnormals = EmulatedKernel(ftz=True)

KERNELS: dict[str, EmulatedKernel] = {
    name: value for name, value in globals().items() if isinstance(value, EmulatedKernel)
}
