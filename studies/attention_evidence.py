"""Evidence for attention's composed error bound (runner/ops/attention/bound.py): correct and wrong kernels
(runner/ops/attention/variants.py) and torch's default kernel over a deterministic sweep of input kinds, judged
by the shipped default verdict and by the rules FlashAttention, PyTorch and rocMLIR test attention with.

    .venv/bin/python -m studies.attention_evidence [--seeds 5] [--kind decode] [--out docs/evidence/attention.md]

Every case runs every kernel on the same inputs (drawn once, as runner.run draws them), against one float64
reference. A wrong kernel is judged only on the cases its `shows` predicate admits. Rules
(docs/evidence/attention.md gives their sources):

composed    what a generated test does (generator/execute.py): the kernel's arithmetic probed on the case's
            geometry (runner/ops/attention/probes.py, once per kernel, shape and dtype; torch per layout
            too), the bound following it, metrics.compare(...).check({bound_ratio: 1, bound_rms: 0.5, bias_z: 6})
            on every output, and configs.toml's [require] (acc = "f32", inputs "exact") held against the findings
bound alone the same verdict under BoundModel() with the dtype's assumed arithmetic (f32 accumulation, P in
            the input format), no requirements: what the bound catches by itself
FA          max|out - ref| <= 2·max|out_pt - ref| + 2·max|(ref_T + 0.3 - 0.3) - ref_T|  (the last term in T)
PyTorch     assert_close(out, ref_T, atol=4·max(max|ref - out_pt|, atol_T), rtol=4·max(max|(ref - out_pt)/ref|,
            rtol_T)) (get_tolerances, fudge 4)
rocMLIR     the legacy verifier: RMS = sqrt(Σ d²)/(max|·|·sqrt(n)) <= RMS_threshold, max|d| <= absDiff_threshold,
            max|d|/|val| <= relDiff_threshold (disabled for f16/bf16 outputs), with the catalogues' thresholds
out_pt is the same-precision math path: softmax(Q·Kᵀ·scale) · V with every op in the case's dtype; ref_T the
reference rounded to T (the output's format). The lse output is judged by each rule the same way (its out_pt:
the log-sum-exp in f32 of the dtype's scores).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import torch

from e2egen.metrics.names import MODEL_TOLERANCES
from e2egen import metrics
from e2egen.files import write_text_atomically
from e2egen.generator.cases import derive_seed
from e2egen.runner import BoundModel, make_problem
from e2egen.runner.arithmetic.lookup import probe_problem
from e2egen.runner.arithmetic.model import Arithmetic, assumed_arithmetic
from e2egen.runner.arithmetic.requirements import violations
from e2egen.runner.bound import ErrorBound, ScaledMagnitude, SumOfBounds, error_bounds
from e2egen.runner.device import select_device
from e2egen.runner.dtypes import storage_dtype
from e2egen.runner.errors import KernelFailure, Skip
from e2egen.runner.options import Requirements
from e2egen.runner.inputs import arrange_for_kernel, generate_inputs, reference_inputs
from e2egen.runner.kernels import call_kernel, resolve_impl
from e2egen.runner.ops.attention.attention_math import allowed_keys, expand_kv
from e2egen.runner.ops.attention.spec import ATTENTION_LAYOUTS
from e2egen.runner.ops.attention.variants import CORRECT, WRONG
from e2egen.runner.ops.numerics import Kernel
from e2egen.runner.problem import Problem
from e2egen.runner.reference import ReferenceOptions, compute_reference

GLOBAL_SEED = 20221116
DTYPES = ("f16", "bf16", "f32")
RANGE = (-1.0, 1.0)
DEFAULT_VERDICT = MODEL_TOLERANCES  # e2egen's default verdict (generator.defaults)
RULES = ("composed bound", "bound alone", "FlashAttention", "PyTorch SDPA", "rocMLIR")
SHIPPED, ALONE, FA, PYTORCH, ROCMLIR_RULE = RULES
REQUIRE = Requirements()  # e2egen's default requirements (generator.defaults)
FA_FACTOR = 2.0
TORCH_FUDGE = 4.0
TORCH_ATOL = {"f16": 1e-3, "bf16": 1e-3, "f32": 1e-5}  # test_transformers.py default_atol / default_rtol
TORCH_RTOL = {"f16": 1e-3, "bf16": 1.6e-2, "f32": 1.3e-6}
# rocMLIR: (RMS_threshold, absDiff_threshold, relDiff_threshold) from PrAttention{F16,BF16,F32}.toml's suffix;
# what a catalogue leaves out is rocmlir-gen's default (RMS 3e-5 for f32, absDiff 100).
ROCMLIR = {"f16": (0.015, 0.02, 0.02), "bf16": (0.15, 0.3, 0.3), "f32": (3e-5, 100.0, 5e-6)}

# (kind, label, params): each runs in every dtype with every seed; the layout rotates with the seed.
CASES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("uniform", "64x128 d64 h2", {"seq_q": 64, "seq_k": 128, "head_dim_qk": 64, "heads_q": 2}),
    ("uniform", "128x128 d128 lse", {"seq_q": 128, "seq_k": 128, "head_dim_qk": 128, "return_lse": True}),
    ("peaky (q_gain 8)", "64x256 d64 lse", {"seq_q": 64, "seq_k": 256, "head_dim_qk": 64, "q_gain": 8.0,
                                            "return_lse": True}),
    ("peaky (q_gain 8)", "96x96 causal", {"seq_q": 96, "seq_k": 96, "head_dim_qk": 64, "q_gain": 8.0,
                                          "causal": True}),
    ("offset 1000", "32x96 d64 lse", {"seq_q": 32, "seq_k": 96, "head_dim_qk": 64, "score_offset": 1000.0,
                                      "return_lse": True}),
    ("offset 1000", "16x300 d128 causal-br", {"seq_q": 16, "seq_k": 300, "head_dim_qk": 128,
                                              "score_offset": 1000.0, "causal": True, "align": "bottom-right"}),
    ("odd head dims", "48x80 d59", {"seq_q": 48, "seq_k": 80, "head_dim_qk": 59}),
    ("odd head dims", "33x70 d111 lse", {"seq_q": 33, "seq_k": 70, "head_dim_qk": 111, "return_lse": True}),
    ("odd seq lengths", "113x203", {"seq_q": 113, "seq_k": 203, "head_dim_qk": 64}),
    ("odd seq lengths", "203x113 causal-br", {"seq_q": 203, "seq_k": 113, "head_dim_qk": 64, "causal": True,
                                              "align": "bottom-right", "return_lse": True}),
    ("odd seq lengths", "255x1023 d32 causal-br", {"seq_q": 255, "seq_k": 1023, "head_dim_qk": 32, "causal": True,
                                                   "align": "bottom-right"}),
    ("decode", "1x4096 MQA lse", {"seq_q": 1, "seq_k": 4096, "head_dim_qk": 64, "batch": 2, "heads_q": 4,
                                  "heads_kv": 1, "return_lse": True}),
    ("decode", "3x2048 GQA kv_lengths causal-br lse",
     {"seq_q": 3, "seq_k": 2048, "head_dim_qk": 64, "batch": 3, "heads_q": 4, "heads_kv": 2,
      "kv_lengths": [17, 1, 2000], "causal": True, "align": "bottom-right", "return_lse": True}),
    ("decode", "2x700 prefix window scale+bias lse",
     {"seq_q": 2, "seq_k": 700, "head_dim_qk": 64, "batch": 3, "kv_lengths": [700, 300, 64],
      "prefix_offset": [600, 200, 40], "causal": True, "window": [64, 0], "score_scale": True,
      "score_bias": True, "return_lse": True}),
    ("cross", "64x27 dv32 scale+bias", {"seq_q": 64, "seq_k": 27, "head_dim_qk": 64, "head_dim_v": 32,
                                        "score_scale": True, "score_bias": True}),
    ("cross", "37x200 d48 dv80 lse", {"seq_q": 37, "seq_k": 200, "head_dim_qk": 48, "head_dim_v": 80,
                                      "return_lse": True}),
    ("GQA / MQA", "GQA 8:2 64x128 lse", {"seq_q": 64, "seq_k": 128, "head_dim_qk": 64, "heads_q": 8,
                                         "heads_kv": 2, "return_lse": True}),
    ("GQA / MQA", "MQA 6:1 40x100", {"seq_q": 40, "seq_k": 100, "head_dim_qk": 64, "heads_q": 6, "heads_kv": 1}),
    ("causal top-left", "96x160", {"seq_q": 96, "seq_k": 160, "head_dim_qk": 64, "causal": True}),
    ("causal top-left", "GQA 4:2 80x80 lse", {"seq_q": 80, "seq_k": 80, "head_dim_qk": 64, "heads_q": 4,
                                              "heads_kv": 2, "causal": True, "return_lse": True}),
    ("causal bottom-right", "96x160 lse", {"seq_q": 96, "seq_k": 160, "head_dim_qk": 64, "causal": True,
                                           "align": "bottom-right", "return_lse": True}),
    ("window", "128x128 (16, 0)", {"seq_q": 128, "seq_k": 128, "head_dim_qk": 64, "window": [16, 0]}),
    ("window", "80x200 (32, 8) bottom-right lse", {"seq_q": 80, "seq_k": 200, "head_dim_qk": 64,
                                                    "window": [32, 8], "align": "bottom-right", "return_lse": True}),
    ("kv_lengths", "b3 32x200 [200, 65, 0] lse", {"seq_q": 32, "seq_k": 200, "head_dim_qk": 64, "batch": 3,
                                                  "kv_lengths": [200, 65, 0], "return_lse": True}),
    ("kv_lengths", "b2 8x300 prefix causal", {"seq_q": 8, "seq_k": 300, "head_dim_qk": 64, "batch": 2,
                                              "kv_lengths": [150, 300], "prefix_offset": [100, 250],
                                              "causal": True}),
    ("score scale / bias", "64x128 scale+bias lse", {"seq_q": 64, "seq_k": 128, "head_dim_qk": 64,
                                                     "score_scale": True, "score_bias": True, "return_lse": True}),
    ("score scale / bias", "50x90 bias causal", {"seq_q": 50, "seq_k": 90, "head_dim_qk": 64, "score_bias": True,
                                                 "causal": True}),
)


# -- one case -------------------------------------------------------------------------------------------------
@dataclass
class Record:
    kind: str
    label: str
    dtype: str
    layout: str
    seed_index: int
    kernel: str
    category: str  # "torch", "correct", "wrong"
    judged: bool
    fails: dict[str, bool] = field(default_factory=dict)
    worst_ratio: float = 0.0  # largest bound_ratio over the outputs under the shipped (measured) bound; inf: NaN/inf
    worst_alone: float = 0.0  # the same under the assumed arithmetic
    gates: tuple[str, ...] = ()  # the rocMLIR gates that failed, as "output RMS" etc.
    broken: tuple[str, ...] = ()  # requirements the probed arithmetic breaks
    arithmetic: str = ""  # what the probes found
    detail: dict[str, str] = field(default_factory=dict)  # composed rule -> why it failed a correct run / passed a bug


@dataclass
class Case:
    problem: Problem
    inputs: dict[str, torch.Tensor]  # logical shape, the dtype
    kernel_tensors: dict[str, torch.Tensor]
    refs: dict[str, torch.Tensor]  # float64
    parts: dict[str, ErrorBound]  # each output's bound (its pieces)
    bounds: dict[str, torch.Tensor]  # under the assumed arithmetic
    same_precision: dict[str, dict[str, torch.Tensor]]  # rule -> output -> out_pt
    measured_bounds: dict[Any, dict[str, torch.Tensor]] = field(default_factory=dict)  # arithmetic -> output -> bound


def prepare(problem: Problem, model: BoundModel) -> Case:
    inputs = generate_inputs(problem)
    inputs64 = reference_inputs(inputs, torch.device("cpu"))
    tensors = arrange_for_kernel(problem, inputs, torch.device("cpu"))
    ref = compute_reference(problem, inputs64, ReferenceOptions())
    parts = dict(error_bounds(problem, ref.inputs))
    bounds = {name: part.evaluate(model, ref.values[name]) for name, part in parts.items()}
    same = {FA: math_path(problem, inputs, "flash-attention"), PYTORCH: math_path(problem, inputs, "torch")}
    return Case(problem, inputs, tensors, dict(ref.values), parts, bounds, same)


def math_path(problem: Problem, inputs: Mapping[str, torch.Tensor], order: str) -> dict[str, torch.Tensor]:
    """The same-precision computation the peers compare against: every op in the case's dtype.

    order "flash-attention": attention_ref(upcast=False, reorder_ops=True): Q · (K·scale)ᵀ;
    order "torch": _scaled_dot_product_attention_math: (Q·√scale) · (K·√scale)ᵀ. Then ·score_scale, +score_bias,
    the mask (-inf), softmax, a fully masked row set to 0, P · V."""
    params = problem.params
    q, k, v = inputs["q"], expand_kv(inputs["k"], params.group), expand_kv(inputs["v"], params.group)
    scale = params.softmax_scale
    if order == "flash-attention":
        s = torch.matmul(q, (k * scale).mT)
    else:
        root = math.sqrt(abs(scale))
        s = torch.matmul(q * root, (k * math.copysign(root, scale)).mT)
    if params.score_scale:
        s = s * inputs["score_scale"]
    if params.score_bias:
        s = s + inputs["score_bias"]
    allowed = allowed_keys(params, q.device)
    if allowed is not None:
        s = s.masked_fill(~allowed, -math.inf)
    p = torch.softmax(s, dim=-1)
    empty = torch.isneginf(s).all(dim=-1, keepdim=True)
    p = p.masked_fill(empty, 0.0)
    out = {"o": torch.matmul(p, v)}
    if params.return_lse:
        out["lse"] = torch.logsumexp(s.float(), dim=-1)
    return out


# -- the rules ----------------------------------------------------------------------------------------------------
def _diff(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|a - b| in float64, 0 where both are the same infinity (a fully masked row's -inf), NaN stays NaN."""
    a, b = a.to(torch.float64), b.to(torch.float64)
    return torch.where(a == b, 0.0, (a - b).abs())


