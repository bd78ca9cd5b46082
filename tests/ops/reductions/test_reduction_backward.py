"""The reductions' backward (bwd_data): sum, mean, max and var of runner/ops/reductions/spec.py, and cumsum's. torch's
autograd and kernels written apart from it pass by the default verdict; each planted bug fails wherever it
changes a result beyond the output format's resolution; the cumsum backward's probes read its accumulator."""
from __future__ import annotations

import pytest
import torch

from e2egen.api import judge
from e2egen.runner import BoundModel, make_problem, run
from e2egen.runner.errors import ProblemError
from e2egen.runner.inputs import arrange_for_kernel, generate_inputs
from e2egen.runner.ops.reductions import kernels

# torch's own backward kernels on the CPU paths (AVX2, AVX-512): .ci/run runs these on both
pytestmark = pytest.mark.cpu_paths

IMPL = "e2egen.runner.ops.reductions.kernels:"
# (shape keys, layout): a row, a column (strided), the channels (channels_last) and a full reduction
CASES = {
    "rows": ({"shape": [16, 1000]}, "contiguous"),
    "columns-strided": ({"shape": [300, 24], "axis": 0}, "strided"),
    "channels-cl": ({"shape": [2, 16, 6, 6], "axis": 1}, "channels_last"),
    "full": ({"shape": [8, 8, 64], "axis": [0, 1, 2]}, "contiguous"),
}
DTYPES = ("f32", "f16", "bf16")


def _judge(op: str, kernel: str, case: str, dtype: str, value_range=(-1.0, 1.0)):
    shape, layout = CASES[case]
    if op == "cumsum":
        shape = {"shape": shape["shape"], "axis": shape.get("axis", -1)}
    return judge(None if kernel == "torch" else IMPL + kernel, op, shape, dtype, direction="bwd_data", layout=layout,
                 data_range=value_range)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", [c for c in CASES if c != "full"] + ["full"])
@pytest.mark.parametrize("op, kernel", [(op, name) for op in ("sum", "mean", "max", "var", "cumsum")
                                        for name in ("torch", *kernels.CORRECT_BACKWARD[op])])
def test_correct_backward_kernels_pass(op, kernel, case, dtype):
    if op == "cumsum" and case == "full":
        pytest.skip("cumsum scans one dim")
    outcome = _judge(op, kernel, case, dtype)
    assert outcome.passed, outcome.reason


@pytest.mark.parametrize("op, kernel, case, dtype", [
    ("mean", "half_reciprocal_mean_backward", "rows", "f32"),  # 1/1000 in f16: 2^-12 relative
    ("mean", "half_reciprocal_mean_backward", "columns-strided", "f32"),
    ("mean", "n_minus_one_mean_backward", "columns-strided", "bf16"),  # 1/299 for 1/300
    ("mean", "n_minus_one_mean_backward", "channels-cl", "f16"),
    ("max", "first_max_backward", "rows", "f16"),  # f16 draws tie at the maxima
    ("max", "first_max_backward", "columns-strided", "bf16"),
    ("cumsum", "prefix_cumsum_backward", "rows", "f32"),
    ("cumsum", "input_format_cumsum_backward", "rows", "bf16"),
    ("cumsum", "input_format_cumsum_backward", "channels-cl", "f16"),
    ("var", "torch_var_backward", "rows", "f16"),  # torch's own rounds the mean, x - μ and the scale to f16
    ("var", "torch_var_backward", "channels-cl", "bf16"),
    ("var", "var_backward_biased", "columns-strided", "f32"),  # N for N - 1
    ("var", "var_backward_no_two", "full", "bf16"),
    ("var", "var_backward_mean_in_format", "rows", "bf16"),
])
def test_planted_backward_bugs_fail(op, kernel, case, dtype):
    outcome = _judge(op, kernel, case, dtype)
    assert not outcome.passed


