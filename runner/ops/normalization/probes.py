"""The eps probe of layer_norm and rms_norm (forward and backward), group_norm and batch_norm, and softmax's and
log_softmax's compute-format probe (probe_softmax_compute, below).

The eps probe: rows whose variance
(rms_norm: mean square) equals eps, where eps decides the result.

On unit-variance rows eps moves y by about eps/2 relative (5e-6 for layer_norm's default), less than the bound's
variance term, so a kernel that leaves eps out, or adds it to σ instead of σ², passes every drawn case. On rows
x = ±a with a² ≈ eps (a = √eps in the input format) the contract's y = x/√(a² + eps) is about ±0.71, leaving eps
out gives ±1 and adding it to σ about ±0.997: a gap of 40 % against a probe tolerance of PROBE_TOLERANCE, far
beyond any rounding of f32, f16 or bf16 (inputs exact, so the float64 reference of the probe is exact too). The
backward's grad_x carries 1/σ and x̂ alike.

A kernel off by more than the tolerance there is `unexplained` (a kernel bug: the case fails, naming it), with
the nearest reading, from rows of ±eps (variance eps², where eps left out gives ±1 and eps added to σ ±1/2):
eps left out (the float64 result with eps = 0 matches), or eps used otherwise. The probe
measures nothing else: the accumulator and rounding stay the dtype's assumed ones, and a note says so.
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from e2egen import metrics
from e2egen.runner.arithmetic.model import Arithmetic, assumed_arithmetic
from e2egen.runner.dtypes import input_format_name
from e2egen.runner.kernels import call_on_values
from e2egen.runner.ops.normalization.normalization_math import channel_norm_rows, from_channel_norm_rows
from e2egen.runner.ops.normalization.params import ChannelNormParams
from e2egen.runner.ops.numerics import Kernel
from e2egen.runner.problem import Problem

PROBE_TOLERANCE = 0.05  # relative to the row's largest |result|: 8x below the gap eps makes, above any rounding
GRAD_PATTERN = (1.0, -0.5, 0.25, 0.75, -1.0, 0.5)  # the backward's grad_y, exact in every float format


def probe_eps(problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
    """A norm's eps on `problem` (NormOp's or ChannelNormOp's probe_params: small rows, offset 0)."""
    params = problem.params
    fmt = input_format_name(problem.dtype)
    side = float(metrics.round_to(torch.tensor([math.sqrt(params.eps)], dtype=torch.float64), fmt)[0])
    inputs = _inputs(problem, side)
    got = call_on_values(problem, kernel, inputs, device, label=label)[problem.primary_output]
    expected = problem.numerics.reference(problem, inputs)[problem.primary_output]
    notes = (f"eps checked on rows of ±{side:.4g} (variance {side * side:.4g}, eps {params.eps:g}); accumulator and "
             f"rounding not probed: the dtype's assumed",)
    arithmetic = replace(assumed_arithmetic(problem.dtype), probed_with=problem.describe(), notes=notes)
    off = _relative_gap(got, expected)
    if off <= PROBE_TOLERANCE:
        return arithmetic
    reading = _reading(problem, kernel, device, label, fmt) or _reading(problem, kernel, device, label, fmt, side)
    what = (f"{problem.op} {problem.direction} on rows of ±{side:.4g} (variance {side * side:.4g} ≈ eps {params.eps:g}) came "
            f"back {_worst(got, expected)}: {off:.0%} off, where eps decides the result; the kernel {reading}")
    return replace(arithmetic, unexplained=(what,))


def _reading(problem: Problem, kernel: Kernel, device: torch.device, label: str, fmt: str,
             side: float | None = None) -> str:
    """How a kernel off on the eps rows uses eps, from rows of ±eps (variance eps², where eps left out gives
    ±1 and eps added to σ ±1/2; or rows of ±`side`): "" when those rows cannot be had (eps is 0 in the input
    format, or the result without eps overflows the output format)."""
    if side is None:
        side = float(metrics.round_to(torch.tensor([problem.params.eps], dtype=torch.float64), fmt)[0])
        if side == 0:
            return ""
    inputs = _inputs(problem, side)
    without_eps = replace(problem, params=replace(problem.params, eps=0.0))
    expected = without_eps.numerics.reference(without_eps, inputs)[problem.primary_output]
    if float(expected.abs().max()) > metrics.get_format(problem.out_dtype).max / 2:
        return ""  # the backward's 1/σ = 1/eps overflows an f16 output
    got = call_on_values(problem, kernel, inputs, device, label=label)[problem.primary_output]
    if _relative_gap(got, expected) <= PROBE_TOLERANCE:
        return "leaves eps out"
    return "uses eps otherwise than inside √(var + eps) (added to σ?)"