def _max(t: torch.Tensor) -> float:
    return float(t.max()) if t.numel() else 0.0  # NaN propagates


def flash_attention_rule(out, ref, out_pt, dtype: str) -> bool:
    """tests/cute/test_flash_attn.py: max|out - ref| <= 2·max|out_pt - ref| + fwd_atol,
    fwd_atol = 2·max|(ref_T + 0.3 - 0.3) - ref_T| in T (FA's out_ref is in the dtype)."""
    ref_t = ref.to(storage_dtype(dtype))
    finite = torch.isfinite(ref_t)
    shifted = (ref_t + 0.3) - 0.3  # in T
    fwd_atol = 2 * _max((shifted - ref_t)[finite].abs().to(torch.float64))
    limit = FA_FACTOR * _max(_diff(out_pt, ref)) + fwd_atol
    return not _max(_diff(out, ref)) <= limit


def pytorch_rule(out, ref, out_pt, dtype: str) -> bool:
    """test_transformers.py: get_tolerances(out_ref, out_lp_ref, fudge) then assertEqual(out, out_ref.to(dtype),
    atol, rtol); out_ref here is the float64 reference. Deviations of 0 where both are the same infinity."""
    deviation = _diff(ref, out_pt)
    atol_dev = _max(deviation)
    relative = deviation / ref.to(torch.float64).abs()
    torch.nan_to_num_(relative, nan=TORCH_RTOL[dtype])
    atol = TORCH_FUDGE * max(atol_dev, TORCH_ATOL[dtype])
    rtol = TORCH_FUDGE * max(_max(relative), TORCH_RTOL[dtype])
    if rtol > 1e30:
        rtol = TORCH_RTOL[dtype]
    expected = ref.to(storage_dtype(dtype)).to(torch.float64)
    try:
        torch.testing.assert_close(out.to(torch.float64), expected, atol=atol, rtol=rtol)
    except AssertionError:
        return True
    return False