def test_the_split_among_tied_maxima_is_the_contract():
    problem = make_problem("max", "bwd_data", "f16", "contiguous", {"shape": [16, 1000]}, (-1.0, 1.0), 0)
    x = generate_inputs(problem)["x"]
    maxima = x == x.amax(dim=1, keepdim=True)
    assert (maxima.sum(dim=1) > 1).any(), "the case must draw tied maxima"
    result = run(problem, device="cpu", bound=BoundModel())
    grad_x, ref = result.primary.out.double(), result.primary.ref
    assert torch.equal(grad_x.sum(dim=1), result.primary.ref.sum(dim=1))  # the whole gradient, shared out
    assert torch.equal((grad_x != 0), maxima) and torch.equal(grad_x, ref.to(torch.float16).double())


def test_the_sum_backward_is_judged_exact():
    def one_ulp_off(grad_y, x, *, dim):
        grad_x = kernels.broadcast_sum_backward(grad_y, x, dim=dim)
        grad_x.view(-1)[7] = torch.nextafter(grad_x.view(-1)[7], torch.tensor(2.0, dtype=grad_x.dtype))
        return grad_x

    assert not judge(one_ulp_off, "sum", {"shape": [16, 1000]}, "f32", direction="bwd_data").passed
    assert judge(kernels.broadcast_sum_backward, "sum", {"shape": [16, 1000]}, "f32", direction="bwd_data").passed


@pytest.mark.parametrize("kernel, bits", [("torch", 24), ("input_format_cumsum_backward", 11)])
def test_the_cumsum_backward_s_probes_read_its_accumulator(kernel, bits):
    problem = make_problem("cumsum", "bwd_data", "f16", "contiguous", {"shape": [16, 1000]}, (-1.0, 1.0), 3)
    result = run(problem, impl=None if kernel == "torch" else IMPL + kernel, device="cpu", bound=BoundModel(),
                 measure=True)
    assert result.arithmetic.arithmetic.acc_bits == bits


def test_the_backward_has_the_forward_s_input_and_an_output_of_its_shape():
    problem = make_problem("mean", "bwd_data", "f16", "channels_last", {"shape": [2, 16, 6, 6], "axis": [1, 3]},
                           (-1.0, 1.0), 0)
    assert problem.input_shapes == {"grad_y": (2, 6), "x": (2, 16, 6, 6)}
    assert problem.output_names == ("grad_x",) and problem.outputs["grad_x"].shape == (2, 16, 6, 6)
    stored = arrange_for_kernel(problem, generate_inputs(problem), torch.device("cpu"))
    assert stored["x"].is_contiguous(memory_format=torch.channels_last) and stored["grad_y"].is_contiguous()


def test_a_backward_direction_an_op_lacks_is_named_with_the_valid_ones():
    with pytest.raises(ProblemError) as error:
        make_problem("var", "bwd_weight", "f16", "contiguous", {"shape": [4, 8]}, (-1.0, 1.0), 0)
    assert "bwd_weight" in str(error.value) and "bwd_data" in str(error.value) and "fwd" in str(error.value)


@pytest.mark.parametrize("shape, correction", [({"shape": [5, 7]}, 1), ({"shape": [3, 6, 4], "axis": [0, 2]}, 0)])
def test_the_var_backward_reference_is_torch_s_autograd_in_float64(shape, correction):
    problem = make_problem("var", "bwd_data", "f32", "contiguous", {**shape, "correction": correction}, (-2.0, 3.0), 6)
    inputs64 = {name: t.double() for name, t in generate_inputs(problem).items()}
    x = inputs64["x"].clone().requires_grad_()
    torch.var(x, dim=problem.params.axes, correction=correction).backward(inputs64["grad_y"])
    torch.testing.assert_close(problem.numerics.reference(problem, inputs64)["grad_x"], x.grad, rtol=1e-12, atol=1e-14)


def test_torch_s_own_half_var_backward_passes_in_f32():
    """Its f16/bf16 steps are the bug; the same autograd in f32 is correct (the default runs it on f32 copies)."""
    assert _judge("var", "torch_var_backward", "rows", "f32").passed