def _inputs(problem: Problem, side: float) -> dict[str, torch.Tensor]:
    """x alternating ±side along the normalised elements; weight 1, bias 0; grad_y GRAD_PATTERN."""
    shapes = problem.input_shapes
    count = math.prod(shapes["x"])
    values = {"x": _alternating(problem) * side}
    if "grad_y" in shapes:
        pattern = torch.tensor(GRAD_PATTERN, dtype=torch.float64)
        values["grad_y"] = pattern.repeat(count // len(GRAD_PATTERN) + 1)[:count].reshape(shapes["grad_y"])
    if "weight" in shapes:
        values["weight"] = torch.ones(shapes["weight"], dtype=torch.float64)
    if "bias" in shapes:
        values["bias"] = torch.zeros(shapes["bias"], dtype=torch.float64)
    return values


def _alternating(problem: Problem) -> torch.Tensor:
    """±1 alternating along each normalised row of x: along x's flat order for the norms over trailing dims; along
    channel_norm_rows' rows for group_norm and batch_norm (a batch_norm of (N, C) alternating along x's memory
    would give an even C constant channels)."""
    params, shape = problem.params, problem.input_shapes["x"]

    def signs(count: int) -> torch.Tensor:
        return torch.tensor([1.0, -1.0], dtype=torch.float64).repeat((count + 1) // 2)[:count]

    if not isinstance(params, ChannelNormParams):
        return signs(math.prod(shape)).reshape(shape)
    rows = channel_norm_rows(torch.zeros(shape, dtype=torch.float64), params)
    return from_channel_norm_rows(signs(rows.shape[-1]).expand(rows.shape), params).contiguous()


def _relative_gap(got: torch.Tensor, expected: torch.Tensor) -> float:
    """max |got - expected| / max |expected| (inf where got is not finite)."""
    if not bool(torch.isfinite(got).all()):
        return math.inf
    scale = float(expected.abs().max())
    if scale > 0:
        return float((got - expected).abs().max()) / scale
    return math.inf if float(got.abs().max()) > 0 else 0.0


def _worst(got: torch.Tensor, expected: torch.Tensor) -> str:
    gaps = torch.where(torch.isfinite(got), (got - expected).abs(), torch.full_like(got, math.inf))
    index = int(gaps.reshape(-1).argmax())
    return f"{float(got.reshape(-1)[index]):.6g}, expected {float(expected.reshape(-1)[index]):.6g}"


# -- which format the kernel computes in (softmax, log_softmax and the norms' forward) -------------------------------
SOFTMAX_PROBE_RANGE = (-8.0, 0.0)  # exp(x - m) over three decades: its roundings and the row sum's show
NORM_PROBE_RANGE = (-2.0, 2.0)  # the norms' rows: x̂ spread over ±1.7, every statistic in play
WEIGHT_SPREAD, BIAS_SPREAD = (0.5, 1.5), (-1.0, 1.0)  # y = x̂·w + b cancels on some elements: x̂·w rounded shows
# (ulps, share): an output this many ulps or more from the correctly rounded result, on this share of the outputs or
# more, is the input format's compute. softmax: an f32 computation lands within an ulp; what the contract allows lands
# 2 ulps away now and then (the weights stored in bf16 before the sum: 2 of 1,024 outputs; torch's own bf16
# log_softmax: 1), JAX's f16 softmax on 43, its bf16 one on 253. The norms: f32 statistics and affine step rounded
# once land on the correctly rounded result but where an f32 error crosses a tie (at most 5 of 3,136, 2 of 256:
# torch's, JAX's, ours); one more rounding in the input format lands an ulp off on a quarter (OpenVINO's bf16
# rms_norm: 71 of 256, its layer_norm 77)
NATIVE = {"softmax": (2, 0.01), "log_softmax": (2, 0.01)}
NATIVE_NORMS = (1, 0.05)
LEAN_SHARE = 0.9  # of the norms' far outputs erring one way in magnitude: a statistic off, not rounding (_lean)
BUG_ULPS = 64  # farther than any rounding of the formats' arithmetic takes a row's result
STEPS = {"softmax": "exp, the row sum or the division", "log_softmax": "exp, the row sum or the division"}


def probe_compute_format(problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
    """Does a softmax, log_softmax or norm kernel compute in f32, or in its f16/bf16 input format (forward)? On rows
    spread over SOFTMAX_PROBE_RANGE (the norms: NORM_PROBE_RANGE, with weights and biases spread too, so that x̂·w + b
    cancels on some elements; all exact in the input format), an
    f32 computation rounded once lands its outputs on the correctly rounded result or within an ulp of it; steps
    done in f16 or bf16 leave a share of them farther (NATIVE: JAX's softmax, OpenVINO's bf16 layer_norm and
    rms_norm). Outputs not numbers, or (softmax, log_softmax) BUG_ULPS away, are a bug no format explains."""
    fmt = problem.input_format
    if fmt == "f32":
        return Arithmetic(compute="f32", probed_with=problem.describe(),
                          notes=("f32 inputs: the math is computed in f32 or wider",))
    shape = problem.input_shapes["x"]
    low, high = SOFTMAX_PROBE_RANGE if problem.op in ("softmax", "log_softmax") else NORM_PROBE_RANGE
    spread = torch.linspace(low, high, math.prod(shape), dtype=torch.float64)
    x = metrics.round_to(spread[torch.randperm(spread.numel(), generator=torch.Generator().manual_seed(problem.seed))],
                         fmt).reshape(shape)
    inputs = {"x": x}
    for name, (low_w, high_w) in (("weight", WEIGHT_SPREAD), ("bias", BIAS_SPREAD)):  # the affine step's rounding shows
        if name in problem.input_shapes:
            count = math.prod(problem.input_shapes[name])
            inputs[name] = metrics.round_to(torch.linspace(low_w, high_w, count, dtype=torch.float64),
                                            fmt).reshape(problem.input_shapes[name])
    got = call_on_values(problem, kernel, inputs, device, label=label)[problem.primary_output].to(torch.float64)
    exact = problem.numerics.reference(problem, inputs)[problem.primary_output]
    rounded = metrics.round_to(exact, problem.out_dtype)
    ulps = (got - rounded).abs() / metrics.ulp(rounded, problem.out_dtype)
    ulps = torch.where(torch.isfinite(got), ulps, torch.full_like(ulps, math.inf))
    native_ulps, native_share = NATIVE.get(problem.op, NATIVE_NORMS)
    far = int((ulps >= native_ulps).sum())
    described = (f"{far} of {ulps.numel()} outputs {native_ulps} ulp{'s' if native_ulps > 1 else ''} or more from the "
                 "correctly rounded result")
    # the norms' x̂·w + b cancels on some probe elements, where a low-precision step is many of y's ulps off
    worst = float(ulps.max()) if problem.op in NATIVE else (math.inf if not bool(torch.isfinite(got).all()) else 0.0)
    if worst >= BUG_ULPS:
        return Arithmetic(compute="f32", probed_with=problem.describe(), unexplained=(
            f"{problem.op} on rows spread over {[low, high]}: an output {worst:.3g} ulps from "
            f"the correctly rounded result, farther than any rounding of f32 or {fmt} arithmetic takes it",))
    if far < native_share * ulps.numel():
        return Arithmetic(compute="f32", probed_with=problem.describe(), notes=(described,))
    lean = _lean(problem, inputs, got - exact, ulps >= native_ulps) if problem.op not in NATIVE else None
    if lean is not None:
        return Arithmetic(compute="f32", probed_with=problem.describe(), unexplained=(
            f"{problem.op} on rows spread over {[low, high]}: {described}, {lean}",))
    return Arithmetic(compute=fmt, probed_with=problem.describe(),
                      notes=(f"{described}: {STEPS.get(problem.op, 'the statistics or the normalisation')} done in {fmt}",))


def _lean(problem: Problem, inputs: dict[str, torch.Tensor], error: torch.Tensor, far: torch.Tensor) -> str | None:
    """Where the far outputs of a norm all err one way in magnitude (LEAN_SHARE of them or more larger, or smaller,
    than the exact x̂·w): a statistic or a scale off, which moves every output alike; a narrower format's
    roundings go either way. None where they do not lean."""
    unshifted = {**inputs, **({"bias": torch.zeros_like(inputs["bias"])} if "bias" in inputs else {})}
    scaled = problem.numerics.reference(problem, unshifted)[problem.primary_output]  # x̂·w
    outward = (error * torch.sign(scaled))[far]
    share = float((outward > 0).double().mean())
    if share >= LEAN_SHARE:
        return f"{share:.0%} of them larger in magnitude than exact: a statistic or a scale off, not a format's rounding"
    if share <= 1 - LEAN_SHARE:
        return (f"{1 - share:.0%} of them smaller in magnitude than exact: a statistic or a scale off (a variance "
                "divided by n - 1?), not a format's rounding")
    return None

