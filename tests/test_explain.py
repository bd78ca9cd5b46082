"""`e2egen explain`: each purpose-built defect (tests/diagnose_kernels.py) is named for what it is."""
from __future__ import annotations

import textwrap

import pytest
import torch

import diagnose_kernels
from e2egen.cli import main
from e2egen.commands.run_command import find_case
from e2egen.diagnose import causes
from e2egen.diagnose.explain import explain_case, ulp_distance
from e2egen.diagnose.report import render

CATALOGUE = """
seed = 7
[ranges]
tiny = [-0.02, 0.02]
r0 = [-1.0, 1.0]
r5 = [5.0, 10.0]
[tolerances.f16]
rms = 1e-3
bound_ratio = 1.0

# Outputs ~1e-3 from inputs ~0.02: about 7% of them are f16 subnormals.
[[suite]]
name = "ftz"
op = "conv2d"
dtypes = ["f16"]
directions = ["fwd"]
layouts = ["nchw"]
ranges = ["tiny"]
impl = "diagnose_kernels:flush_subnormals_conv_fwd"
[[suite.config]]
name = "c4"
n = 2
c = 4
k = 8
hw = [8, 8]
kernel = 3
pad = 1

# K = 288 products in 8 chunks of 36: 7 roundings of a running sum to f16.
[[suite]]
name = "chunk"
op = "conv2d"
dtypes = ["f16"]
directions = ["fwd"]
layouts = ["nhwc"]
ranges = ["r0"]
impl = "diagnose_kernels:f16_chunked_conv_fwd"
[[suite.config]]
name = "c32"
n = 2
c = 32
k = 16
hw = [8, 8]
kernel = 3
pad = 1

# Dropping 1 of 16 channels: an error the size of f16 accumulation's bound (K = 144) — only the probe is sure.
[[suite]]
name = "bug"
op = "conv2d"
dtypes = ["f16"]
directions = ["fwd"]
layouts = ["nchw"]
ranges = ["r0"]
impl = "diagnose_kernels:dropped_channel_conv_fwd"
[[suite.config]]
name = "c16"
n = 2
c = 16
k = 16
hw = [8, 8]
kernel = 3
pad = 1

# 2048 products of at least 25: every exact result is beyond f16's 65504.
[[suite]]
name = "big"
op = "gemm"
dtypes = ["f16"]
layouts = ["nn"]
ranges = ["r5"]
[[suite.config]]
name = "k2048"
m = 8
n = 8
k = 2048

# torch's own kernel judged by the seed's rule: near-zero results fail it.
[[suite]]
name = "near0"
op = "conv2d"
dtypes = ["f16"]
directions = ["fwd"]
layouts = ["nhwc"]
ranges = ["r0"]
tolerances = { max_eps_diff = 1.0, rms = false, bound_ratio = false }
[[suite.config]]
name = "c128"
n = 4
c = 128
k = 64
hw = [16, 16]
kernel = 3
pad = 1

# torch's CPU f16 backward convolutions (configs.toml declares bound acc = "f16" for them).
[[suite]]
name = "torchbwd"
op = "conv2d"
dtypes = ["f16"]
directions = ["bwd_data", "bwd_weight"]
layouts = ["nchw"]
ranges = ["r0"]
[[suite.config]]
name = "c16"
n = 4
c = 16
k = 32
hw = [8, 8]
kernel = 3
pad = 1

[[suite]]
name = "counted"
op = "conv2d"
dtypes = ["f16"]
directions = ["fwd"]
layouts = ["nchw"]
ranges = ["r0"]
impl = "test_explain:counting_conv_fwd"
[[suite.config]]
name = "c4"
n = 1
c = 4
k = 4
hw = [6, 6]
kernel = 3
pad = 1

[[suite]]
name = "raises"
op = "conv2d"
dtypes = ["f16"]
directions = ["fwd"]
layouts = ["nchw"]
ranges = ["r0"]
impl = "test_explain:raising_conv_fwd"
[[suite.config]]
name = "c4"
n = 1
c = 4
k = 4
hw = [6, 6]
kernel = 3
pad = 1
"""