def rocmlir_rule(out, ref, dtype: str, out_format: str) -> tuple[str, ...]:
    """rocmlir-gen's legacy verifier (mcpuVerify in conv-validation-wrappers.cpp) with the catalogue's thresholds
    for the case's dtype: the reference rounded to the output's format, then everything in f32. Returns the
    gates that fail (none: the test passes)."""
    thr_rms, thr_abs, thr_rel = ROCMLIR[dtype]
    if out_format != "f32":
        thr_rel = 100.0  # createVerifierFunc: relDiff disabled for f16 / bf16 outputs
    is_fp32 = out_format == "f32"
    val = ref.to(storage_dtype(out_format)).to(torch.float32).flatten().numpy()
    gpu = out.to(torch.float32).flatten().numpy()
    with np.errstate(all="ignore"):
        mag = np.fmax(np.abs(val), np.abs(gpu))  # std::max(fabs(val), fabs(gpu)) keeps val when gpu is NaN
        max_mag = float(np.max(np.where(np.isnan(mag), 0.0, mag))) if mag.size else 0.0
        differ = val != gpu
        if is_fp32:
            differ &= ~((val != 0) & (np.abs(val) < np.finfo(np.float32).tiny))  # f32 subnormal val: exact
        v = np.where(np.isinf(val), np.sign(val) * 65504.0, val).astype(np.float32)
        g = np.where(np.isinf(gpu), np.sign(gpu) * 65504.0, gpu).astype(np.float32)
        absdiff = np.abs(v - g).astype(np.float32)
        absdiff = np.where(differ, absdiff, 0.0)
        finite_abs = absdiff[differ & ~np.isnan(absdiff)]
        max_abs = float(finite_abs.max()) if finite_abs.size else 0.0  # a NaN never raises maxAbsDiff
        rel = np.where(differ & (val != 0), absdiff.astype(np.float64) / np.maximum(np.abs(v), 1e-8), 0.0)
        rel = rel[~np.isnan(rel)]
        max_rel = float(rel.max()) if rel.size else 0.0
        sum_sq = float(np.sum(absdiff.astype(np.float64) ** 2))  # NaN if any difference is NaN
        rms = math.sqrt(sum_sq) / (max_mag * math.sqrt(val.size)) if max_mag else math.nan  # C++: 0/0
    checks = (("RMS", rms <= thr_rms), ("absDiff", max_abs <= thr_abs), ("relDiff", max_rel <= thr_rel))
    return tuple(gate for gate, passed in checks if not passed)


