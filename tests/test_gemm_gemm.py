"""gemm→gemm: the rounded-intermediate piece against brute force, the composed bound on correct and
wrong kernels (tests/kernels_for_tests.py style, defined here), layouts."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from e2egen import metrics
from e2egen.runner import OPS, make_problem, run
from e2egen.runner.bound import BoundModel, RoundedIntermediate

SETTINGS = settings(max_examples=40, deadline=None)
VERDICT = {"bound_ratio": 1.0, "bound_rms": 0.5, "bias_z": 6.0}
PARAMS = {"m": 48, "n": 96, "k": 160, "o": 40, "batch": 2}


@SETTINGS
@given(st.integers(0, 2 ** 32 - 1), st.sampled_from(["f16", "bf16", "f32"]), st.floats(1e-9, 1e-2))
def test_rounded_intermediate_covers_every_perturbation_within_its_error(seed, fmt, relative):
    """|R(E + ε) − R(E)| ≤ I for every |ε| ≤ B, and I = 0 where E is farther than B from a rounding boundary."""
    rng = np.random.default_rng(seed)
    exact = torch.tensor(rng.standard_normal(4000) * 10, dtype=torch.float64)
    magnitude = exact.abs() + 1.0
    model = BoundModel()
    error = magnitude * relative
    piece = RoundedIntermediate(exact, magnitude, lambda _: relative, fmt, torch.ones(4000, 1, dtype=torch.float64))
    allowed = piece.deviation(model)
    for sign in (-1.0, 1.0, 0.5, -0.25):
        moved = metrics.round_to(exact + sign * error, fmt) - metrics.round_to(exact, fmt)
        assert (moved.abs() <= allowed).all()
    gap = metrics.ulp(metrics.round_to(exact, fmt), fmt)
    far = (exact - metrics.round_to(exact, fmt)).abs() < gap / 2 - error
    assert (allowed[far] == 0).all()


def kernel_f32_intermediate(a, b, c):
    """Keeps A·B in f32: another function than the case's (which rounds it to the dtype)."""
    return torch.matmul(torch.matmul(a.float(), b.float()), c.float()).to(a.dtype)


def kernel_blocked_k(a, b, c):
    """A·B summed in four k-blocks in f32, rounded once to the dtype: a correct reordering."""
    k = a.shape[-1]
    edges = [0, k // 4, k // 2, 3 * k // 4, k]
    partial = sum(torch.matmul(a[..., lo:hi].float(), b[..., lo:hi, :].float()) for lo, hi in zip(edges, edges[1:]))
    return torch.matmul(partial.to(a.dtype).float(), c.float()).to(a.dtype)


def kernel_c_transposed(a, b, c):
    """Reads C as if stored the other way: uses its transpose (a square C hides it; o != n here)."""
    cc = c.mT.contiguous().view(c.shape)
    return torch.matmul(torch.matmul(a, b), cc)


def kernel_scaled(a, b, c):
    return (torch.matmul(torch.matmul(a, b), c) * 1.01).to(a.dtype)


def _verdict(dtype, impl, layout="nnn", seed=3, params=PARAMS):
    problem = make_problem("gemm_gemm", "fwd", dtype, layout, params, (-1.0, 1.0), seed)
    result = run(problem, impl=impl, bound=BoundModel(), measure=False)
    out = result.outputs["out"]
    return metrics.compare(out.ref, out.out, dtype=out.dtype, bound=out.bound).check(VERDICT)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("impl", ["torch", "tests.test_gemm_gemm:kernel_blocked_k"])
def test_correct_kernels_pass(dtype, impl):
    for seed in range(3):
        verdict = _verdict(dtype, impl, seed=seed)
        assert verdict.passed, str(verdict)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("impl", ["kernel_c_transposed", "kernel_scaled"])
def test_wrong_kernels_fail(dtype, impl):
    verdict = _verdict(dtype, f"tests.test_gemm_gemm:{impl}")
    assert not verdict.passed


def test_a_kernel_keeping_the_intermediate_in_f32_is_judged_by_the_same_bound():
    """The contract rounds A·B to the dtype; a kernel that keeps it in f32 computes another function and is
    judged by the same bound. Its difference, Σ_n (E − R(E))·C, stays below the output's own rounding in
    f16 at this shape (it passes: as accurate as the arithmetic allows), and shows in bf16, whose coarser
    intermediate rounding exceeds the bound where outputs cancel towards zero (it fails)."""
    assert _verdict("f16", "tests.test_gemm_gemm:kernel_f32_intermediate").passed
    assert not _verdict("bf16", "tests.test_gemm_gemm:kernel_f32_intermediate").passed
