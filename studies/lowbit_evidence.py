"""Evidence for the low-bit verdicts (issue 16): correct low-bit kernels must pass e2egen's verdict and wrong
ones must fail it, beside the rules the peers use for the same outputs. Writes docs/evidence/lowbit.md.

Kernels: runner/ops/scaled_gemm/kernels.py and runner/ops/product_sum/kernels.py (plain gemms), torch's default
kernels besides. Cases: scaled gemms (MX, block, row and tensor scales; e8m0 and f32 scales; fp8 OCP and
FNUZ, fp4; two- and four-letter layouts; K a multiple of the block or not; f32, bf16 and f16 outputs) on
random quantized data and on the structured patterns, plus plain fp8 and i8 gemms. A wrong kernel's run counts as a bug only where the data reach the bug: its output differs
from its bug-free twin's on the same inputs (the others are listed apart, as invisible).

    .venv/bin/python -m studies.lowbit_evidence [--seeds N] [--out PATH]
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from e2egen import metrics
from e2egen.files import write_text_atomically
from e2egen.generator.cases import applicable_tolerances
from e2egen.runner import run
from e2egen.runner.arithmetic import lookup
from e2egen.runner.arithmetic.requirements import violations
from e2egen.runner.bound import BoundModel
from e2egen.runner.options import Requirements
from e2egen.runner.problem import make_problem

SCALED_K = "e2egen.runner.ops.scaled_gemm.kernels"  # the scaled gemm family's alternate and planted-bug kernels
K = "e2egen.runner.ops.product_sum.kernels"  # the plain fp8 and i8 gemm kernels

# e2egen's verdict as configs.toml ships it: [tolerances] and [require]; i8: tolerances.i8 (exact).
SHIPPED = {"bound_ratio": 1.0, "bound_rms": 0.5, "bias_z": 6.0}
MEMBERSHIP = {"bound_ratio": 1.0}
EXACT_I8 = {"max_abs_diff": 0.0}
REQUIRE = Requirements(acc="f32", compute="f32")
R1 = (-10.0, 10.0)  # configs.toml's r1, the range of its lowbit-scaled suites
WIDE = (-1e6, 1e6)  # reaches beyond f16's largest value (65504) once dequantized

# -- cases ------------------------------------------------------------------------------------------------
PATTERNS = ("identity_a", "identity_b", "ones", "double_a_scale", "double_b_scale")


@dataclass(frozen=True)
class Case:
    name: str
    op: str  # "scaled_gemm" or "gemm"
    dtype: str
    layout: str
    params: dict
    value_range: tuple[float, float] = R1
    data: str = "uniform"

    @property
    def pattern(self) -> str:
        return self.params.get("pattern", "random")

    @property
    def scaling(self) -> str:
        return self.params.get("scaling", "mx")

    @property
    def block(self) -> int:
        return self.params.get("block") or {"mx": 32, "blockwise": 128}.get(self.scaling, 0)

    @property
    def scale_formats(self) -> tuple[str, str]:
        default = "e8m0" if self.scaling == "mx" else "f32"
        return self.params.get("scale_a_dtype", default), self.params.get("scale_b_dtype", default)

    @property
    def k_blocks(self) -> int:
        return math.ceil(self.params["k"] / self.block) if self.block else 1

    @property
    def out_dtype(self) -> str:
        return "i32" if self.dtype == "i8" else self.params.get("out_dtype", "f32")

    def describe(self) -> str:
        p = self.params
        text = f"{self.op} {self.dtype} {self.layout} {p.get('batch') and str(p['batch']) + '×' or ''}{p['m']}×{p['n']}×{p['k']}"
        if self.op == "scaled_gemm":
            sa, sb = self.scale_formats
            text += f" {self.scaling}{self.block or ''} {sa}/{sb}"
            text += f" {self.pattern}" if self.pattern != "random" else ""
        text += f" out {self.out_dtype}"
        text += f" [{self.value_range[0]:g}, {self.value_range[1]:g}]" + (" integers" if self.data == "integers" else "")
        return text


def _scaled(name, dtype, layout, m, n, k, value_range=R1, **extra) -> Case:
    return Case(name, "scaled_gemm", dtype, layout, {"m": m, "n": n, "k": k, **extra}, value_range)


SCALED_RANDOM = [
    _scaled("mx-e4m3", "f8e4m3fn", "nt", 64, 64, 256),
    _scaled("mx-e5m2-k-partial-bf16", "f8e5m2", "tn", 48, 40, 200, out_dtype="bf16"),
    _scaled("mx-fp4", "f4e2m1", "nt", 40, 40, 160),
    _scaled("mx-fp4-k-partial-bf16", "f4e2m1", "tn", 32, 56, 100, out_dtype="bf16"),
    _scaled("mx16-f32-scales-ntnn-f16", "f8e4m3fn", "ntnn", 56, 56, 100, block=16, scale_a_dtype="f32",
            scale_b_dtype="f32", out_dtype="f16"),
    _scaled("blockwise128-k-partial-bf16", "f8e4m3fn", "nt", 64, 72, 300, scaling="blockwise", out_dtype="bf16"),
    _scaled("blockwise32-e8m0-b-tntn", "f8e5m2", "tntn", 40, 64, 96, scaling="blockwise", block=32,
            scale_b_dtype="e8m0"),
    _scaled("rowwise-e4m3", "f8e4m3fn", "nt", 48, 48, 256, scaling="rowwise"),
    _scaled("rowwise-e5m2-bf16", "f8e5m2", "tn", 48, 48, 200, scaling="rowwise", out_dtype="bf16"),
    _scaled("tensor-e4m3fnuz", "f8e4m3fnuz", "nt", 32, 48, 128, scaling="tensor"),
    _scaled("mx-fnuz-pair", "f8e4m3fnuz_f8e5m2fnuz", "tn", 48, 48, 256),
    _scaled("mx-e5m2fnuz-bf16", "f8e5m2fnuz", "nt", 40, 40, 96, out_dtype="bf16"),
    _scaled("mx-batched-nn", "f8e4m3fn", "nn", 32, 32, 128, batch=2),
    _scaled("rowwise-e8m0-e4m3fnuz-ttnn", "f8e4m3fnuz", "ttnn", 40, 40, 64, scaling="rowwise", scale_a_dtype="e8m0",
            scale_b_dtype="e8m0"),
    # data reaching beyond f16's range once dequantized (e8m0 scales carry the magnitude)
    _scaled("wide-mx-e4m3", "f8e4m3fn", "nt", 48, 48, 128, WIDE),
    _scaled("wide-mx-fp4-bf16", "f4e2m1", "tn", 32, 40, 64, WIDE, out_dtype="bf16"),
    _scaled("wide-blockwise32-e8m0-e5m2", "f8e5m2", "nt", 40, 40, 96, WIDE, scaling="blockwise", block=32,
            scale_a_dtype="e8m0", scale_b_dtype="e8m0"),
    # blocks of different magnitudes (pattern "varied"): different e8m0 scales from block to block
    _scaled("varied-mx-e4m3", "f8e4m3fn", "nt", 48, 48, 256, pattern="varied"),
    _scaled("varied-mx-fp4-bf16", "f4e2m1", "tn", 32, 40, 128, pattern="varied", out_dtype="bf16"),
    _scaled("varied-blockwise32-e8m0", "f8e4m3fn", "nt", 40, 64, 96, scaling="blockwise", block=32,
            scale_a_dtype="e8m0", scale_b_dtype="e8m0", pattern="varied"),
]

STRUCTURED_BASES = [
    _scaled("s-mx-e4m3", "f8e4m3fn", "nt", 40, 40, 100),
    _scaled("s-mx16-fp4-tntn", "f4e2m1", "tntn", 32, 32, 64, block=16),
    _scaled("s-blockwise16-e5m2-bf16", "f8e5m2", "nt", 48, 48, 80, scaling="blockwise", block=16, out_dtype="bf16"),
    _scaled("s-rowwise-e4m3", "f8e4m3fn", "nt", 40, 40, 64, scaling="rowwise"),
    _scaled("s-tensor-e4m3fnuz-ntnn", "f8e4m3fnuz", "ntnn", 32, 32, 48, scaling="tensor"),
    _scaled("s-mx-fnuz-pair", "f8e4m3fnuz_f8e5m2fnuz", "nt", 36, 36, 96),
]
SCALED_STRUCTURED = [Case(f"{base.name}-{pattern}", base.op, base.dtype, base.layout, {**base.params, "pattern": pattern},
                          base.value_range) for base in STRUCTURED_BASES for pattern in PATTERNS]

GEMM_FP8 = [
    Case("gemm-e4m3", "gemm", "f8e4m3fn", "nt", {"m": 32, "n": 48, "k": 256}, (-1.0, 1.0)),
    Case("gemm-e5m2", "gemm", "f8e5m2", "tn", {"m": 32, "n": 32, "k": 512}, R1),
    Case("gemm-e4m3fnuz-to-max", "gemm", "f8e4m3fnuz", "nn", {"m": 32, "n": 32, "k": 256}, (-240.0, 240.0)),
    Case("gemm-e5m2fnuz-to-max", "gemm", "f8e5m2fnuz", "nt", {"m": 32, "n": 32, "k": 128}, (-57344.0, 57344.0)),
    Case("gemm-fnuz-pair", "gemm", "f8e4m3fnuz_f8e5m2fnuz", "tn", {"m": 32, "n": 32, "k": 256}, (-2.0, 2.0)),
]
GEMM_I8 = [
    Case("gemm-i8-rocmlir-data", "gemm", "i8", "nn", {"m": 32, "n": 32, "k": 256}, (-5.0, 4.0), "integers"),
    Case("gemm-i8-full-range", "gemm", "i8", "nt", {"m": 32, "n": 32, "k": 64}, (-127.0, 127.0), "integers"),
    Case("gemm-i8-full-range-k512", "gemm", "i8", "tn", {"m": 16, "n": 24, "k": 512}, (-127.0, 127.0), "integers"),
]
CASES = SCALED_RANDOM + SCALED_STRUCTURED + GEMM_FP8 + GEMM_I8


# -- kernels ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Kernel:
    name: str
    impl: str | None  # None: torch's default kernel
    correct: bool
    applies: Callable[[Case], bool]
    twin: str | None = None  # wrong kernels: the same kernel without the bug (decides whether the data reach it)
    where: str = ""  # where it runs, in words


def _scaled_case(case: Case) -> bool:
    return case.op == "scaled_gemm"


def _fp8_gemm(case: Case) -> bool:
    return case.op == "gemm" and case.dtype != "i8"


def _i8_gemm(case: Case) -> bool:
    return case.dtype == "i8"


def _e8m0(case: Case) -> bool:
    return _scaled_case(case) and "e8m0" in case.scale_formats


TWIN = f"{SCALED_K}:scaled_f32_dequant"
KERNELS = [
    Kernel("torch's default (scaled)", None, True, _scaled_case, where="every scaled case"),
    Kernel("f32 dequantize, one matmul", TWIN, True, _scaled_case, where="every scaled case"),
    Kernel("f32, K in chunks of 24 added last first", f"{SCALED_K}:scaled_f32_reordered", True, _scaled_case,
           where="every scaled case"),
    Kernel("per-block f32 partials × sa·sb (promotion)", f"{SCALED_K}:scaled_promoted_blocks", True, _scaled_case,
           where="every scaled case"),
    Kernel("torch's default (fp8 gemm)", None, True, _fp8_gemm, where="every fp8 gemm"),
    Kernel("fp8 gemm, f32, split-K in 4", f"{K}:fp8_split_k", True, _fp8_gemm, where="every fp8 gemm"),
    Kernel("torch's default (i8 gemm)", None, True, _i8_gemm, where="every i8 gemm"),
    Kernel("i8 gemm, int32 accumulator", f"{K}:i8_int32", True, _i8_gemm, where="every i8 gemm"),
    Kernel("i8 gemm, int64 accumulator", f"{K}:i8_int64", True, _i8_gemm, where="every i8 gemm"),
    # wrong
    Kernel("scales applied per row instead of per column", f"{SCALED_K}:scaled_scales_swapped", False,
           lambda c: _scaled_case(c) and c.scaling in ("rowwise", "mx") and c.params["m"] == c.params["n"],
           twin=f"{SCALED_K}:scaled_promoted_blocks",
           where="row and MX scales with m = n (elsewhere the swapped vectors do not broadcast and the kernel "
                 "raises; one tensor scale each makes the swap a no-op)"),
    Kernel("A's scale from the next K block", f"{SCALED_K}:scaled_next_block_scale", False,
           lambda c: _scaled_case(c) and c.k_blocks >= 2, twin=TWIN, where="block and MX scales, ⌈k/blk⌉ ≥ 2"),
    Kernel("block edge off by one (last element of a block)", f"{SCALED_K}:scaled_block_edge_off_by_one", False,
           lambda c: _scaled_case(c) and c.k_blocks >= 2, twin=TWIN, where="block and MX scales, ⌈k/blk⌉ ≥ 2"),
    Kernel("E8M0 bias off by one (2^(code-126))", f"{SCALED_K}:scaled_e8m0_bias_126", False, _e8m0, twin=TWIN,
           where="cases with an e8m0 scale"),
    Kernel("FNUZ read as FN (scaled)", f"{SCALED_K}:scaled_fnuz_read_as_fn", False,
           lambda c: _scaled_case(c) and "fnuz" in c.dtype, twin=TWIN, where="FNUZ elements"),
    Kernel("saturation missing: dequantized into f16 (inf beyond 65504)", f"{SCALED_K}:scaled_f16_dequant", False,
           lambda c: _scaled_case(c) and c.scale_formats == ("e8m0", "e8m0"), twin=TWIN,
           where="e8m0 scales on both operands (with f32 scales f16 also rounds: another bug)"),
    Kernel("f16 accumulator (scaled)", f"{SCALED_K}:scaled_f16_accumulator", False, _scaled_case, twin=TWIN,
           where="every scaled case"),
    Kernel("FNUZ read as FN (fp8 gemm)", f"{K}:fp8_fnuz_read_as_fn", False,
           lambda c: _fp8_gemm(c) and "fnuz" in c.dtype, twin=f"{K}:fp8_f32", where="FNUZ gemms"),
    Kernel("f16 accumulator (fp8 gemm)", f"{K}:fp8_f16_accumulator", False, _fp8_gemm, twin=f"{K}:fp8_f32",
           where="every fp8 gemm"),
    Kernel("i16 accumulator (i8 gemm, wraps)", f"{K}:i8_i16_accumulator", False, _i8_gemm, twin=f"{K}:i8_int64",
           where="every i8 gemm"),
]

# -- peers' rules ---------------------------------------------------------------------------------------------
RULES = ("e2egen", "bound_ratio <= 1 alone", "assert_close defaults", "torch 7e-2", "torch row-wise test",
         "cosine >= 0.999", "SQNR >= 22 dB", "SQNR >= 15 dB", "TE dtype_tols", "rocMLIR allclose")
# Transformer Engine tests/pytorch/utils.py dtype_tols: (rtol, atol) per element format
TE_TOLS = {"e4m3": (0.125, 0.0675), "e5m2": (0.25, 0.125), "e2m1": (0.25, 0.125)}
# rocmlirTriton docs/allclose_comparator.md: allcloseBaseline (atol, rtol) and sumErrorTolerance per format
ROCMLIR = {"e4m3": (0.1, 0.125, 0.125), "e5m2": (0.1, 0.25, 0.25), "e2m1": (1.0, 0.5, 0.5)}


def _element_family(dtype: str) -> str | None:
    """The loosest element format of the case (a pair: the wider-mantissa-loss one), by mantissa width."""
    if dtype == "i8":
        return None
    if "e5m2" in dtype:
        return "e5m2"
    return "e2m1" if dtype == "f4e2m1" else "e4m3"


def _allclose(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> bool:
    """|out - ref| <= atol + rtol·|ref| everywhere; NaN or inf where ref is finite fails."""
    diff = (out - ref).abs()
    return bool(((diff <= atol + rtol * ref.abs()) | (out == ref)).all())


def peers(case: Case, out: torch.Tensor, ref: torch.Tensor) -> dict[str, bool | None]:
    """Each peer's rule on one output (None: the rule has nothing for this dtype)."""
    if out.dtype.is_floating_point:  # rounded once from float64 (torch's casts to bf16/f16 round twice)
        ref_t = metrics.round_to(ref, case.out_dtype).to(out.dtype)
    else:
        ref_t = ref.to(out.dtype)
    out64, ref64 = out.double(), ref_t.double()
    results: dict[str, bool | None] = {}
    try:
        torch.testing.assert_close(out, ref_t)
        results["assert_close defaults"] = True
    except AssertionError:
        results["assert_close defaults"] = False
    flat_out, flat_ref = out64.flatten(), ref.flatten()
    cosine = torch.nn.functional.cosine_similarity(flat_out, flat_ref, dim=0)
    results["torch 7e-2"] = _allclose(out64, ref64, 7e-2, 7e-2)
    tight = 7e-2 if out.dtype in (torch.bfloat16, torch.float16) else 2e-3
    results["cosine >= 0.999"] = bool(cosine >= 0.999)
    results["torch row-wise test"] = _allclose(out64, ref64, tight, tight) and results["cosine >= 0.999"]
    noise = float(torch.linalg.vector_norm(flat_ref - flat_out))
    if not math.isfinite(noise):  # NaN or inf in the output: no signal left
        sqnr = -math.inf
    else:
        signal = float(torch.linalg.vector_norm(flat_ref))
        sqnr = math.inf if noise == 0 else (20 * math.log10(signal / noise) if signal > 0 else -math.inf)
    results["SQNR >= 22 dB"] = bool(sqnr >= 22)
    results["SQNR >= 15 dB"] = bool(sqnr >= 15)
    family = _element_family(case.dtype)
    if family is None:
        results["TE dtype_tols"] = results["rocMLIR allclose"] = None
    else:
        rtol, atol = TE_TOLS[family]
        results["TE dtype_tols"] = _allclose(out64, ref64, atol, rtol)
        base_atol, per_k, rtol = ROCMLIR[family]
        results["rocMLIR allclose"] = _allclose(out64, ref64, base_atol + case.params["k"] * per_k, rtol)
    return results