# -- running -----------------------------------------------------------------------------------------------------
def kernel_outputs(case: Case, name: str, kernel) -> dict[str, torch.Tensor] | None:
    try:
        return call_kernel(case.problem, kernel, case.kernel_tensors, torch.device("cpu"), label=name)
    except KernelFailure:
        return None


def probe(problem: Problem, name: str, kernel: Kernel) -> Arithmetic | None:
    """What the attention probes find for the kernel on the case's geometry; None where they cannot run."""
    label = "torch" if name == "torch" else f"e2egen.runner.ops.attention.variants:{name}"
    try:
        return problem.numerics.probe_arithmetic(probe_problem(problem), kernel, torch.device("cpu"), label)
    except (KernelFailure, Skip):
        return None


@dataclass
class Judgement:
    fails: dict[str, bool]
    worst: dict[str, float]  # composed rule -> largest bound_ratio over the outputs
    comparisons: dict[str, dict[str, Any]]  # composed rule -> output -> comparison
    bounds: dict[str, dict[str, torch.Tensor]]  # composed rule -> output -> bound
    gates: tuple[str, ...]
    broken: tuple[str, ...]


def judge(case: Case, outs: dict[str, torch.Tensor] | None, arithmetic: Arithmetic | None) -> Judgement:
    """Every rule on every output. `arithmetic`: the probes' findings (None: not measured, assumed)."""
    problem = case.problem
    if outs is None:
        return Judgement({rule: True for rule in RULES}, {SHIPPED: math.inf, ALONE: math.inf}, {}, {}, ("raised",), ())
    measured = arithmetic if arithmetic is not None else assumed_arithmetic(problem.dtype)
    if measured not in case.measured_bounds:  # kernels with the same findings share the bound
        model = BoundModel().with_arithmetic(measured)
        case.measured_bounds[measured] = {name: part.evaluate(model, case.refs[name]) for name, part in case.parts.items()}
    shipped_bounds = case.measured_bounds[measured]
    broken = tuple(v.message for v in violations(REQUIRE, arithmetic, problem.dtype)) if arithmetic else ()
    fails = {rule: False for rule in RULES}
    fails[SHIPPED] = bool(broken)
    worst = {SHIPPED: 0.0, ALONE: 0.0}
    comparisons: dict[str, dict[str, Any]] = {SHIPPED: {}, ALONE: {}}
    bounds = {SHIPPED: shipped_bounds, ALONE: case.bounds}
    gates: list[str] = []
    for name, ref in case.refs.items():
        out = outs[name]
        fmt = problem.outputs[name].dtype
        for rule, rounding in ((SHIPPED, measured.rounding), (ALONE, "nearest-even")):
            c = metrics.compare(ref, out, dtype=fmt, bound=bounds[rule][name], rounding=rounding)
            comparisons[rule][name] = c
            fails[rule] |= not c.check(DEFAULT_VERDICT).passed
            worst[rule] = max(worst[rule], math.inf if c.nan_mismatch + c.inf_mismatch else (c.bound_ratio or 0.0))
        fails[FA] |= flash_attention_rule(out, ref, case.same_precision[FA][name], fmt)
        fails[PYTORCH] |= pytorch_rule(out, ref, case.same_precision[PYTORCH][name], fmt)
        failed_gates = rocmlir_rule(out, ref, problem.dtype, fmt)
        gates += [f"{name} {gate}" for gate in failed_gates]
        fails[ROCMLIR_RULE] |= bool(failed_gates)
    return Judgement(fails, worst, comparisons, bounds, tuple(gates), broken)


