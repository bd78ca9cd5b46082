"""Reference variants: accumulate = k against a scalar loop, ftz, round_output,
and the batched-gemm lowering they rest on."""
from __future__ import annotations

import importlib

import pytest
import torch

from e2egen import metrics
from e2egen.runner import OPS, ProductSumOp, ReferenceOptions, ProblemError, make_problem, run
from e2egen.runner.inputs import generate_inputs
from e2egen.runner.reference import apply_op, compute_reference


def _sibling(name):
    package = __name__.rpartition(".")[0]  # tests/ may or may not be a package
    return importlib.import_module(f"{package}.{name}" if package else name)


naive = _sibling("runner_naive")


def inputs64(problem):
    return {name: t.double() for name, t in generate_inputs(problem).items()}


# Reductions of at most 32 products: see test_accumulate_matches_scalar_loop.
SMALL = {
    ("conv2d", "fwd"): {"n": 2, "c": 4, "k": 4, "hw": [4, 5], "kernel": [3, 3], "stride": [1, 2], "pad": 1, "groups": 2},
    ("conv2d", "bwd_data"): {"n": 1, "c": 2, "k": 6, "hw": [5, 6], "kernel": [3, 3], "stride": [2, 1], "pad": [1, 2],
                             "dilation": [1, 2], "groups": 2},
    ("conv2d", "bwd_weight"): {"n": 2, "c": 2, "k": 2, "hw": [4, 4], "kernel": [2, 2], "stride": 1, "pad": [1, 0]},
    ("conv1d", "bwd_data"): {"n": 1, "c": 2, "k": 4, "w": 9, "kernel": 3, "stride": 3, "pad": 1},
    ("conv3d", "fwd"): {"n": 1, "c": 2, "k": 2, "dhw": [3, 3, 4], "kernel": [1, 2, 3], "pad": [0, 1, 1]},
    ("gemm", "fwd"): {"m": 3, "n": 4, "k": 30, "batch": 2},
}


@pytest.mark.parametrize("op,direction", list(SMALL), ids=["-".join(k) for k in SMALL])
def test_accumulate_matches_scalar_loop(op, direction):
    # f16 inputs in [-1, 1] are multiples of 2**-24, so every product is a
    # multiple of 2**-48 and every partial sum below 32 in magnitude (K <= 32)
    # is exact in float64, whatever the order of summation. So the vectorised
    # chunks and the scalar loop must agree bit for bit.
    problem = make_problem(op, direction, "f16", OPS[op].layouts[0], SMALL[(op, direction)], (-1.0, 1.0), seed=21)
    reduction = problem.reduction_size
    assert reduction <= 32
    tensors = inputs64(problem)
    for chunk in sorted({1, 4, 5, reduction, reduction + 3}):
        got = compute_reference(problem, tensors, ReferenceOptions(accumulate=chunk)).value
        expected = naive.accumulate_scalar(problem, tensors, chunk)
        assert torch.equal(got, expected), f"chunk {chunk}"
        assert torch.equal(got.float().double(), got)  # the running sum is an f32 value


def test_accumulate_whole_reduction_is_the_rounded_exact_result():
    problem = make_problem("conv2d", "fwd", "bf16", "nhwc", SMALL[("conv2d", "fwd")], (-1.0, 1.0), seed=4)
    tensors = inputs64(problem)
    plain = compute_reference(problem, tensors, ReferenceOptions()).value
    whole = compute_reference(problem, tensors, ReferenceOptions(accumulate=problem.reduction_size)).value
    assert torch.equal(whole, metrics.round_to(plain, "f32"))


CONV_CASES = {
    "conv1d": {"n": 2, "c": 4, "k": 6, "w": 10, "kernel": 3, "stride": 3, "pad": 2, "dilation": 2, "groups": 2},
    "conv2d": {"n": 2, "c": 6, "k": 4, "hw": [6, 7], "kernel": [3, 2], "stride": [2, 3], "pad": [[0, 2], [2, 1]], "dilation": [2, 1],
               "groups": 2},
    "conv3d": {"n": 1, "c": 3, "k": 2, "dhw": [4, 5, 3], "kernel": [2, 1, 3], "stride": [2, 1, 1], "pad": [0, 2, 1]},
    "gemm": {"m": 4, "n": 3, "k": 6},
}


@pytest.mark.parametrize("op,direction", [(op, d) for op, spec in OPS.items() for d in spec.directions
                                          if isinstance(spec, ProductSumOp) and op != "scaled_gemm"])
# lowering: product sums of two inputs only (scaled_gemm's probes run gemm's lowering on unit scales)
def test_lowering_is_the_op(op, direction):
    # Padding wider than the kernel (conv2d's 1x2 pad with a 2-wide kernel,
    # conv3d's pad 2 with a 1-tap kernel) makes bwd_data crop instead of pad.
    problem = make_problem(op, direction, "f32", OPS[op].layouts[0], CONV_CASES[op], (-1.0, 1.0), seed=2)
    tensors = inputs64(problem)
    form = problem.numerics.lowered(problem, tensors)
    groups, rows, reduction, cols = problem.spec.lowered_dims(problem.params, problem.direction)
    assert form.lhs.shape == (groups, rows, reduction) and form.rhs.shape == (groups, reduction, cols)
    expected = naive.evaluate(problem, tensors)
    magnitude = naive.evaluate(problem, {n: t.abs() for n, t in tensors.items()})
    assert ((form.product() - expected).abs() <= 1e-12 * magnitude).all()


