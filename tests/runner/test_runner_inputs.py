"""Inputs: deterministic per seed, independent of layout and device, correctly rounded."""
from __future__ import annotations

import importlib

import pytest
import torch

from e2egen import metrics
from e2egen.runner import OPS, make_problem, run
from e2egen.runner.inputs import arrange_for_kernel, generate_inputs, reference_inputs, round_to_format, round_to_storage


def _sibling(name):
    package = __name__.rpartition(".")[0]  # tests/ may or may not be a package
    return importlib.import_module(f"{package}.{name}" if package else name)


kernels = _sibling("kernels_for_tests")

CONV2D = {"n": 2, "c": 4, "k": 6, "hw": [5, 6], "kernel": 3, "pad": 1}
GEMM = {"m": 5, "n": 6, "k": 7, "batch": 2}


def problem(seed=1, layout="nchw", dtype="f16", op="conv2d", direction="fwd", input_range=(-1.0, 1.0)):
    return make_problem(op, direction, dtype, layout, CONV2D if op == "conv2d" else GEMM, input_range, seed)


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int16 if t.element_size() == 2 else torch.int32)


@pytest.mark.parametrize("dtype", ["f32", "tf32", "f16", "bf16"])
def test_same_seed_same_bits_different_seed_different_values(dtype):
    first, again, other = generate_inputs(problem(7, dtype=dtype)), generate_inputs(problem(7, dtype=dtype)), generate_inputs(problem(8, dtype=dtype))
    assert list(first) == ["x", "w"]
    for name in first:
        assert torch.equal(bits(first[name]), bits(again[name]))
        assert not torch.equal(first[name], other[name])


