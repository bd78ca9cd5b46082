"""The element-wise backward (bwd_data of every unary function: exp, tanh, relu, sqrt, log, square, sigmoid, rsqrt,
log1p, silu, gelu, gelu_tanh; runner/ops/math_functions.py):
torch's own backward formulas and kernels written apart from them pass the acceptance interval, each planted bug
fails, y is an output a forward pass can give, and the functions left out say so."""
from __future__ import annotations

import pytest
import torch

from e2egen.api import judge
from e2egen.runner import make_problem
from e2egen.runner.errors import ProblemError
from e2egen.runner.inputs import generate_inputs
from e2egen.runner.ops.math_functions import FUNCTIONS
from e2egen.runner.ops.pointwise import kernels

pytestmark = pytest.mark.cpu_paths  # torch's own CPU kernels

IMPL = "e2egen.runner.ops.pointwise.kernels:"
RANGES = {"sqrt": (0.01, 4.0), "log": (0.01, 4.0), "rsqrt": (0.01, 4.0), "log1p": (-0.9, 4.0)}
# torch's own backward where it rounds in the input format: the formats it fails in (f32 it gets right)
IN_FORMAT = {"torch_sigmoid_backward": ("f16",), "torch_rsqrt_backward_native": ("f16", "bf16"),
             "log1p_backward_sum_in_format": ("f16", "bf16")}
CASES = [({"shape": [64, 1000]}, "contiguous"), ({"shape": [4, 16, 10, 10]}, "channels_last"),
         ({"shape": [300, 24]}, "strided")]


@pytest.mark.parametrize("op, kernel", [(op, name) for op in kernels.CORRECT_BACKWARD
                                        for name in ("torch", *kernels.CORRECT_BACKWARD[op])])
def test_correct_backward_kernels_pass(op, kernel):
    for shape, layout in CASES:
        for dtype in ("f32", "f16", "bf16"):
            outcome = judge(None if kernel == "torch" else IMPL + kernel, op, shape, dtype, direction="bwd_data",
                            layout=layout, data_range=RANGES.get(op, (-4.0, 4.0)))
            assert outcome.passed, (shape, layout, dtype, outcome.reason)


@pytest.mark.parametrize("op, kernel", [(op, name) for op, names in kernels.WRONG_BACKWARD.items() for name in names])
def test_planted_backward_bugs_fail(op, kernel):
    dtypes = IN_FORMAT.get(kernel, ("f16", "bf16") if kernel.endswith("_in_format") else ("f32", "f16", "bf16"))
    for dtype in dtypes:
        outcome = judge(IMPL + kernel, op, {"shape": [64, 1000]}, dtype, direction="bwd_data",
                        data_range=RANGES.get(op, (-4.0, 4.0)))
        assert not outcome.passed, dtype


@pytest.mark.parametrize("op", ["exp", "sqrt"])
def test_the_saved_y_is_the_forward_s_rounded_output(op):
    """y = f(x) rounded for an x of the case's range: f's inverse brings every y back into it."""
    problem = make_problem(op, "bwd_data", "f16", "contiguous", {"shape": [8, 100]}, RANGES.get(op, (-4.0, 4.0)), 3)
    assert problem.input_shapes == {"grad_y": (8, 100), "y": (8, 100)} and problem.output_names == ("grad_x",)
    y = generate_inputs(problem)["y"].double()
    inverse = {"exp": torch.log, "sqrt": torch.square}[op](y)
    low, high = RANGES.get(op, (-4.0, 4.0))
    slack = 0.01 * (high - low)  # y's rounding to f16
    assert bool(((inverse > low - slack) & (inverse < high + slack)).all()) and FUNCTIONS[op].name == op


@pytest.mark.parametrize("kernel", list(IN_FORMAT))
def test_torch_s_own_backward_rounding_in_the_input_format_passes_in_f32(kernel):
    op = next(name for name, wrong in kernels.WRONG_BACKWARD.items() if kernel in wrong)
    assert judge(IMPL + kernel, op, {"shape": [64, 1000]}, "f32", direction="bwd_data",
                 data_range=RANGES.get(op, (-4.0, 4.0))).passed


def test_a_product_of_three_factors_is_judged_in_any_order():
    """torch's sigmoid backward multiplies (g·(1 - y))·y; g·(y·(1 - y)) rounds otherwise: both pass in f32."""
    for kernel in ("torch_sigmoid_backward", "sigmoid_backward_f32"):
        for seed in range(3):
            assert judge(IMPL + kernel, "sigmoid", {"shape": [64, 1000]}, "f32", direction="bwd_data",
                         data_range=(-8.0, 8.0), seed=seed).passed


@pytest.mark.parametrize("op", ["div", "pow"])
def test_functions_without_a_backward_name_the_directions(op):
    with pytest.raises(ProblemError) as error:
        make_problem(op, "bwd_data", "f16", "contiguous", {"shape": [4, 8]}, (0.5, 1.0), 0)
    assert "bwd_data" in str(error.value) and "fwd" in str(error.value)
