"""group_norm and batch_norm (runner/ops/normalization/spec.py, forward and backward): parameters, rows, the reference
against torch in float64, and the default verdict on torch's kernels, correct kernels of other algorithms and planted
bugs (runner/ops/normalization/channel_kernels.py), including torch's own CPU f16/bf16 batch_norm and its f16/bf16
backward of both."""
from __future__ import annotations

import pytest
import torch

from e2egen.api import judge
from e2egen.runner import make_problem
from e2egen.runner.errors import ProblemError
from e2egen.runner.inputs import generate_inputs
from e2egen.runner.ops.normalization import channel_kernels
from e2egen.runner.ops.normalization.normalization_math import channel_norm_rows, from_channel_norm_rows

# torch's own CPU kernels: their verdicts depend on the CPU path (.ci/run runs these on AVX2 and AVX-512)
pytestmark = pytest.mark.cpu_paths

IMPL = "e2egen.runner.ops.normalization.channel_kernels:"
CASES = {
    "group_norm": [({"shape": [2, 8, 6, 6], "groups": 4}, "contiguous"), ({"shape": [2, 32, 7, 7], "groups": 8}, "channels_last"),
                   ({"shape": [4, 6, 10], "groups": 2}, "strided")],
    "batch_norm": [({"shape": [4, 8, 6, 6]}, "contiguous"), ({"shape": [8, 16, 5, 5]}, "channels_last"),
                   ({"shape": [16, 12]}, "strided")],
}
RANGES = [(-1.0, 1.0), (1.0, 5.0)]


def _all(op: str):
    return [(shape, layout, data_range, dtype) for shape, layout in CASES[op] for data_range in RANGES
            for dtype in ("f32", "f16", "bf16")]


@pytest.mark.parametrize("op, kernel", [(op, name) for op in CASES for name in ("torch", *channel_kernels.CORRECT[op])])
def test_correct_kernels_pass(op, kernel):
    for shape, layout, data_range, dtype in _all(op):
        outcome = judge(None if kernel == "torch" else IMPL + kernel, op, shape, dtype, layout=layout,
                        data_range=data_range)
        assert outcome.passed, (shape, layout, data_range, dtype, outcome.reason)


@pytest.mark.parametrize("op, kernel", [(op, name) for op in CASES for name in channel_kernels.WRONG[op]
                                        if name != "torch_batch_norm"])
def test_planted_bugs_fail_everywhere(op, kernel):
    for shape, layout, data_range, dtype in _all(op):
        assert not judge(IMPL + kernel, op, shape, dtype, layout=layout, data_range=data_range).passed, \
            (shape, layout, data_range, dtype)


@pytest.mark.parametrize("kernel, reading", [("group_norm_no_eps", "leaves eps out")])
def test_the_eps_probe_names_the_bug(kernel, reading):
    outcome = judge(IMPL + kernel, "group_norm", {"shape": [2, 8, 6, 6], "groups": 4}, "f16")
    assert not outcome.passed and reading in outcome.report


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_torch_s_own_cpu_half_batch_norm_fails_by_its_folded_scale_and_shift(dtype):
    """torch's CPU batch_norm rounds α = w·r and β = b - μ·α to the input format: x·α + β then cancels."""
    outcome = judge(IMPL + "torch_batch_norm", "batch_norm", {"shape": [4, 8, 6, 6]}, dtype)
    assert not outcome.passed and outcome.comparison.bound_ratio > 5
    assert judge(IMPL + "torch_batch_norm", "batch_norm", {"shape": [4, 8, 6, 6]}, "f32").passed


@pytest.mark.parametrize("dtype", ["f32", "f16"])  # bf16's grid near 1000 (steps of 4) leaves it passing some draws
def test_torch_s_cpu_channels_last_group_norm_cancels_on_offset_data(dtype):
    """Its variance is E[x²] - μ² there (the contiguous path's is not): configs.toml leaves that layout out."""
    shape = {"shape": [2, 16, 8, 8], "groups": 4, "offset": 1000.0}
    assert not judge(None, "group_norm", shape, dtype, layout="channels_last").passed
    assert judge(None, "group_norm", shape, dtype, layout="contiguous").passed
    assert judge(IMPL + "group_norm_two_pass", "group_norm", shape, dtype, layout="channels_last").passed


@pytest.mark.parametrize("op, shape", [("group_norm", {"shape": [2, 8, 3, 5], "groups": 2}),
                                       ("batch_norm", {"shape": [3, 4, 2, 5]}), ("batch_norm", {"shape": [6, 5]})])
def test_the_reference_is_torch_s_in_float64_and_rows_round_trip(op, shape):
    problem = make_problem(op, "fwd", "f32", "contiguous", shape, (-1.0, 1.0), 2)
    inputs64 = {name: t.double() for name, t in generate_inputs(problem).items()}
    params = problem.params
    x, weight, bias = inputs64["x"], inputs64["weight"], inputs64["bias"]
    expected = (torch.nn.functional.group_norm(x, params.groups, weight, bias, params.eps) if op == "group_norm"
                else torch.nn.functional.batch_norm(x, None, None, weight, bias, training=True, eps=params.eps))
    torch.testing.assert_close(problem.numerics.reference(problem, inputs64)["y"], expected, rtol=1e-12, atol=1e-12)
    assert torch.equal(from_channel_norm_rows(channel_norm_rows(x, params), params), x)