CALLS: list[int] = []


def raising_conv_fwd(x, w, **geometry):
    raise IndexError("index 4 is out of bounds for dimension 1 with size 4")


def counting_conv_fwd(x, w, **geometry):
    CALLS.append(1)
    return diagnose_kernels._conv32(x, w, geometry["stride"], geometry["padding"], geometry["dilation"],
                                    geometry["groups"]).to(x.dtype)


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory):
    path = tmp_path_factory.mktemp("explain") / "configs.toml"
    path.write_text(textwrap.dedent(CATALOGUE), encoding="utf-8")
    return str(path)


def explained(catalogue, case_id, **options):
    return explain_case(find_case(catalogue, case_id), device="cpu", **options)


def causes_of(explanation) -> list[str]:
    return [f.cause for f in explanation.findings]


def test_flushing_kernel_is_named_flushed_subnormals(catalogue):
    ex = explained(catalogue, "ftz/conv2d/c4/fwd/f16/nchw/tiny")
    assert causes_of(ex) == [causes.FLUSHED], render(ex)
    assert not ex.passed and ex.exit_status == 1
    assert ex.row("ftz").verdict.passed and not ex.plain.verdict.passed
    assert ex.stats["flushed_results"] > 10 and ex.stats["flushed_results"] <= ex.stats["subnormal_results"]
    assert ex.probe.passed  # no subnormal and no rounding in the probe: the kernel's indexing is right
    # the worst elements are flushed subnormals, in logical coordinates
    worst = ex.worst[0]
    assert worst.position.startswith("(n=") and "k=" in worst.position and "w=" in worst.position
    assert worst.subnormal and worst.out == 0.0 and worst.ulp_distance >= 1
    assert "ftz = true" in " ".join(ex.findings[0].remedy)


def test_f16_chunked_kernel_is_named_accumulation_with_its_chunk(catalogue):
    ex = explained(catalogue, "chunk/conv2d/c32/fwd/f16/nhwc/r0")
    assert causes_of(ex) == [causes.ACCUMULATION], render(ex)
    model = ex.search.best[0]
    assert (model.fmt, model.chunk, model.order, model.partials) == ("f16", 36, "natural", "running")
    assert ex.search.full is not None and ex.search.full.miss < 0.01 < ex.plain.miss
    assert ex.probe.passed
    assert 'acc = "f16"' in " ".join(ex.findings[0].remedy)


def test_dropped_channel_is_a_kernel_bug_not_precision(catalogue):
    ex = explained(catalogue, "bug/conv2d/c16/fwd/f16/nchw/r0")
    assert causes_of(ex)[0] == causes.KERNEL_BUG, render(ex)
    assert causes.ACCUMULATION not in causes_of(ex) and causes.FLUSHED not in causes_of(ex)
    assert ex.probe.wrong > 0 and ex.probe.examples
    # without the probe the verdict is still "no variant explains it"
    ex = explained(catalogue, "bug/conv2d/c16/fwd/f16/nchw/r0", probe=False)
    assert causes_of(ex) == [causes.LIKELY_BUG], render(ex)
    assert ex.findings[0].headline.startswith("no reference variant explains it: likely a kernel bug")


def test_overflow_is_named_with_a_range_that_avoids_it(catalogue):
    ex = explained(catalogue, "big/gemm/k2048/fwd/f16/nn/r5")
    assert causes_of(ex) == [causes.OVERFLOW], render(ex)
    assert ex.plain.comparison.overflow == 64
    narrow = next(r for r in ex.ranges if r.role == "narrow")
    assert narrow.comparison.overflow == 0 and narrow.verdict.passed
    assert 0 < narrow.hi <= 5.0 and narrow.lo == pytest.approx(narrow.hi / 2)
    assert f"r5 = [{narrow.lo:g}, {narrow.hi:g}]" in " ".join(ex.findings[0].remedy)