def describe(case: Case, outs: dict[str, torch.Tensor] | None, j: Judgement, rule: str,
             arithmetic: Arithmetic | None) -> str:
    """Each output's metrics under a composed rule and the bound's largest pieces at its worst element."""
    if outs is None:
        return "the kernel raised"
    model = BoundModel().with_arithmetic(arithmetic or assumed_arithmetic(case.problem.dtype)) if rule == SHIPPED \
        else BoundModel()
    notes = [f"requirements broken: {'; '.join(j.broken)}"] if rule == SHIPPED and j.broken else []
    for name, c in j.comparisons[rule].items():
        mismatch = c.nan_mismatch + c.inf_mismatch
        notes.append(f"{name}: bound_ratio {c.bound_ratio:.3g}, bound_rms {c.bound_rms:.3g}, bias_z {c.bias_z:.3g}"
                     + (f", {mismatch} NaN/inf mismatches" if mismatch else "")
                     + _terms(case, name, outs[name], j.bounds[rule][name], model))
    return "; ".join(notes)


def _terms(case: Case, name: str, out: torch.Tensor, bound: torch.Tensor, model: BoundModel) -> str:
    """The bound's largest pieces at the element with the largest error/bound."""
    ref = case.refs[name]
    err = _diff(out, ref)
    ratio = torch.where(bound > 0, err / bound, torch.where(err > 0, math.inf, 0.0)).flatten()
    ratio = torch.nan_to_num(ratio, nan=math.inf)
    index = int(torch.argmax(ratio))
    part = case.parts[name]
    sums = part.bound if hasattr(part, "bound") else part
    if not isinstance(sums, SumOfBounds):
        return ""
    pieces = []
    for piece in sums.parts:
        value = float(piece.evaluate(model, ref).flatten()[index])
        label = piece.source if isinstance(piece, ScaledMagnitude) else type(piece).__name__
        pieces.append((value, label))
    pieces.sort(reverse=True)
    where = tuple(int(i) for i in np.unravel_index(index, tuple(ref.shape)))
    top = ", ".join(f"{label} {value:.2e}" for value, label in pieces[:3])
    return (f" [worst at {where}: |err| {float(err.flatten()[index]):.3g}, bound {float(bound.flatten()[index]):.3g}"
            f" = {top}, ...]")


def findings(arithmetic: Arithmetic | None) -> str:
    """What the probes found, in short: P's format before P·V and the P·V accumulator."""
    if arithmetic is None:
        return "not measured (assumed)"
    p_format = {"exact": "f32", "": "?"}.get(arithmetic.intermediate, arithmetic.intermediate)
    how = (" normalised" if any("normalised" in note for note in arithmetic.notes) else "") + \
        (" toward zero" if arithmetic.intermediate_rounding == "toward-zero" else "")
    unidentified = " (not identified)" if any("not identified" in note for note in arithmetic.notes) else ""
    return f"P {p_format}{how}{unidentified}, acc {arithmetic.acc_name}"


def layout_for(case_index: int, seed_index: int) -> str:
    return ATTENTION_LAYOUTS[(3 * case_index + seed_index) % len(ATTENTION_LAYOUTS)]


def all_kernels():
    """(name, category, kernel, shows or None)."""
    yield "torch", "torch", resolve_impl("attention", "fwd", None), None
    for name, fn in CORRECT.items():
        yield name, "correct", fn, None
    for name, wrong in WRONG.items():
        yield name, "wrong", wrong.kernel, wrong.shows


def run_case(kind, label, params, dtype, layout, seed_index, seed, model,
             probed: dict | None = None) -> list[Record]:
    """Every kernel on one case. `probed` memoises the probes' findings per kernel, shape and dtype (and layout
    for torch, whose SDPA picks its CPU path by the tensors' strides; the study's kernels do not look at them)."""
    problem = make_problem("attention", "fwd", dtype, layout, params, RANGE, seed)
    case = prepare(problem, model)
    inputs64 = {name: t.to(torch.float64) for name, t in case.inputs.items()}
    probed = {} if probed is None else probed
    records = []
    for name, category, fn, shows in all_kernels():
        judged = shows is None or shows(problem, inputs64)
        record = Record(kind, label, dtype, layout, seed_index, name, category, judged)
        records.append(record)
        if not judged:
            continue
        key = (name, label, dtype, layout if name == "torch" else "")  # torch's SDPA picks its path by strides
        if key not in probed:
            probed[key] = probe(problem, name, fn)
        arithmetic = probed[key]
        outs = kernel_outputs(case, name, fn)
        j = judge(case, outs, arithmetic)
        record.fails, record.gates, record.broken = j.fails, j.gates, j.broken
        record.worst_ratio, record.worst_alone = j.worst[SHIPPED], j.worst[ALONE]
        record.arithmetic = findings(arithmetic)
        for rule in (SHIPPED, ALONE):
            if j.fails[rule] != (category == "wrong"):  # a false failure, or a bug let through
                record.detail[rule] = describe(case, outs, j, rule, arithmetic)
    return records


