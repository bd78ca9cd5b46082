"""`e2egen explain`: each purpose-built defect (tests/diagnose_kernels.py) is named for what it is."""
from __future__ import annotations

import re
import textwrap

import pytest
import torch

import diagnose_kernels
from e2egen.cli import main
from e2egen.commands.run_command import find_case
from e2egen.diagnose import causes
from e2egen.diagnose.explain import RMS_MARGIN, explain_case, margin_seeds, ulp_distance
from e2egen.diagnose.report import render
from e2egen.invocation import e2egen_command

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

# A library's silent "performance" precision: f32 / f16 inputs rounded to bf16, computed in f32.
[[suite]]
name = "bf16in"
op = "conv2d"
dtypes = ["f32", "f16"]
directions = ["fwd"]
layouts = ["nchw"]
ranges = ["r0"]
impl = "diagnose_kernels:bf16_inputs_conv_fwd"
tolerances = { f32 = { rms = 1e-5, bound_ratio = 1.0 } }
[[suite.config]]
name = "c8"
n = 2
c = 8
k = 8
hw = [6, 6]
kernel = 3
pad = 1

# torch's own f16 convolution held to an rms no rounding meets: "within the error bound".
[[suite]]
name = "tight"
op = "conv2d"
dtypes = ["f16"]
directions = ["fwd"]
layouts = ["nchw"]
ranges = ["r0"]
tolerances = { rms = 1e-9, bound_ratio = false }
[[suite.config]]
name = "c8"
n = 2
c = 8
k = 8
hw = [6, 6]
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


pytestmark = pytest.mark.usefixtures("fresh_profiles")  # tests/conftest.py


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
    # the probes find the flushing, so the case's own reference flushes too (as `e2egen run` does): it passes
    assert ex.measured.flushes and ex.case_row is not None and "probes found the kernel flushes" in ex.case_row.label
    assert ex.passed and ex.exit_status == 0
    assert ex.row("ftz").verdict.passed and not ex.plain.verdict.passed
    assert ex.stats["flushed_results"] > 10 and ex.stats["flushed_results"] <= ex.stats["subnormal_results"]
    assert ex.probe.passed  # no subnormal and no rounding in the probe: the kernel's indexing is right
    # the worst elements are flushed subnormals, in logical coordinates
    worst = ex.worst[0]
    assert worst.position.startswith("(n=") and "k=" in worst.position and "w=" in worst.position
    assert worst.subnormal and worst.out == 0.0 and worst.ulp_distance >= 1
    remedy = " ".join(ex.findings[0].remedy)
    assert "nothing to declare" in remedy and 'subnormals = "kept"' in remedy
    assert "the probes measured: subnormals: inputs flushed, outputs flushed" in " ".join(ex.findings[0].evidence)


def test_f16_chunked_kernel_is_named_accumulation_with_its_chunk(catalogue):
    ex = explained(catalogue, "chunk/conv2d/c32/fwd/f16/nhwc/r0")
    text = render(ex)
    assert causes_of(ex) == [causes.ACCUMULATION], text
    model = ex.search.best[0]
    assert (model.fmt, model.chunk, model.order, model.partials) == ("f16", 36, "natural", "running")
    assert ex.search.full is not None and ex.search.full.miss < 0.01 < ex.plain.miss
    assert ex.probe.passed
    # the probes measured the accumulation: it is named, and no accumulator is to be declared
    finding = ex.findings[0]
    assert finding.headline == ("accumulation: the probes measured one partial per 36 products in f32, "
                                "partials added in f16"), text
    assert 'acc = "f16"' not in " ".join(finding.remedy) and "nothing to declare" in " ".join(finding.remedy)
    assert ex.plain.measured_ratio <= 1 < ex.plain.ratio
    # every model shown says how much of the output it reproduces
    assert re.search(r"reproduces (99\.\d+|100)% of all 2048 elements", " ".join(finding.evidence)), text
    table = text[text.index("Accumulator models"):text.index("Input ranges")]
    assert "reproduces" in table.splitlines()[1]
    assert len(re.findall(r"\d+(\.\d+)?%\n", table)) >= 3, table
    assert "Arithmetic (probes)" in text and "one partial per 36 products in f32" in text