# -- one run --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    verdicts: dict  # rule -> passed (None: not applicable)
    worst: float  # bound_ratio (inf where NaN/inf mismatches); i8: max_abs_diff
    max_abs_diff: float
    reached: bool  # a wrong kernel's output differs from its bug-free twin's (True for correct kernels)
    caught_by: str  # which part of e2egen's verdict failed it, in words ("" if it passed)
    bias_z: float = 0.0


def problem_of(case: Case, seed: int):
    return make_problem(case.op, "fwd", case.dtype, case.layout, case.params, list(case.value_range), seed, case.data)


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.dtype.is_floating_point:
        return tensor.contiguous().view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[tensor.element_size()])
    return tensor


def judge(kernel: Kernel, case: Case, seed: int, twins: dict) -> Outcome:
    problem = problem_of(case, seed)
    integer = case.dtype == "i8"
    result = run(problem, impl=kernel.impl, bound=None if integer else BoundModel())
    out, ref = result.out.cpu(), result.ref.cpu()
    reached = True
    if kernel.twin is not None:
        key = (kernel.twin, case.name, seed)
        if key not in twins:
            twins[key] = run(problem, impl=kernel.twin, bound=None, measure=False).out.cpu()
        reached = not torch.equal(_bits(out), _bits(twins[key]))
    comparison = metrics.compare(ref, out, result.out_dtype, bound=None if integer else result.bound)
    verdicts: dict = {}
    if integer:
        verdicts["e2egen"] = verdicts["bound_ratio <= 1 alone"] = comparison.check(EXACT_I8).passed
        caught = "" if verdicts["e2egen"] else "exact comparison"
        worst = comparison.max_abs_diff
    else:
        membership = comparison.check(MEMBERSHIP).passed
        rule = applicable_tolerances(SHIPPED, problem.spec.shared_rounding(problem.params))
        shipped = comparison.check(rule).passed
        arithmetic = result.arithmetic.arithmetic if result.arithmetic is not None else None
        broken = [v.key for v in violations(REQUIRE, arithmetic, case.dtype)] if arithmetic is not None else []
        verdicts["bound_ratio <= 1 alone"] = membership
        verdicts["e2egen"] = shipped and not broken
        parts = ([] if membership else ["bound_ratio"]) + [name for name, limit in rule.items()
                                                           if name != "bound_ratio" and not comparison.check({name: limit}).passed]
        parts += [f"require.{key}" for key in broken]
        caught = ", ".join(dict.fromkeys(parts))
        mismatched = comparison.nan_mismatch + comparison.inf_mismatch
        worst = math.inf if mismatched else comparison.bound_ratio
    verdicts.update(peers(case, out, ref))
    return Outcome(verdicts, worst, float(comparison.max_abs_diff), reached, caught,
                   0.0 if integer else float(comparison.bias_z))