def sweep(seeds: int, kinds: set[str] | None = None, progress=None) -> tuple[list[Record], int]:
    model = BoundModel()
    records, cases, probed = [], 0, {}
    for case_index, (kind, label, params) in enumerate(CASES):
        if kinds and kind not in kinds:
            continue
        started = time.perf_counter()
        for dtype in DTYPES:
            for seed_index in range(seeds):
                seed = derive_seed(GLOBAL_SEED, f"attention-evidence/{kind}/{label}/{dtype}/{seed_index}")
                layout = layout_for(case_index, seed_index)
                records += run_case(kind, label, params, dtype, layout, seed_index, seed, model, probed)
                cases += 1
        if progress:
            progress(f"{kind} / {label}: {time.perf_counter() - started:.1f} s")
    return records, cases


# -- the report -------------------------------------------------------------------------------------------------
def _cell(failed: int, judged: int) -> str:
    return f"{failed}/{judged}" + (f" ({100 * failed / judged:.1f}%)" if judged else "")


def _fails(group: list[Record], rule: str) -> int:
    return sum(r.fails[rule] for r in group)


def report(records: list[Record], cases: int, seeds: int, seconds: float, cpu_seconds: float | None = None,
           load: float | None = None) -> str:
    judged = [r for r in records if r.judged]
    correct = [r for r in judged if r.category != "wrong"]
    wrong = [r for r in judged if r.category == "wrong"]
    kinds = list(dict.fromkeys(kind for kind, _, _ in CASES))
    lines = [
        "# Attention: evidence for the composed bound", "",
        f"Command: `.venv/bin/python -m studies.attention_evidence --seeds {seeds}` (torch {torch.__version__}, "
        f"CPU, {torch.get_num_threads()} threads): {cases} cases ({cases // (len(DTYPES) * seeds)} shapes x {len(DTYPES)} dtypes "
        f"({', '.join(DTYPES)}) x {seeds} seeds; the layout rotates with the seed over the 16 attention layouts), "
        f"{len(judged)} judged runs ({len(correct)} of correct kernels incl. torch, {len(wrong)} of wrong kernels), "
        f"{seconds:.0f} s"
        + (f" ({cpu_seconds:.0f} s of CPU" + (f", load average {load:.1f} at the end" if load is not None else "") + ")"
           if cpu_seconds is not None else "")
        + ". Fewer seeds: `--seeds 1`; one input kind: `--kind decode`; another file: `--out PATH`.",
        "",
        "Kernels: runner/ops/attention/variants.py (CORRECT: flash_b16/b64/b128, split_kv2/4, p_rounded; WRONG: one bug "
        "each) and torch's default kernel (runner/ops/attention/kernels.py). Inputs uniform in [-1, 1] (drawn as "
        "`runner.run` draws them, q_gain and score_offset applied by the op), one float64 reference per case. A wrong "
        "kernel is judged only on the cases its `shows` predicate admits (where its bug changes what it computes).",
        "",
        "- **composed bound**: what a generated test does (generator/execute.py): the arithmetic probed on the case's "
        "geometry (runner/ops/attention/probes.py; once per kernel, shape and dtype, and per layout for torch, "
        "whose SDPA picks its CPU path by the strides), the bound following it, "
        "the default verdict on every output, and configs.toml's `[require]` (acc = \"f32\", inputs \"exact\") "
        "held against the findings.",
        "- **bound alone**: the default verdict under `BoundModel()` with the dtype's assumed arithmetic (f32 "
        "accumulation, P rounded to the input format), no requirements: what the bound catches by itself.",
        "- **FlashAttention**, **PyTorch SDPA**, **rocMLIR**: the peers' rules, defined under \"The rules\" below.",
        "", "## Summary", ""]
    for rule in RULES:
        ff, caught = _fails(correct, rule), _fails(wrong, rule)
        goal = ("meets" if ff == 0 and caught >= 0.99 * len(wrong) else "misses") if rule in (SHIPPED, ALONE) else ""
        lines.append(f"- {rule}: {ff} false failure{'' if ff == 1 else 's'} in {len(correct)} runs of correct kernels; "
                     f"{caught} of {len(wrong)} "
                     f"wrong runs caught ({100 * caught / max(len(wrong), 1):.1f}%)"
                     + (f"; {goal} the goal (0 false failures, >= 99% caught)" if goal else "") + ".")
    lines += [
        "", "## False failures and catch rates", "",
        "Correct kernels: failed/judged (false failures). Wrong kernels: caught/judged.", "",
        "| kernel | " + " | ".join(RULES) + " |", "| --- |" + " ---: |" * len(RULES)]
    by_kernel: dict[str, list[Record]] = defaultdict(list)
    for r in judged:
        by_kernel[r.kernel].append(r)
    for name in ["torch", *CORRECT, *WRONG]:
        group = by_kernel.get(name, [])
        lines.append(f"| {name}{' (wrong)' if name in WRONG else ''} | "
                     + " | ".join(_cell(_fails(group, rule), len(group)) for rule in RULES) + " |")
    lines.append("| **all correct (false failures)** | "
                 + " | ".join(f"**{_cell(_fails(correct, rule), len(correct))}**" for rule in RULES) + " |")
    lines.append("| **all wrong (caught)** | "
                 + " | ".join(f"**{_cell(_fails(wrong, rule), len(wrong))}**" for rule in RULES) + " |")

    by_requirement = [r for r in wrong if r.broken]
    by_verdict = [r for r in wrong if r.fails[SHIPPED] and not r.broken]
    lines += ["", f"The composed bound caught {len(by_verdict)} wrong runs by the verdict alone and "
              f"{len(by_requirement)} by a broken requirement ({sum(r.fails[ALONE] for r in by_requirement)} of "
              "those the verdict under the assumed arithmetic also fails). What the probes found:", ""]
    found: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in judged:
        found[r.kernel][f"{r.dtype}: {r.arithmetic}"] += 1
    for name in ["torch", *CORRECT, *WRONG]:
        if name in found:
            lines.append(f"- {name}: " + "; ".join(f"{text} ({count})" for text, count in found[name].items()))

    lines += ["", "Per dtype (correct kernels: false failures; wrong kernels: caught):", "",
              "| dtype | runs | " + " | ".join(RULES) + " |", "| --- | --- |" + " ---: |" * len(RULES)]
    for dtype in DTYPES:
        for what, pool in (("correct", correct), ("wrong", wrong)):
            group = [r for r in pool if r.dtype == dtype]
            lines.append(f"| {dtype} | {what} | " + " | ".join(_cell(_fails(group, rule), len(group)) for rule in RULES)
                         + " |")

    gate_counts: dict[str, int] = defaultdict(int)
    for r in correct:
        for gate in r.gates:
            gate_counts[f"{r.dtype} {gate}"] += 1
    if gate_counts:
        lines += ["", "rocMLIR's false failures by gate (runs of correct kernels where that output fails that gate): "
                  + ", ".join(f"{key} {count}" for key, count in sorted(gate_counts.items())) + "."]

    lines += ["", "## Worst bound_ratio of the correct kernels, per input kind", "",
              "The largest bound_ratio over the outputs (o, and lse where returned) of torch and the correct kernels, "
              "under the shipped bound (the probed arithmetic) and the assumed one; 1 is the verdict's limit.", "",
              "| input kind | runs | composed bound | where | bound alone |", "| --- | ---: | ---: | --- | ---: |"]
    for kind in kinds:
        group = [r for r in correct if r.kind == kind]
        if not group:
            continue
        top = max(group, key=lambda r: r.worst_ratio)
        lines.append(f"| {kind} | {len(group)} | {top.worst_ratio:.3g} | {top.kernel}, {top.label}, {top.dtype}, "
                     f"{top.layout}, seed {top.seed_index} | {max(r.worst_alone for r in group):.3g} |")

    lines += ["", "## Wrong kernels per input kind", "",
              "Caught/judged by the composed bound (and by the bound alone, where different).", "",
              "| wrong kernel | " + " | ".join(kinds) + " |", "| --- |" + " ---: |" * len(kinds)]
    for name in WRONG:
        cells = []
        for kind in kinds:
            group = [r for r in wrong if r.kernel == name and r.kind == kind]
            shipped, alone = _fails(group, SHIPPED), _fails(group, ALONE)
            cells.append("-" if not group else f"{shipped}/{len(group)}" + (f" ({alone})" if alone != shipped else ""))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")

    lines += ["", "## Failures found", ""]
    for rule in (SHIPPED, ALONE):
        false_failures = [r for r in correct if r.fails[rule]]
        misses = [r for r in wrong if not r.fails[rule]]
        if not false_failures and not misses:
            lines += [f"{rule}: none (no correct kernel failed, every judged wrong run was caught).", ""]
        for title, group in ((f"{rule}: correct kernels failing", false_failures),
                             (f"{rule}: wrong kernels let through", misses)):
            if not group:
                continue
            lines += [f"{title} ({len(group)}; the first 30, with the bound's largest pieces at the worst element):", ""]
            lines += [f"- {r.kernel}: {r.kind} / {r.label}, {r.dtype}, {r.layout}, seed {r.seed_index}"
                      + (f" (probes: {r.arithmetic})" if rule == SHIPPED else "") + f": {r.detail.get(rule, '')}"
                      for r in group[:30]]
            lines.append("")

    for rule in (FA, PYTORCH):
        group = [r for r in correct if r.fails[rule]]
        if group:
            lines += [f"{rule}: correct kernels failing ({len(group)}): "
                      + "; ".join(f"{r.kernel} on {r.kind} / {r.label}, {r.dtype}, {r.layout}, seed {r.seed_index}"
                                  for r in group[:10]) + ".", ""]

    lines += ["## The rules", "", RULES_TEXT]
    return "\n".join(lines).rstrip() + "\n"