def test_dropped_channel_is_a_kernel_bug_not_precision(catalogue):
    ex = explained(catalogue, "bug/conv2d/c16/fwd/f16/nchw/r0")
    assert causes_of(ex)[0] == causes.KERNEL_BUG, render(ex)
    assert causes.ACCUMULATION not in causes_of(ex) and causes.FLUSHED not in causes_of(ex)
    assert ex.probe.wrong > 0 and ex.probe.examples
    assert ex.arithmetic.arithmetic.unexplained and "UNEXPLAINED (a kernel bug)" in render(ex)
    # without the exact-arithmetic probe, the arithmetic probes' unexplained outcomes still confirm it
    ex = explained(catalogue, "bug/conv2d/c16/fwd/f16/nchw/r0", probe=False)
    assert causes_of(ex)[0] == causes.KERNEL_BUG, render(ex)
    assert "no rounding explains" in " ".join(ex.findings[0].evidence)
    # without either probe the verdict is still "no variant explains it"
    ex = explained(catalogue, "bug/conv2d/c16/fwd/f16/nchw/r0", probe=False, arithmetic=False)
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
    assert_rms_margin(ex)


def assert_rms_margin(ex):
    """The rms suggested keeps RMS_MARGIN over the largest rms of the case's seed and three more."""
    margin = ex.rms_margin
    assert margin is not None and not margin.notes
    seeds = [seed for seed, _ in margin.seeds]
    assert seeds == [ex.case.seed, *margin_seeds(ex.case)] and len(set(seeds)) == 4
    assert margin_seeds(ex.case) == margin_seeds(ex.case)  # derived, not drawn
    extra = max(r for _, r in margin.seeds[1:])
    assert margin.suggested >= RMS_MARGIN * extra and margin.suggested >= RMS_MARGIN * margin.largest
    assert margin.suggested <= 1.1 * RMS_MARGIN * margin.largest  # rounded up to two digits, no more
    remedy = " ".join(ex.findings[0].remedy)
    assert f"{margin.suggested:.2g}" in remedy and f"seed {seeds[1]}: " in remedy, remedy


def test_tight_rms_is_within_the_bound_and_the_remedy_keeps_a_margin_across_seeds(catalogue):
    ex = explained(catalogue, "tight/conv2d/c8/fwd/f16/nchw/r0")
    assert causes_of(ex) == [causes.WITHIN_BOUND], render(ex)
    assert_rms_margin(ex)
    assert "Other seeds: rms over 4 seeds" in render(ex)


@pytest.mark.parametrize("direction", ["bwd_data", "bwd_weight"])
def test_torch_f16_backward_is_attributed_to_accumulation(catalogue, direction):
    ex = explained(catalogue, f"torchbwd/conv2d/c16/{direction}/f16/nchw/r0")
    if ex.plain.ratio <= 1:
        pytest.skip("torch keeps f32 partial sums for f16 backward convolutions on this machine")
    assert causes_of(ex) == [causes.ACCUMULATION], render(ex)
    finding = ex.findings[0]
    part = "one partial per sample" if direction == "bwd_weight" else "one partial per kernel tap"
    assert finding.headline == f"accumulation: the probes measured {part} in f32, partials added in f16", render(ex)
    assert 'acc = "f16"' not in " ".join(finding.remedy)
    model = ex.search.best[0]
    assert model.fmt == "f16"
    if direction == "bwd_weight":  # dW kept in f16 between samples: 8 x 8 output positions each
        assert (model.chunk, model.order) == (64, "natural")
    else:  # col2im: one f16 partial per kernel tap (32 output channels), added in f16
        assert (model.chunk, model.partials) == (32, "split") and model.order.startswith("taps")