# -- the study ------------------------------------------------------------------------------------------------
@dataclass
class Row:
    runs: int = 0  # runs counted (a wrong kernel's: those where the data reach the bug)
    invisible: int = 0  # wrong kernels: runs where the output equals the bug-free twin's
    invisible_random: int = 0  # ... of which on random data
    varied_runs: int = 0  # runs on "varied" data (blocks of different magnitudes), reached or not
    varied_invisible: int = 0
    failed: dict = field(default_factory=lambda: {rule: 0 for rule in RULES})
    judged: dict = field(default_factory=lambda: {rule: 0 for rule in RULES})  # runs a rule applies to
    worst: float = 0.0  # largest bound_ratio on random data (inf: NaN or inf where the reference is finite)
    worst_structured: float = 0.0  # ... on structured cases (the bound is 0 where ref is a value of T)
    caught_by: dict = field(default_factory=dict)  # e2egen's failing parts -> runs
    structured_runs: int = 0
    structured_exact: int = 0  # correct kernels, structured cases: max_abs_diff == 0 (f32 out) / correctly rounded
    structured_failed: int = 0  # e2egen failures among structured runs (wrong kernels: caught)
    failing_cases: dict = field(default_factory=dict)  # correct kernels: "case seed N" -> (failing parts, bound_ratio, bias_z)
    missed_cases: set = field(default_factory=set)