RULES_TEXT = """\
- **composed bound** (this project): `metrics.compare(ref, out, dtype, bound=B).check({bound_ratio: 1.0, bound_rms:
  0.5, bias_z: 6.0})` on every output (o and, with `return_lse`, lse), as `configs.toml [tolerances]` ships it, B
  the composed per-element bound of runner/ops/attention/bound.py under the probed arithmetic, plus `[require] acc =
  "f32"` (and the default inputs = "exact", which also covers the format P is rounded to) against the probes'
  findings, as generator/execute.py judges a case. **bound alone**: the same verdict with B under `BoundModel()`
  and the assumed arithmetic, no requirements.
- **FlashAttention** (Dao-AILab/flash-attention, `tests/cute/test_flash_attn.py::test_flash_attn_output`):
  `fwd_atol = 2 * (out_ref + 0.3 - 0.3 - out_ref).abs().max()`, then
  `(out - out_ref).abs().max() <= rtol * (out_pt - out_ref).abs().max() + fwd_atol` with `rtol = 2` (no softcap);
  `out_pt = attention_ref(..., upcast=False, reorder_ops=True)` (flash_attn/utils/testing.py): Q·(K·scale)ᵀ,
  softmax and P·V all in the dtype. Here out_ref is the float64 reference for the two maxima and, for
  fwd_atol, the reference rounded to the dtype with `+ 0.3 - 0.3` done in the dtype (FA's out_ref is an f32
  computation returned in the dtype). The older tests (`tests/test_flash_attn.py`) use the same comparison
  without fwd_atol.
- **PyTorch SDPA** (pytorch/pytorch `test/test_transformers.py`, `get_tolerances`): `atol = fudge *
  max(max|out_ref - out_lp_ref|, default_atol[dtype])`, `rtol = fudge * max(max|(out_ref - out_lp_ref) / out_ref|
  (NaN -> default_rtol), default_rtol[dtype])` (rtol back to default_rtol if above 1e30), then
  `assertEqual(out, out_ref.to(dtype), atol=atol, rtol=rtol)`; default_atol f16/bf16 1e-3, f32 1e-5; default_rtol
  f16 1e-3, bf16 1.6e-2, f32 1.3e-6; fudge 4 (the `'out': 4` of the SDPA-vs-math tests). out_lp_ref is
  `_scaled_dot_product_attention_math` in the dtype: (Q·sqrt(scale))·(K·sqrt(scale))ᵀ, softmax, P·V; out_ref here the
  float64 reference; the values are compared in float64. (Newer revisions wrap this in `check_out_and_grad`,
  whose `_check_equal` asks `max|out - out_ref| <= max(1e-5, fudge * max|out_lp_ref - out_ref|)`: the atol part
  of the same rule.)
- **rocMLIR** (ROCm/rocMLIR `mlir/tools/rocmlir-gen/rocmlir-gen.cpp` `createVerifierFunc`, the legacy comparator
  its e2e tests use, and `mcpuVerify` in `mlir/lib/ExecutionEngine/ConvValidationWrappers` /
  conv-validation-wrappers.cpp): the CPU reference is rounded to the output type, then in f32:
  `RMS = sqrt(Σ (val - gpu)²) / (max_i max(|val_i|, |gpu_i|) · sqrt(n))`, `maxAbsDiff = max |val - gpu|`,
  `maxRelDiff = max |val - gpu| / max(|val|, 1e-8)`; the test passes on `[1 1 1]`: RMS <= RMS_threshold,
  maxAbsDiff <= absDiff_threshold, maxRelDiff <= relDiff_threshold. The relDiff gate is switched off (100) for
  f16/bf16 outputs; f32 subnormal references count as exact; infinities are clamped to ±65504 (after the max
  magnitude is taken). Thresholds from the catalogues' suffix: f16 `PrAttentionF16.toml` RMS 0.015, absDiff 0.02
  (relDiff 0.02, off for f16 o; it applies to the f32 lse); bf16 `PrAttentionBF16.toml` RMS 0.15, absDiff 0.3
  (relDiff 0.3); f32 `PrAttentionF32.toml` relDiff 5e-6 with rocmlir-gen's defaults RMS 3e-5 and absDiff 100.
  Here `val` is our float64 reference rounded to the output type (rocMLIR's is its own f32 CPU computation).

How the peer rules behave (their mechanics, whatever the run): FlashAttention's and PyTorch's thresholds scale with
the same-precision path's own error, which is large where the dtype's scores are coarse (offset scores, peaky rows),
so a bug whose error stays below it passes; PyTorch's rtol is the largest |out_ref - out_lp_ref| / |out_ref|, which
one tiny reference inflates towards 1 (every |out - ref| <= 4·|ref| then passes). rocMLIR's f32 relDiff of 5e-6
is relative to each element: the smallest outputs of an attention with values in [-1, 1] fail it against a float64
reference; for f16/bf16 outputs its "disabled" relDiff (100) still fails an element whose rounded reference is
within 1/100 of its error of 0. Its RMS is normalised by the largest magnitude: an error confined to a few rows
(a mask off by one) stays far below the threshold."""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.attention_evidence", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--kind", action="append", help="only this input kind (repeatable)")
    parser.add_argument("--out", default="docs/evidence/attention.md", help="the report ('' or '-': print only)")
    args = parser.parse_args(argv)
    select_device("cpu")
    started, cpu_started = time.perf_counter(), time.process_time()
    records, cases = sweep(args.seeds, set(args.kind) if args.kind else None,
                           progress=lambda text: print(text, file=sys.stderr, flush=True))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None  # a shared machine stretches the wall time
    text = report(records, cases, args.seeds, time.perf_counter() - started, time.process_time() - cpu_started, load)
    print(text)
    if args.out and args.out != "-":
        write_text_atomically(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
