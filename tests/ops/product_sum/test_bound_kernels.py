"""The bound passes correct kernels that sum in other orders and catches wrong ones.

The kernels are the study's (runner/ops/product_sum/kernels.py), plugged in through the
runner's contract, on small shapes with fixed seeds. Deterministic, so these
are plain assertions, not statistics.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from e2egen.runner.kernel_paths import dispatch_versions

from e2egen import metrics
from e2egen.runner import BoundModel, make_problem, run

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:  # `pytest` (not `python -m pytest`) does not put the repository on sys.path
    sys.path.insert(0, str(REPO))

from e2egen.runner.ops.product_sum import kernels as wrong_kernels  # noqa: E402
from e2egen.studies import bound_evidence  # noqa: E402

SHAPES = {
    "conv2d": {"n": 1, "c": 16, "k": 16, "hw": [8, 7], "kernel": 3, "pad": 1},
    "conv1d": {"n": 2, "c": 32, "k": 8, "w": 30, "kernel": 5, "stride": 2, "pad": 2, "groups": 2},
    "conv3d": {"n": 1, "c": 8, "k": 8, "dhw": [3, 5, 4], "kernel": [3, 3, 1], "pad": [1, 1, 0], "dilation": [1, 2, 1]},
    "gemm": {"m": 16, "n": 24, "k": 256},
}
CASES = [(op, direction) for op in SHAPES for direction in (("fwd",) if op == "gemm" else ("fwd", "bwd_data", "bwd_weight"))]


def ratio(op, direction, dtype, kernel, lo_hi, seed=11):
    layout = {"gemm": "tn"}.get(op, "nhwc")
    problem = make_problem(op, direction, dtype, layout, SHAPES[op], lo_hi, seed)
    # measure=False: the bound under the assumed arithmetic (f32 accumulation); what the probes make of
    # these kernels is tested in test_arithmetic_probes.py
    result = run(problem, impl=f"e2egen.runner.ops.product_sum.kernels:{kernel}", device="cpu", bound=BoundModel(), measure=False)
    c = metrics.compare(result.ref, result.out, dtype, bound=result.bound)
    assert c.overflow == 0
    return c.bound_ratio


@pytest.mark.parametrize("op,direction", CASES)
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_reordered_sums_pass(op, direction, dtype):
    for kernel in wrong_kernels.CORRECT:
        for lo_hi in ((-1.0, 1.0), (1.0, 5.0)):
            assert ratio(op, direction, dtype, kernel, lo_hi) <= 1, (kernel, lo_hi)


@pytest.mark.parametrize("op,direction", CASES)
def test_wrong_kernels_are_caught(op, direction):
    checks = [("drop_last", "f32"), ("swap_channels", "f16"), ("acc_lowp", "f16"), ("acc_lowp", "bf16"),
              ("scale_3ulp", "f16"), ("one_element", "bf16")]
    if op != "gemm":
        checks.append(("shift_window", "bf16"))
    for kernel, dtype in checks:
        assert ratio(op, direction, dtype, kernel, (-1.0, 1.0)) > 1, (kernel, dtype)


def test_every_listed_kernel_resolves_and_keeps_the_contract():
    for kernel in (*wrong_kernels.CORRECT, *wrong_kernels.WRONG):
        for op, direction in CASES:
            if kernel in wrong_kernels.CONV_ONLY and op == "gemm":
                continue
            ratio(op, direction, "f16", kernel, (-1.0, 1.0))  # raises KernelFailure if the contract is broken


@pytest.mark.cpu_paths
def test_study_runs_and_its_lambda_sweep_agrees_with_compare():
    selection = (("resnet50", "l4-3x3-512", ("fwd", "bwd_weight"), {"n": 1, "c": 8, "k": 8}),)
    records = bound_evidence.collect(selection, 1, ["r0"], ["f16"], REPO / "configs.toml")
    assert {r.status for r in records} == {"ok"}
    five = bound_evidence.LAMBDAS.index(bound_evidence.DEFAULT_LAMBDA)
    f16_in_onednn = "f16" in dispatch_versions()["onednn"].split("+")  # this CPU path's (runner.kernel_paths)
    for r in records:
        assert r.by_lambda[five] == pytest.approx(r.bound_ratio, rel=1e-9), r.kernel
        if r.kernel == "torch" and r.direction == "bwd_weight" and not f16_in_onednn:
            # the shipped profiles: where oneDNN does not take f16, torch's CPU f16 bwd_weight keeps one f16
            # partial per sample; where it does (AVX-512 FP16 / AMX), oneDNN accumulates in f32
            assert r.accumulation == "one partial per sample in f32, partials added in f16" and r.acc == "f16"
        elif r.kernel == "torch":
            assert r.accumulation == "accumulates in f32" and r.acc == "f32"
        else:  # plug-ins: the default model, unmeasured (the dtype's assumed f32 accumulation)
            assert r.accumulation == "" and r.acc == "f32"
            assert r.default_ratio == pytest.approx(r.bound_ratio, rel=1e-9)
    assert not any(r.fails["bound"] for r in records if r.kind == "correct")
    assert all(r.fails["bound"] for r in records if r.kind == "wrong")
    text = bound_evidence.report(records, "cmd", 1.0, bound_evidence.shapes(
        bound_evidence.load_catalogue(REPO / "configs.toml"), selection), 1, ["r0"], ["f16"])
    for heading in ("### Rules", "### lambda", "### Headroom", "### Tightness", "| bound | 0% | **0% (0/"):
        assert heading in text