def test_kernel_runs_once_per_range_and_probe_not_per_variant(catalogue):
    CALLS.clear()
    ex = explained(catalogue, "counted/conv2d/c4/fwd/f16/nchw/r0")
    assert len(CALLS) > 1 + 2 + 1 and ex.arithmetic.probed_now  # the arithmetic probes ran the kernel too
    assert causes_of(ex) == [causes.NOTHING] and ex.exit_status == 0
    CALLS.clear()
    ex = explained(catalogue, "counted/conv2d/c4/fwd/f16/nchw/r0")  # the arithmetic now comes from the cache
    assert len([r for r in ex.rows if r.computed]) >= 7
    # case range, r4, narrower range, each once (the first explanation ran this kernel signature, so no
    # warm-up repeat: runner/warm_calls.py), and the probe once
    assert len(CALLS) == (1 + 2) + 1
    assert ex.rms_margin is None
    assert causes_of(ex) == [causes.NOTHING] and ex.exit_status == 0


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_bf16_rounded_inputs_are_named_input_rounding_not_a_bug_nor_an_accumulator(catalogue, dtype):
    ex = explained(catalogue, f"bf16in/conv2d/c8/fwd/{dtype}/nchw/r0")
    text = render(ex)
    assert causes_of(ex) == [causes.INPUT_ROUNDING], text
    finding = ex.findings[0]
    assert "products see bf16-rounded inputs" in finding.headline
    assert f"the kernel computes in bf16 precision, not {dtype}" in finding.headline
    assert "likely a kernel bug" not in text and "bound.acc" not in text and ' acc = "' not in text, text
    assert "[[accept]]" in " ".join(finding.remedy) and 'inputs = "bf16"' in " ".join(finding.remedy)
    # the reference from bf16-rounded inputs accounts for the error; exact inputs do not
    rounded = ex.row("inputs")
    assert rounded.label == "inputs rounded to bf16" and rounded.ratio <= 1 < ex.plain.ratio
    assert ex.plain.measured_ratio <= 1
    # the run fails it on its arithmetic (require.inputs = "exact" by default), whatever the metrics say
    assert [v.key for v in ex.violations] == ["inputs"] and not ex.passed and ex.exit_status == 1
    assert "Arithmetic (probes)" in text and "products see bf16-rounded inputs; accumulates in f32" in text
    if ex.search is not None:  # no model reproduces the output: none is recommended, and it says how little
        assert "no modelled accumulation reproduces the output" in " ".join(finding.evidence), text


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
    # the probes find the flushing: `e2egen run` passes the case against a flushing reference, and so does explain
    assert main(["explain", "ftz/conv2d/c4/fwd/f16/nchw/tiny", "-c", catalogue, "--device", "cpu", "--seed", "3"]) == 0
    text = capsys.readouterr().out
    for part in ("Cause: flushed subnormals", "Arithmetic (probes)", "Reference variants", "Input ranges", "histogram",
                 "Worst elements", "exact-arithmetic probe", f"repro: {e2egen_command()} run ftz/conv2d/c4/fwd/f16/nchw/tiny --seed 3"):
        assert part in text, part
    assert main(["explain", "bf16in/conv2d/c8/fwd/f32/nchw/r0", "-c", catalogue, "--device", "cpu"]) == 1
    assert "Cause: input rounding" in capsys.readouterr().out
    assert main(["explain", "counted/conv2d/c4/fwd/f16/nchw/r0", "-c", catalogue, "--device", "cpu"]) == 0
    capsys.readouterr()
    assert main(["explain", "ftz/conv2d/c4/fwd/f16/nchw/tiyn", "-c", catalogue]) == 2
    err = capsys.readouterr().err
    assert "no case 'ftz/conv2d/c4/fwd/f16/nchw/tiyn'" in err and "did you mean" in err and "Traceback" not in err