@pytest.mark.parametrize("shape, key, words", [
    ({"shape": [2, 6, 4], "groups": 4}, "groups", "must divide"),
    ({"shape": [8], "groups": 1}, "shape", "(N, C, spatial...)"),
    ({"shape": [2, 6, 4], "groups": 0}, "groups", "positive"),
])
def test_bad_group_norm_parameters_name_the_key(shape, key, words):
    with pytest.raises(ProblemError) as error:
        make_problem("group_norm", "fwd", "f32", "contiguous", shape, (-1.0, 1.0), 0)
    assert error.value.key == key and words in str(error.value)


# -- backward ---------------------------------------------------------------------------------------------------
def _all_backward(op: str):
    return [(shape, layout, data_range, dtype) for shape, layout in CASES[op] for data_range in RANGES
            for dtype in ("f32", "f16", "bf16")]


@pytest.mark.parametrize("op, kernel", [(op, name) for op in CASES
                                        for name in ("torch", *channel_kernels.CORRECT_BACKWARD[op])])
def test_correct_backward_kernels_pass(op, kernel):
    for shape, layout, data_range, dtype in _all_backward(op):
        for affine in (True, False):
            outcome = judge(None if kernel == "torch" else IMPL + kernel, op, {**shape, "affine": affine}, dtype,
                            direction="bwd_data", layout=layout, data_range=data_range)
            assert outcome.passed, (shape, affine, layout, data_range, dtype, outcome.reason)


@pytest.mark.parametrize("op, kernel", [(op, name) for op in CASES for name in channel_kernels.WRONG_BACKWARD[op]
                                        if not name.startswith("torch_")])
def test_planted_backward_bugs_fail_everywhere(op, kernel):
    for shape, layout, data_range, dtype in _all_backward(op):
        assert not judge(IMPL + kernel, op, shape, dtype, direction="bwd_data", layout=layout,
                         data_range=data_range).passed, (shape, layout, data_range, dtype)


@pytest.mark.parametrize("op, kernel, shape", [("group_norm", "torch_group_norm_backward", {"shape": [2, 8, 6, 6], "groups": 4}),
                                               ("batch_norm", "torch_batch_norm_backward", {"shape": [4, 8, 6, 6]})])
def test_torch_s_own_cpu_half_backward_fails_and_its_f32_one_passes(op, kernel, shape):
    """torch's CPU group_norm and batch_norm backward round intermediates to f16/bf16 (the default kernels run them
    on f32 copies, which pass)."""
    for layout in ("contiguous", "channels_last"):
        assert judge(IMPL + kernel, op, shape, "f32", direction="bwd_data", layout=layout).passed
        assert not judge(IMPL + kernel, op, shape, "bf16", direction="bwd_data", layout=layout).passed


def test_the_eps_probe_names_the_backward_bug():
    outcome = judge(IMPL + "group_norm_backward_no_eps", "group_norm", {"shape": [2, 8, 6, 6], "groups": 4}, "f16",
                    direction="bwd_data")
    assert not outcome.passed and "leaves eps out" in outcome.report


@pytest.mark.parametrize("op, shape", [("group_norm", {"shape": [2, 8, 3, 5], "groups": 2}),
                                       ("batch_norm", {"shape": [3, 4, 2, 5]}), ("batch_norm", {"shape": [6, 5]}),
                                       ("group_norm", {"shape": [2, 6, 7], "groups": 3, "affine": False})])
def test_the_backward_reference_is_torch_s_autograd_in_float64(op, shape):
    problem = make_problem(op, "bwd_data", "f32", "contiguous", shape, (-1.0, 1.0), 4)
    inputs64 = {name: t.double() for name, t in generate_inputs(problem).items()}
    params = problem.params
    x = inputs64["x"].clone().requires_grad_()
    weight = inputs64["weight"].clone().requires_grad_() if "weight" in inputs64 else None
    bias = torch.zeros_like(weight, requires_grad=True) if weight is not None else None
    y = (torch.nn.functional.group_norm(x, params.groups, weight, bias, params.eps) if op == "group_norm"
         else torch.nn.functional.batch_norm(x, None, None, weight, bias, training=True, eps=params.eps))
    y.backward(inputs64["grad_y"])
    expected = {"grad_x": x.grad, **({"grad_weight": weight.grad, "grad_bias": bias.grad} if weight is not None else {})}
    got = problem.numerics.reference(problem, inputs64)
    assert set(got) == set(expected)
    for name, value in expected.items():
        torch.testing.assert_close(got[name], value, rtol=1e-10, atol=1e-12, msg=name)


def test_torch_s_group_norm_backward_fails_bf16_groups_of_mean_1000_even_on_f32_copies():
    """Values 1000, 1004, 1008, ... (bf16's grid there): torch's backward formula loses what kernels written from the
    contract keep; configs.toml leaves that case out."""
    shape = {"shape": [2, 16, 8, 8], "groups": 4, "offset": 1000.0}
    torch_s = judge(None, "group_norm", shape, "bf16", direction="bwd_data", data_range=(1.0, 5.0), seed=1)
    assert not torch_s.passed and torch_s.comparison.bound_ratio > 4
    for kernel in channel_kernels.CORRECT_BACKWARD["group_norm"]:
        assert judge(IMPL + kernel, "group_norm", shape, "bf16", direction="bwd_data", data_range=(1.0, 5.0), seed=1).passed