def test_ftz_flushes_exactly_the_subnormals():
    problem = make_problem("conv1d", "fwd", "f16", "nchw", {"n": 1, "c": 3, "k": 2, "w": 6, "kernel": 2}, (-1, 1), 0)
    tiny = torch.finfo(torch.float16).tiny  # smallest normal f16
    x = torch.tensor([[[tiny, -tiny / 2, 3 * tiny / 1024, 0.5, -tiny / 1024, 1.0],
                       [-1.0, 2 ** -20, tiny * 1.5, -0.25, 0.0, 2 ** -24],
                       [0.125, -2 ** -16, 2 ** -14, -0.5, 0.75, -tiny]]], dtype=torch.float64)
    w = torch.tensor([[[tiny, 0.5], [1.0, -2 ** -15], [-0.25, 0.5]],
                      [[2 ** -24, -1.0], [0.5, 0.25], [tiny * 4, 2 ** -13]]], dtype=torch.float64)
    tensors = {"x": x, "w": w}
    got = compute_reference(problem, tensors, ReferenceOptions(ftz=True)).value

    def flushed(t):  # zero every f16 subnormal, keep everything else
        return torch.where((t != 0) & (t.abs() < tiny), torch.zeros_like(t), t)

    exact = naive.evaluate(problem, {name: flushed(t) for name, t in tensors.items()})
    assert torch.equal(got, flushed(exact))
    assert ((exact != 0) & (exact.abs() < tiny)).any(), "the case must produce subnormal outputs to flush"
    assert not torch.equal(got, compute_reference(problem, tensors, ReferenceOptions()).value)


def test_round_output_rounds_to_the_output_format():
    problem = make_problem("gemm", "fwd", "bf16", "nt", {"m": 6, "n": 5, "k": 40}, (-1.0, 1.0), 3)
    tensors = inputs64(problem)
    plain = compute_reference(problem, tensors, ReferenceOptions()).value
    rounded = compute_reference(problem, tensors, ReferenceOptions(round_output=True)).value
    assert torch.equal(rounded, metrics.round_to(plain, "bf16"))
    assert torch.equal(rounded.to(torch.bfloat16).double(), rounded)


def test_reference_on_the_device_equals_the_cpu_reference():
    problem = make_problem("conv2d", "bwd_weight", "f32", "nhwc", CONV_CASES["conv2d"], (-1.0, 1.0), 8)
    on_cpu = run(problem, reference=ReferenceOptions(device="cpu"))
    on_device = run(problem, reference=ReferenceOptions(device="device"))
    assert on_device.ref.device == on_device.out.device
    torch.testing.assert_close(on_device.ref.cpu(), on_cpu.ref, rtol=1e-12, atol=0)


def test_reference_is_apply_op_on_float64_inputs():
    problem = make_problem("conv3d", "bwd_data", "bf16", "nhwc", CONV_CASES["conv3d"], (1.0, 5.0), 8)
    result = run(problem)
    assert torch.equal(result.ref, apply_op(problem, inputs64(problem)))


@pytest.mark.parametrize("options", [{"device": "gpu"}, {"accumulate": -1}, {"accumulate": True}, {"ftz": 1}, {"round_output": "yes"}])
def test_reference_options_are_validated(options):
    with pytest.raises(ProblemError):
        ReferenceOptions(**options)


def _conv_geometries():
    from hypothesis import strategies as st

    @st.composite
    def geometry(draw):
        dims = draw(st.integers(1, 3))
        groups = draw(st.integers(1, 2))
        ints = lambda lo, hi: st.lists(st.integers(lo, hi), min_size=dims, max_size=dims)  # noqa: E731
        kernel, stride, pad, dilation = draw(ints(1, 3)), draw(ints(1, 3)), draw(ints(0, 3)), draw(ints(1, 2))
        # Input at least as large as the dilated kernel minus padding, so the output exists.
        size = [max(1, d * (r - 1) + 1 - 2 * p) + draw(st.integers(0, 3)) for r, p, d in zip(kernel, pad, dilation)]
        key = {1: "w", 2: "hw", 3: "dhw"}[dims]
        params = {"n": draw(st.integers(1, 2)), "c": groups * draw(st.integers(1, 2)), "k": groups * draw(st.integers(1, 2)),
                  key: size, "kernel": kernel, "stride": stride, "pad": pad, "dilation": dilation, "groups": groups}
        return f"conv{dims}d", draw(st.sampled_from(["fwd", "bwd_data", "bwd_weight"])), params

    return geometry()


def test_lowering_is_the_op_for_random_geometries():
    hypothesis = pytest.importorskip("hypothesis")

    @hypothesis.settings(max_examples=60, deadline=None, derandomize=True)
    @hypothesis.given(_conv_geometries(), hypothesis.strategies.integers(0, 2 ** 32))
    def check(case, seed):
        op, direction, params = case
        problem = make_problem(op, direction, "f32", "nchw", params, (-1.0, 1.0), seed)
        tensors = inputs64(problem)
        expected = naive.evaluate(problem, tensors)
        magnitude = naive.evaluate(problem, {n: t.abs() for n, t in tensors.items()})
        assert ((problem.numerics.lowered(problem, tensors).product() - expected).abs() <= 1e-12 * magnitude).all()
        assert ((apply_op(problem, tensors) - expected).abs() <= 1e-12 * magnitude).all()

    check()