def test_inputs_lie_in_the_range_and_have_the_input_dtype():
    for dtype, torch_dtype in (("f32", torch.float32), ("tf32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)):
        for tensor in generate_inputs(problem(3, dtype=dtype, input_range=(1.0, 5.0))).values():
            assert tensor.dtype == torch_dtype and tensor.is_contiguous() and tensor.device.type == "cpu"
            assert tensor.min() >= 1.0 and tensor.max() <= 5.0


@pytest.mark.parametrize("op,layouts", [("conv2d", OPS["conv2d"].layouts), ("gemm", OPS["gemm"].layouts)])
def test_layout_does_not_change_the_values(op, layouts):
    reference = generate_inputs(problem(5, layout=layouts[0], op=op))
    for layout in layouts:
        p = problem(5, layout=layout, op=op)
        arranged = arrange_for_kernel(p, generate_inputs(p), torch.device("cpu"))
        for name, tensor in arranged.items():
            assert tensor.shape == reference[name].shape
            assert torch.equal(tensor, reference[name])


def test_layouts_store_the_tensors_as_named():
    def arranged(op, layout, params, direction="fwd"):
        p = make_problem(op, direction, "f32", layout, params, (-1.0, 1.0), 0)
        return arrange_for_kernel(p, generate_inputs(p), torch.device("cpu"))

    nhwc = arranged("conv2d", "nhwc", CONV2D, "bwd_data")
    assert all(t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous() for t in nhwc.values())
    ndhwc = arranged("conv3d", "nhwc", {"n": 2, "c": 3, "k": 4, "dhw": 3, "kernel": 2}, "bwd_weight")
    assert all(t.is_contiguous(memory_format=torch.channels_last_3d) for t in ndhwc.values())
    nwc = arranged("conv1d", "nhwc", {"n": 2, "c": 3, "k": 4, "w": 5, "kernel": 2})
    for t in nwc.values():  # a transposed view of contiguous (N, L, C) storage
        assert t.transpose(1, 2).is_contiguous() and not t.is_contiguous()
    assert all(t.is_contiguous() for t in arranged("conv2d", "nchw", CONV2D).values())
    tn = arranged("gemm", "tn", GEMM)
    assert tn["a"].mT.is_contiguous() and not tn["a"].is_contiguous() and tn["b"].is_contiguous()
    nt = arranged("gemm", "nt", {"m": 3, "n": 4, "k": 5})
    assert nt["a"].is_contiguous() and nt["b"].T.is_contiguous() and not nt["b"].is_contiguous()


def test_the_kernel_receives_the_layout():
    kernels.received.clear()
    run(problem(2, layout="nhwc"), impl=f"{kernels.__name__}:record_conv_fwd")
    expected = generate_inputs(problem(2, layout="nchw"))
    assert 1 <= len(kernels.received) <= 2  # a fast kernel is called again for a warm time (run._call_warm)
    for seen in kernels.received:
        for name in ("x", "w"):
            assert seen[name].is_contiguous(memory_format=torch.channels_last)
            assert torch.equal(seen[name], expected[name])


def test_rounding_is_correct_where_a_plain_cast_rounds_twice():
    # Values just above the midpoint between two f16 (bf16) neighbours: the f32
    # cast lands exactly on the midpoint and the second rounding goes to even.
    generator = torch.Generator().manual_seed(0)
    for dtype, name in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
        low = (torch.rand(20000, generator=generator, dtype=torch.float64) * 4 - 2).to(dtype)
        high = torch.nextafter(low, torch.full_like(low, float("inf")))
        middle = (low.double() + high.double()) / 2
        for values in (middle, middle * (1 + 2 ** -40), middle * (1 - 2 ** -40), middle * 2 ** -20):
            got = round_to_storage(values, dtype).double()
            assert torch.equal(got, metrics.round_to(values, name))
    wide = torch.randn(100000, generator=generator, dtype=torch.float64) * 1e3
    assert torch.equal(round_to_storage(wide, torch.float32).double(), metrics.round_to(wide, "f32"))


@pytest.mark.parametrize("backend", ["numba", "torch"])
@pytest.mark.parametrize("fmt", ["f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz", "f4e2m1"])
def test_saturating_low_bit_rounding_equals_metrics_bit_for_bit(fmt, backend, monkeypatch):
    """The fast paths (fp8 with numba: metrics.round_to's pass, then an exact cast; without it: round to odd
    in f32, then torch's cast; fp4: one numba pass, or by midpoint search without it) against metrics'
    reference rounding in its torch definition: every value of the format,
    every midpoint and its neighbours, values beyond the largest, and random values across the range and
    the subnormals."""
    from e2egen import metrics
    from e2egen.metrics import fused_numba
    from e2egen.metrics.backend import ENV_VAR
    from e2egen.metrics.encoding import decode, encode

    if backend == "numba" and not fused_numba.AVAILABLE:
        pytest.skip("numba is not installed")

    spec = metrics.get_format(fmt)
    values = decode(torch.arange(1 << spec.bits), fmt)
    values = torch.unique(values[torch.isfinite(values)])
    mids = (values[1:] + values[:-1]) / 2
    generator = torch.Generator().manual_seed(7)
    wide = (torch.rand(100_000, generator=generator, dtype=torch.float64) * 2 - 1) * spec.max * 1.5
    tiny = (torch.rand(100_000, generator=generator, dtype=torch.float64) * 2 - 1) * spec.min_normal * 2
    probe = torch.cat([values, mids, torch.nextafter(mids, mids + 1), torch.nextafter(mids, mids - 1), wide, tiny,
                       torch.tensor([spec.max * 4, -spec.max * 4, -0.0])])
    monkeypatch.setenv(ENV_VAR, backend)
    fast = round_to_format(probe, fmt, saturate=True)
    monkeypatch.setenv(ENV_VAR, "torch")  # the definition
    expected = encode(probe, fmt, saturate=True)
    assert torch.equal(fast if fmt == "f4e2m1" else fast.view(torch.uint8), expected)


def test_narrow_formats_draw_f32_and_round_once_with_torchs_cast():
    """f16, bf16 and fp8 inputs of an op that takes the plain draw: an f32 draw (one stream per input),
    rounded once by torch's cast (a correct rounding from f32); wider formats and ops that shape their
    draw keep the float64 draw."""
    from e2egen.runner import draws
    from e2egen.runner.inputs import draws_in_f32, input_formats

    for dtype in ("f16", "bf16", "f8e4m3fn"):
        problem = make_problem("gemm", "fwd", dtype, "nn", {"m": 7, "n": 5, "k": 9}, (-3.0, 2.0), seed=4)
        expected = {name: draws.uniform(shape, -3.0, 2.0, problem.seed, stream, torch.float32)
                    for stream, (name, shape) in enumerate(problem.input_shapes.items())}
        drawn = generate_inputs(problem)
        for name, values in expected.items():
            assert torch.equal(drawn[name].view(torch.uint8), round_to_format(values, dtype).view(torch.uint8))
            assert torch.equal(drawn[name].view(torch.uint8), values.to(drawn[name].dtype).view(torch.uint8))
    shaped = make_problem("attention", "fwd", "f16", OPS["attention"].layouts[0],
                          {"seq_q": 4, "seq_k": 4, "head_dim_qk": 8}, (-1.0, 1.0), seed=4)
    integers = make_problem("gemm", "fwd", "i8", "nn", {"m": 7, "n": 5, "k": 9}, (-3.0, 2.0), seed=4)
    assert not draws_in_f32(shaped, input_formats(shaped)) and not draws_in_f32(integers, input_formats(integers))


def test_f32_inputs_are_the_f32_draw_which_is_the_float64_draw_rounded_once():
    """f32 inputs come from the f32 draw itself: the same values as the float64 draw rounded once to f32
    (to nearest even), subnormals and the range's ends included."""
    from e2egen.runner import draws
    from e2egen.runner.inputs import draws_in_f32, input_formats

    for value_range in ((-3.0, 2.0), (-1e-39, 1e-39), (-3e38, 3e38)):
        problem = make_problem("gemm", "fwd", "f32", "nn", {"m": 70, "n": 50, "k": 90}, value_range, seed=4)
        assert draws_in_f32(problem, input_formats(problem))
        drawn = generate_inputs(problem)
        for stream, (name, shape) in enumerate(problem.input_shapes.items()):
            wide = draws.uniform(shape, *value_range, problem.seed, stream, torch.float64)
            assert drawn[name].dtype == torch.float32
            assert torch.equal(drawn[name].view(torch.int32), wide.to(torch.float32).view(torch.int32))
            assert torch.equal(drawn[name].view(torch.int32), metrics.round_to(wide, "f32").to(torch.float32).view(torch.int32))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_streamed_input_stays_in_its_format_and_is_flushed_as_the_reference_flushes(dtype):
    tiny = torch.finfo(dtype).tiny
    tensor = torch.tensor([1.0, tiny / 4, -tiny / 2, -3.0, tiny], dtype=dtype)
    kept = reference_inputs({"k": tensor, "q": tensor}, torch.device("cpu"), streamed=("k",))
    assert kept["k"].dtype == dtype and kept["k"] is tensor and kept["q"].dtype == torch.float64
    fmt = "f16" if dtype == torch.float16 else "bf16"
    flushed = reference_inputs({"k": tensor, "q": tensor}, torch.device("cpu"), flush_format=fmt, streamed=("k",))
    assert flushed["k"].dtype == dtype
    assert torch.equal(flushed["k"].double(), flushed["q"])  # the same values as the widened, flushed input
    assert torch.equal(torch.signbit(flushed["k"]), torch.signbit(tensor)) and int((flushed["k"] == 0).sum()) == 2
