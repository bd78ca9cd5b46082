"""The low-bit evidence (studies/lowbit_evidence.py) on a fast subset: e2egen's verdict passes every correct
kernel, fails every wrong one wherever the data reach its bug, and every structured case comes back exact.

A kernel that multiplies two f32 tensor scales first shares that one rounding across its whole output,
which bias_z would read as a lean (docs/evidence/lowbit.md, "Findings"); a scaled gemm with an f32 scale
therefore leaves bias_z out of its verdict (Op.shared_rounding), and the test below holds that."""
from __future__ import annotations

import pytest
import torch

from studies import lowbit_evidence as evidence
from studies.lowbit_evidence import PATTERNS, Case, R1, WIDE

SEEDS = 2
PROMOTION = "per-block f32 partials × sa·sb (promotion)"


pytestmark = pytest.mark.usefixtures("fresh_profiles")  # tests/conftest.py


def scaled(name, dtype, layout, m, n, k, value_range=R1, **extra):
    return Case(name, "scaled_gemm", dtype, layout, {"m": m, "n": n, "k": k, **extra}, value_range)


SMALL = [
    scaled("mx-e4m3", "f8e4m3fn", "nt", 32, 32, 96),
    scaled("mx-fp4-bf16", "f4e2m1", "tn", 16, 24, 64, out_dtype="bf16"),
    scaled("blockwise16-e5m2-ntnn-f16", "f8e5m2", "ntnn", 24, 24, 48, scaling="blockwise", block=16, out_dtype="f16"),
    scaled("rowwise-e8m0-fnuz-pair", "f8e4m3fnuz_f8e5m2fnuz", "tntn", 24, 24, 64, scaling="rowwise",
           scale_a_dtype="e8m0", scale_b_dtype="e8m0"),
    scaled("tensor-e4m3fnuz", "f8e4m3fnuz", "nt", 16, 24, 64, scaling="tensor"),
    scaled("wide-mx-e4m3", "f8e4m3fn", "nt", 24, 24, 64, WIDE),
    *(scaled(f"s-mx-e4m3-{p}", "f8e4m3fn", "nt", 24, 24, 40, pattern=p) for p in PATTERNS),
    *(scaled(f"s-rowwise-e5m2-{p}", "f8e5m2", "tn", 16, 16, 32, scaling="rowwise", pattern=p) for p in PATTERNS),
    Case("gemm-e4m3fnuz-to-max", "gemm", "f8e4m3fnuz", "nn", {"m": 16, "n": 16, "k": 64}, (-240.0, 240.0)),
    Case("gemm-e5m2", "gemm", "f8e5m2", "tn", {"m": 16, "n": 16, "k": 128}, R1),
    Case("gemm-i8-full-range", "gemm", "i8", "nt", {"m": 16, "n": 16, "k": 64}, (-127.0, 127.0), "integers"),
]


@pytest.fixture(scope="module")
def rows():
    return evidence.evaluate(SEEDS, SMALL)


def test_every_correct_kernel_passes_and_every_structured_case_is_exact(rows):
    for kernel in (k for k in evidence.KERNELS if k.correct):
        row = rows[kernel.name]
        assert row.runs > 0, kernel.name
        assert not row.failing_cases, f"false failure: {kernel.name} in {row.failing_cases}"
        assert row.failed["bound_ratio <= 1 alone"] == 0, kernel.name
        assert row.structured_exact == row.structured_runs, kernel.name
    scaled_rows = [rows[k.name] for k in evidence.KERNELS if k.correct and k.applies(SMALL[0])]
    assert all(row.structured_runs == 2 * SEEDS * len(PATTERNS) for row in scaled_rows)


def test_every_wrong_kernel_is_caught_wherever_the_data_reach_its_bug(rows):
    for kernel in (k for k in evidence.KERNELS if not k.correct):
        row = rows[kernel.name]
        assert row.runs > 0, f"{kernel.name}: no case reaches the bug"
        assert row.failed["e2egen"] == row.runs, f"missed: {kernel.name} in {sorted(row.missed_cases)}"


def test_a_kernel_that_multiplies_f32_tensor_scales_first_passes_the_shipped_verdict():
    case = scaled("tensor-e4m3fnuz", "f8e4m3fnuz", "nt", 32, 48, 128, scaling="tensor")
    kernel = next(k for k in evidence.KERNELS if k.name == PROMOTION)
    outcome = evidence.judge(kernel, case, 0, {})
    assert outcome.verdicts["bound_ratio <= 1 alone"] and outcome.worst < 0.1  # far inside the bound
    assert outcome.verdicts["e2egen"], outcome.caught_by


def test_the_bugs_invisible_to_the_data_are_the_expected_ones(rows):
    """Identity patterns sum one term per output: an f16 accumulator is exact there; FNUZ read as FN differs
    only where an element is ±max; f16 dequantization only beyond 65504."""
    assert rows["f16 accumulator (scaled)"].invisible >= 2 * SEEDS  # identity_a and identity_b at least
    assert rows["saturation missing: dequantized into f16 (inf beyond 65504)"].invisible > 0  # the r1 cases


def test_the_peers_rules_are_computed_as_documented():
    case = Case("c", "scaled_gemm", "f8e4m3fn", "nt", {"m": 2, "n": 2, "k": 100}, R1)
    ref = torch.tensor([[100.0, -50.0], [3.0, 0.0]], dtype=torch.float64)
    off = ref.float() * 1.05  # 5 % off everywhere: inside 7e-2 and TE's 0.125, outside f32's defaults
    verdicts = evidence.peers(case, off, ref)
    assert verdicts["torch 7e-2"] and verdicts["TE dtype_tols"] and verdicts["rocMLIR allclose"]
    assert not verdicts["assert_close defaults"] and not verdicts["torch row-wise test"]
    assert verdicts["SQNR >= 22 dB"]  # 20·log10(1 / 0.05) = 26 dB
    nan = ref.float().clone()
    nan[0, 0] = float("nan")
    assert not any(evidence.peers(case, nan, ref).values())


def test_the_study_renders_its_table(rows):
    text = evidence.render(rows, SEEDS, 0.0)
    assert "| rule | false failures (correct kernels) | bugs caught (wrong kernels) | catch rate |" in text
    assert "| bound_ratio <= 1 alone | 0 of " in text and "**e2egen: 0 false failures in " in text