def test_cancellation_near_zero(catalogue):
    ex = explained(catalogue, "near0/conv2d/c128/fwd/f16/nhwc/r0")
    if ex.plain.verdict.passed:
        pytest.skip("torch's f16 convolution is correctly rounded on this CPU: nothing fails max_eps_diff <= 1")
    assert causes_of(ex) == [causes.CANCELLATION], render(ex)
    assert ex.plain.ratio <= 1 and ex.stats["eps_well_conditioned"] <= 1
    away = next(r for r in ex.ranges if r.role == "away")
    assert away.verdict.passed


@pytest.mark.parametrize("direction", ["bwd_data", "bwd_weight"])
def test_torch_f16_backward_is_attributed_to_accumulation(catalogue, direction):
    ex = explained(catalogue, f"torchbwd/conv2d/c16/{direction}/f16/nchw/r0")
    if ex.plain.ratio <= 1:
        pytest.skip("torch keeps f32 partial sums for f16 backward convolutions on this machine")
    assert causes_of(ex) == [causes.ACCUMULATION], render(ex)
    model = ex.search.best[0]
    assert model.fmt == "f16"
    if direction == "bwd_weight":  # dW kept in f16 between samples: 8 x 8 output positions each
        assert (model.chunk, model.order) == (64, "natural")
    else:  # col2im: one f16 partial per kernel tap (32 output channels), added in f16
        assert (model.chunk, model.partials) == (32, "split") and model.order.startswith("taps")


def test_kernel_runs_once_per_range_and_probe_not_per_variant(catalogue):
    CALLS.clear()
    ex = explained(catalogue, "counted/conv2d/c4/fwd/f16/nchw/r0")
    assert len([r for r in ex.rows if r.computed]) >= 7
    assert len(CALLS) == 1 + 2 + 1  # case range, r4, narrower range, probe
    assert causes_of(ex) == [causes.NOTHING] and ex.exit_status == 0


def test_raising_kernel_is_a_kernel_failure(catalogue):
    ex = explained(catalogue, "raises/conv2d/c4/fwd/f16/nchw/r0")
    assert causes_of(ex) == [causes.KERNEL_BUG] and ex.exit_status == 1
    assert "IndexError" in ex.kernel_failure and "kernel failed" in render(ex)


def test_ulp_distance_counts_representable_values():
    ref = torch.tensor([1.0, 1.0, -0.0, 2.0 ** -24, 65504.0, float("inf")], dtype=torch.float64)
    out = torch.tensor([1.0009765625, 0.99951171875, 2.0 ** -24, 0.0, 65504.0, 1.0], dtype=torch.float16)
    assert ulp_distance(ref, out, "f16")[:5].tolist() == [1, 1, 1, 1, 0]
    assert torch.isnan(ulp_distance(ref, out, "f16")[5])


def test_cli_exit_statuses(catalogue, capsys):
    assert main(["explain", "ftz/conv2d/c4/fwd/f16/nchw/tiny", "-c", catalogue, "--device", "cpu", "--seed", "3"]) == 1
    text = capsys.readouterr().out
    for part in ("Cause: flushed subnormals", "Reference variants", "Input ranges", "histogram", "Worst elements",
                 "exact-arithmetic probe", "repro: e2egen run ftz/conv2d/c4/fwd/f16/nchw/tiny --seed 3"):
        assert part in text, part
    assert main(["explain", "counted/conv2d/c4/fwd/f16/nchw/r0", "-c", catalogue, "--device", "cpu"]) == 0
    capsys.readouterr()
    assert main(["explain", "ftz/conv2d/c4/fwd/f16/nchw/tiyn", "-c", catalogue]) == 2
    err = capsys.readouterr().err
    assert "no case 'ftz/conv2d/c4/fwd/f16/nchw/tiyn'" in err and "did you mean" in err and "Traceback" not in err