def evaluate(seeds: int, cases: list[Case] | None = None, kernels: list[Kernel] | None = None) -> dict[str, Row]:
    """Every kernel on every case it applies to, seeds 0..seeds-1."""
    rows: dict[str, Row] = {}
    twins: dict = {}
    for kernel in kernels or KERNELS:
        row = rows.setdefault(kernel.name, Row())
        for case in cases or CASES:
            if not kernel.applies(case):
                continue
            for seed in range(seeds):
                outcome = judge(kernel, case, seed, twins)
                structured = case.pattern not in ("random", "varied")
                if case.pattern == "varied":
                    row.varied_runs += 1
                    row.varied_invisible += not outcome.reached
                if not outcome.reached:
                    row.invisible += 1
                    row.invisible_random += not structured
                    continue
                row.runs += 1
                if structured:
                    row.worst_structured = max(row.worst_structured, outcome.worst)
                else:
                    row.worst = max(row.worst, outcome.worst)
                for rule, passed in outcome.verdicts.items():
                    if passed is None:
                        continue
                    row.judged[rule] += 1
                    row.failed[rule] += not passed
                e2egen_passed = outcome.verdicts["e2egen"]
                if not e2egen_passed:
                    row.caught_by[outcome.caught_by] = row.caught_by.get(outcome.caught_by, 0) + 1
                    if kernel.correct:
                        row.failing_cases[f"{case.name} seed {seed}"] = (outcome.caught_by, outcome.worst, outcome.bias_z)
                elif not kernel.correct:
                    row.missed_cases.add(f"{case.name} seed {seed}")
                if structured:
                    row.structured_runs += 1
                    row.structured_failed += not e2egen_passed
                    if kernel.correct and _exact(outcome, case):
                        row.structured_exact += 1
    return rows


def _exact(outcome: Outcome, case: Case) -> bool:
    """A structured case's promise: f32 out bit-exact; a narrower out within its one rounding."""
    if case.out_dtype == "f32":
        return outcome.max_abs_diff == 0.0
    return outcome.worst <= 1.0


def totals(rows: dict[str, Row], correct: bool) -> tuple[int, dict, dict]:
    """(runs, failed per rule, judged per rule) over the correct or the wrong kernels."""
    chosen = [rows[k.name] for k in KERNELS if k.correct == correct and k.name in rows]
    return (sum(r.runs for r in chosen), {rule: sum(r.failed[rule] for r in chosen) for rule in RULES},
            {rule: sum(r.judged[rule] for r in chosen) for rule in RULES})


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "–"


def render(rows: dict[str, Row], seeds: int, seconds: float) -> str:
    good_runs, good_failed, good_judged = totals(rows, True)
    bad_runs, bad_failed, bad_judged = totals(rows, False)
    structured = [rows[k.name] for k in KERNELS if k.correct and k.name in rows]
    s_runs, s_exact = sum(r.structured_runs for r in structured), sum(r.structured_exact for r in structured)
    lines = [
        "# Low-bit kernels: evidence", "",
        f"Command: `.venv/bin/python -m studies.lowbit_evidence --seeds {seeds}` (torch {torch.__version__}, CPU; "
        f"{seconds:.0f} s). Kernels: runner/ops/scaled_gemm/kernels.py, runner/ops/product_sum/kernels.py (plain gemms) "
        "and torch's default kernels. Cases: "
        f"{len(SCALED_RANDOM)} scaled gemms on random quantized data, {len(STRUCTURED_BASES)} × {len(PATTERNS)} "
        f"structured scaled gemms, {len(GEMM_FP8)} fp8 gemms, {len(GEMM_I8)} i8 gemms (listed at the end), seeds "
        f"0..{seeds - 1}.", "",
        "**e2egen's verdict** is configs.toml's: bound_ratio <= 1 (every element inside its bound, no NaN or inf "
        "where the reference is finite), bound_rms <= 0.5, bias_z <= 6 (left out where a scale is f32: "
        "`Op.shared_rounding`), and `require.acc = \"f32\"` / "
        "`compute = \"f32\"` on what the probes measured (an unexplained probe outcome fails too); i8: exact "
        "(`max_abs_diff = 0`, i32 output). Beside it, the peers' rules, each on the same output against the float64 "
        "reference rounded to the output dtype:", "",
        "- **assert_close defaults**: `torch.testing.assert_close(out, ref)` at the output dtype's defaults (f32 "
        "rtol 1.3e-6 atol 1e-5, bf16 1.6e-2/1e-5, f16 1e-3/1e-5, i32 exact);",
        "- **torch 7e-2**: atol = rtol = 7e-2, what PyTorch's fp8 tests allow a bf16/f16 output "
        "(pytorch/pytorch `test/test_scaled_matmul_cuda.py`, `test_scaled_mm_vs_emulated*`), here on every output;",
        "- **torch row-wise test**: that test as written: atol = rtol = 7e-2 for bf16/f16 outputs, 2e-3 for f32 "
        "ones, and cosine similarity >= 0.999 (`test_scaled_mm_vs_emulated_row_wise`);",
        "- **cosine >= 0.999** alone;",
        "- **SQNR** 20·log10(‖ref‖ / ‖ref − out‖) >= 22 dB (PyTorch's MX/NVFP4 gemm tests, "
        "`approx_match_sqnr_target = 22.0` in `test_blockwise_mxfp8_nvfp4_mxfp4_numerics`) and >= 15 dB (the "
        "looser end the issue names; torchao's low-bit tests use 15 to 27 dB);",
        "- **TE dtype_tols**: Transformer Engine's `dtype_tols` for the element format (NVIDIA/TransformerEngine "
        "`tests/pytorch/utils.py`: e4m3 rtol 0.125 atol 0.0675, e5m2 0.25/0.125, fp4 e2m1 0.25/0.125; a pair "
        "takes its looser format's); none for i8;",
        "- **rocMLIR allclose**: |out − ref| <= atol + rtol·|ref| with atol = base + K·eps and rtol = eps of the "
        "narrowest float in the dataflow (ROCm/rocmlirTriton `docs/allclose_comparator.md`: e4m3 0.1 + K·0.125 "
        "and 0.125; e5m2 0.1 + K·0.25 and 0.25; fp4 1 + K·0.5 and 0.5); none for i8.", "",
        "A wrong kernel's run counts only where the data reach its bug: where its output differs from its bug-free "
        "twin's on the same inputs; runs where they are equal are listed as *invisible* (the data cannot show the "
        "bug; no rule can catch it there).", "",
        "## Summary", "",
        "| rule | false failures (correct kernels) | bugs caught (wrong kernels) | catch rate |",
        "| --- | ---: | ---: | ---: |",
    ]
    for rule in RULES:
        lines.append(f"| {rule} | {good_failed[rule]} of {good_judged[rule]} | {bad_failed[rule]} of {bad_judged[rule]} | "
                     f"{_percent(bad_failed[rule], bad_judged[rule])} |")
    lines += ["", f"**e2egen: {good_failed['e2egen']} false failures in {good_runs} runs of correct kernels; "
              f"{bad_failed['e2egen']} of {bad_runs} bug runs caught ({_percent(bad_failed['e2egen'], bad_runs)}); "
              f"structured cases exact for every correct kernel in {s_exact} of {s_runs} runs.**", "",
              "## Per kernel", "",
              "Counts are failed runs of the rule (for a correct kernel: false failures; for a wrong one: catches). "
              "*e2egen's failing parts* says which part of its verdict failed the runs it caught.", "",
              "| kernel | correct? | where it runs | runs | invisible (random data) | worst bound_ratio, random | "
              "worst, structured | structured runs failed | " + " | ".join(RULES) + " | e2egen's failing parts |",
              "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in RULES) + " | --- |"]
    for kernel in KERNELS:
        if kernel.name not in rows:
            continue
        row = rows[kernel.name]
        cells = [f"{row.failed[rule]}/{row.judged[rule]}" if row.judged[rule] else "–" for rule in RULES]
        parts = "; ".join(f"{name or 'passed'}: {count}" for name, count in sorted(row.caught_by.items())) or "–"
        invisible = f"{row.invisible} ({row.invisible_random})" if not kernel.correct else "–"
        lines.append(f"| {kernel.name} | {'yes' if kernel.correct else 'no'} | {kernel.where} | {row.runs} | {invisible} | "
                     f"{row.worst:.3g} | {row.worst_structured:.3g} | {row.structured_failed}/{row.structured_runs} | "
                     + " | ".join(cells) + f" | {parts} |")
    misses = [(k.name, sorted(rows[k.name].missed_cases)) for k in KERNELS if k.name in rows and rows[k.name].missed_cases]
    false = [(k.name, [f"{c} ({parts}; bound_ratio {ratio:.2g}, bias_z {z:.1f})"
                       for c, (parts, ratio, z) in sorted(rows[k.name].failing_cases.items())])
             for k in KERNELS if k.name in rows and rows[k.name].failing_cases]
    if false:
        lines += ["", "False failures of e2egen's verdict:", ""] + [f"- {name}: {', '.join(c)}" for name, c in false]
    if misses:
        lines += ["", "Bug runs e2egen's verdict passed:", ""] + [f"- {name}: {', '.join(c)}" for name, c in misses]
    lines += ["", "## Findings", ""] + findings(rows)
    lines += ["", "## Cases", ""] + [f"- `{case.name}`: {case.describe()}" for case in SCALED_RANDOM + STRUCTURED_BASES
                                     + GEMM_FP8 + GEMM_I8]
    lines += [f"- the structured bases above each with pattern {', '.join(PATTERNS)}"]
    return "\n".join(lines) + "\n"


def findings(rows: dict[str, Row]) -> list[str]:
    """The results in words, with this run's numbers."""
    def row(name: str) -> Row:
        return rows.get(name, Row())

    good_runs, good_failed, _ = totals(rows, True)
    bad_runs, bad_failed, bad_judged = totals(rows, False)
    acc_only = sum(r.caught_by.get("require.acc", 0) for r in rows.values())
    scale_bugs = ("scales applied per row instead of per column", "A's scale from the next K block",
                  "block edge off by one (last element of a block)")
    invisible_random = sum(row(name).invisible_random - row(name).varied_invisible for name in scale_bugs)
    varied_invisible = sum(row(name).varied_invisible for name in scale_bugs)
    varied_runs = sum(row(name).varied_runs for name in scale_bugs)
    reached_random = sum(row(name).runs - row(name).structured_runs - (row(name).varied_runs - row(name).varied_invisible)
                         for name in scale_bugs)
    edge = row("block edge off by one (last element of a block)")
    bias = row("E8M0 bias off by one (2^(code-126))")
    return [
        f"1. **Bugs.** e2egen's verdict failed {bad_failed['e2egen']} of the {bad_runs} bug runs the data reach. "
        f"bound_ratio <= 1 alone failed {bad_failed['bound_ratio <= 1 alone']}; {acc_only} more failed only "
        "`require.acc = \"f32\"`: the f16 accumulators whose sums stay inside f16's range. That is the design "
        "(docs/reference/ops.md, low-bit dtypes): the bound follows the accumulator the probes measure (11 bits), and the "
        "catalogue's policy rejects it. fp4 cannot be probed (its values cannot hold the probes' exponent gaps), "
        "so there the bound assumes f32 and only bound_ratio can catch the f16 accumulator: it does wherever the "
        "accumulator moves an output farther than a correct kernel's error may reach; a run where it moves one "
        "output of a coarser format (bf16) to the reference's other neighbour passes, as it must.",
        f"2. **False failures: {good_failed['e2egen']} of {good_runs}.** An earlier run of this study found 3, "
        "all bias_z alone, all from the promotion kernel on the tensor-scaled case with f32 scales "
        "(`tensor-e4m3fnuz`, bias_z 16 to 24 while bound_ratio stayed below 0.01): it multiplies the two f32 "
        "tensor scales first, so one rounding of sa·sb (up to 2^-24) is shared by every output element, a "
        "common-mode lean that bias_z, which assumes independent per-element errors, reads as a bias. The "
        "bound already counts that rounding (F32_SCALE_ROUNDINGS = 3). So a scaled gemm with an f32 scale now "
        "says a correct kernel may share one rounding across many elements (`Op.shared_rounding`), and its "
        "cases leave bias_z out of the verdict (`generator.cases.applicable_tolerances`; the same rule here). "
        f"Of the bug runs, {sum(n for r in rows.values() for parts, n in r.caught_by.items() if 'bias_z' in parts)} "
        "failed bias_z among other parts and none failed it alone on a case where it is left out.",
        "3. **Structured cases** came back exact for every correct kernel in every run (f32 outputs bit for bit, "
        "bf16 outputs rounded once: their bound_ratio is exactly 1 where the result is not a bf16 value, by "
        "construction), and every wrong kernel that the pattern reaches failed there (bound 0 where the exact "
        "result is a value of the output format, hence the inf in *worst, structured*).",
        f"4. **What random data cannot show.** Uniform draws give almost every block the same amax power of two, "
        f"so every block the same e8m0 scale: the three scale-indexing bugs returned the bit-identical result in "
        f"{invisible_random} of {invisible_random + reached_random} uniform-data runs; the structured patterns "
        "(`ones`, `identity_b`, `double_*`), f32 scales and the `varied` pattern (each block's magnitude times "
        f"2^e, e in -4..4; added after this finding) reach them: on varied data they were invisible in "
        f"{varied_invisible} of {varied_runs} runs. FNUZ read as FN differs only "
        "where an element is ±max (e4m3fnuz 240) or in e5m2fnuz's top binade: MX quantization puts each block's "
        "largest element there often (e5m2fnuz: always) and f32 scales map each block's amax exactly onto max, "
        "so scaled data reach it; a plain fp8 gemm reaches it only when its range does ([-240, 240], "
        "[-57344, 57344]), not on [-2, 2]. The NaN/−0 half of that bug (0x80 is NaN in FNUZ, −0 in FN) is "
        "unreachable by honest data: no quantized input is NaN. An i16 accumulator wraps only once a sum leaves "
        "±32767: rocMLIR's −5..4 data with K = 256 reach at most 6,400, full-range i8 wraps. f16 "
        "dequantization is exact inside f16's range and was run on data reaching beyond it (±1e6).",
        "5. **Saturation.** Against this contract a missing saturation cannot be built at the output: outputs are "
        "f32/bf16/f16, whose IEEE conversion gives inf beyond max, which both IEEE and e2egen's overflow rule "
        "(CTS) expect; the elements arrive already quantized (e2egen saturates them, runner/ops/scaled_gemm/scaling.py). The "
        "conversion that gives inf where the exact value is finite is therefore inside the kernel: the f16 "
        "dequantization above (a saturating one would give 65504 there, as wrong).",
        f"6. **Peers.** assert_close's defaults fail correct kernels ({good_failed['assert_close defaults']} runs: "
        "f32 outputs with rtol 1.3e-6, below an f32 accumulation's error over K terms). The flat 7e-2 and TE's "
        "tolerances have no false failures but miss what stays inside a few percent: the block-edge bug "
        f"(torch 7e-2 caught {edge.failed['torch 7e-2']} of {edge.runs}, TE {edge.failed['TE dtype_tols']}) and the "
        "f16 accumulators. Cosine similarity is blind to a uniform factor: it caught the E8M0 bias bug (every "
        f"scale doubled) in {bias.failed['cosine >= 0.999']} of {bias.runs} runs; SQNR catches that one (0 dB) but "
        f"caught the block-edge bug in {edge.failed['SQNR >= 22 dB']} of {edge.runs} even at 22 dB. rocMLIR's "
        "allclose grows its atol with K whatever the data's magnitude (0.1 + K/8 for e4m3: 32 at K = 256), "
        f"so it caught {bad_failed['rocMLIR allclose']} of {bad_judged['rocMLIR allclose']}. The absolute "
        "tolerances mean different things at different magnitudes (data in [-10, 10] here; scales carry any "
        "magnitude); e2egen's bound scales with the data.",
    ]


@contextlib.contextmanager
def fresh_profiles():
    """Probe every kernel afresh (a temporary profile cache), whatever the user's cache holds."""
    before = os.environ.get("E2EGEN_PROFILES")
    with tempfile.TemporaryDirectory() as folder:
        os.environ["E2EGEN_PROFILES"] = folder
        lookup.forget()
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("E2EGEN_PROFILES", None)
            else:
                os.environ["E2EGEN_PROFILES"] = before
            lookup.forget()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", default="docs/evidence/lowbit.md")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with fresh_profiles():
        rows = evaluate(args.seeds)
    text = render(rows, args.seeds, time.perf_counter() - started)
    write_text_atomically(Path(args.out), text)
    print(text)


if __name__ == "__main__":
    main()
