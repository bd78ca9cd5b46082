"""The error bound: its constants per format and mode, and B against brute force."""
from __future__ import annotations

import importlib
import itertools
import math

import pytest
import torch

from e2egen import metrics
from e2egen.runner import BoundModel, OPS, ProblemError, ProductSumOp, make_problem, run
from e2egen.runner.arithmetic import Arithmetic, assumed_arithmetic
from e2egen.runner.bound import compute_bound, error_bounds, growth, input_rounding, relative_factor, unit_roundoff
from e2egen.runner.inputs import generate_inputs


def _sibling(name):
    package = __name__.rpartition(".")[0]  # tests/ may or may not be a package
    return importlib.import_module(f"{package}.{name}" if package else name)


naive = _sibling("runner_naive")

PARAMS = {
    "conv1d": {"n": 2, "c": 4, "k": 2, "w": 7, "kernel": 3, "stride": 2, "pad": 1, "groups": 2},
    "conv2d": {"n": 1, "c": 2, "k": 4, "hw": [5, 4], "kernel": [2, 3], "stride": [2, 1], "pad": [[1, 0], [2, 1]], "dilation": [1, 2]},
    "conv3d": {"n": 1, "c": 2, "k": 2, "dhw": [3, 4, 3], "kernel": 2, "pad": [1, 0, 1]},
    "gemm": {"m": 3, "n": 4, "k": 17, "batch": 2},
}


def test_unit_roundoffs_come_from_the_formats():
    # Spec values: 2^-(significand bits).
    assert unit_roundoff("f32") == 2.0 ** -24
    assert unit_roundoff("f16") == 2.0 ** -11
    assert unit_roundoff("bf16") == 2.0 ** -8
    assert unit_roundoff("tf32") == 2.0 ** -11
    for name in ("f32", "f16", "bf16"):  # half of metrics' gap above 1 in the same format
        assert unit_roundoff(name) == metrics.get_format(name).eps / 2


def test_input_rounding_follows_the_measured_inputs():
    assert input_rounding(Arithmetic(inputs="tf32")) == 2 * 2.0 ** -11
    assert input_rounding(Arithmetic(inputs="bf16")) == 2 * 2.0 ** -8
    assert input_rounding(Arithmetic(inputs="f16", inputs_rounding="toward-zero")) == 4 * 2.0 ** -11
    assert input_rounding(Arithmetic(inputs="exact")) == 0.0
    assert input_rounding(assumed_arithmetic("tf32")) == 2 * 2.0 ** -11  # unmeasured: as the dtype says
    for dtype in ("f32", "f16", "bf16"):
        assert input_rounding(assumed_arithmetic(dtype)) == 0.0


def test_growth_is_sqrt_or_linear():
    for k in (1, 2, 9, 576, 4096):
        assert growth(k, strict=False) == math.sqrt(k)
        assert growth(k, strict=True) == k


@pytest.mark.parametrize("dtype,model", [
    ("f16", BoundModel()), ("bf16", BoundModel(lam=2.0, acc="bf16", strict=True, c_out=0.5)),
    ("tf32", BoundModel(acc="f16")), ("f32", BoundModel(c_out=0.0)),
])
def test_relative_factor(dtype, model):
    p = make_problem("gemm", "fwd", dtype, "nn", PARAMS["gemm"], (-1.0, 1.0), 0)
    k = PARAMS["gemm"]["k"]
    g = k if model.strict else math.sqrt(k)
    u_acc = {"f32": 2.0 ** -24, "measured": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}[model.acc]
    u_in = 2 * 2.0 ** -11 if dtype == "tf32" else 0.0
    assert relative_factor(p, model) == pytest.approx(model.lam * g * u_acc + u_in, rel=1e-15)


@pytest.mark.parametrize("op,direction", [(op, d) for op, spec in OPS.items() for d in spec.directions
                                          if isinstance(spec, ProductSumOp) and op != "scaled_gemm"])
# attention: test_attention_bound.py; scaled_gemm (fp8/fp4 only): tests/ops/scaled_gemm/test_scaled_gemm.py
@pytest.mark.parametrize("dtype", ["f16", "tf32"])
def test_bound_against_brute_force(op, direction, dtype):
    problem = make_problem(op, direction, dtype, OPS[op].layouts[-1], PARAMS[op], (-2.0, 1.0), seed=13)
    model = BoundModel(lam=3.0, strict=(dtype == "f16"), c_out=2.0)
    tensors = {name: t.double() for name, t in generate_inputs(problem).items()}
    ref = naive.evaluate(problem, tensors)
    bound = compute_bound(problem, tensors, ref, model)
    k = problem.reduction_size
    factor = model.lam * (k if model.strict else math.sqrt(k)) * 2.0 ** -24 + (2 * 2.0 ** -11 if dtype == "tf32" else 0.0)
    ulps = metrics.ulp(ref, problem.out_dtype)
    for index in itertools.product(*map(range, problem.output_shape)):
        magnitude = naive.brute_force_magnitude(problem, tensors, index)
        output_rounding = model.c_out * ulps[index].item()
        # Σ|a·b| is summed in f32 and widened (runner/magnitude.py): never below, at most (1 + (2K + 8)·u_f32) above
        low, high = factor * magnitude + output_rounding, factor * magnitude * (1 + (2 * k + 8) * 2.0 ** -24) + output_rounding
        assert low * (1 - 1e-13) <= bound[index].item() <= high * (1 + 1e-13)


@pytest.mark.cpu_paths
def test_run_computes_the_bound_from_its_reference():
    """The run's bound is the model's under the arithmetic it measured (on AVX2 torch's bf16 bwd_weight adds
    per-sample partials in bf16; on AVX-512 oneDNN accumulates in f32): the same model recomputes it."""
    problem = make_problem("conv2d", "bwd_weight", "bf16", "nhwc", PARAMS["conv2d"], (-1.0, 1.0), 3)
    result = run(problem, bound=BoundModel())
    assert result.bound is not None and result.bound.shape == result.ref.shape and "bound" in result.timings
    tensors = {name: t.double() for name, t in generate_inputs(problem).items()}
    measured = result.arithmetic.arithmetic if result.arithmetic is not None else None
    model = BoundModel().with_arithmetic(measured)
    recomputed = error_bounds(problem, tensors, measured)[problem.primary_output].evaluate(model, result.ref)
    assert torch.equal(result.bound, recomputed)
    assert run(problem).bound is None


@pytest.mark.parametrize("kwargs,key", [({"lam": 0}, "bound.lambda"), ({"lam": True}, "bound.lambda"), ({"acc": "f64"}, "bound.acc"),
                                        ({"strict": 1}, "bound.strict"), ({"c_out": -1.0}, "bound.c_out")])
def test_bound_model_is_validated(kwargs, key):
    with pytest.raises(ProblemError) as info:
        BoundModel(**kwargs)
    assert info.value.key == key


@pytest.mark.parametrize("c_out", [1.0, 0.5, 0.0])
def test_the_one_pass_bound_equals_its_parts_added(c_out):
    """SumOfBounds evaluates F·Σ|a·b| + c_out·ulp in one fused pass; the parts, added one by one, agree bit for bit."""
    from e2egen.runner.bound import error_bounds

    problem = make_problem("conv2d", "fwd", "f16", "nchw", PARAMS["conv2d"], (-2.0, 1.0), seed=3)
    tensors = {name: t.double() for name, t in generate_inputs(problem).items()}
    ref = naive.evaluate(problem, tensors)
    model = BoundModel(c_out=c_out)
    bound = error_bounds(problem, tensors)[problem.primary_output]
    parts = [part.evaluate(model, ref) for part in bound.parts]
    assert torch.equal(bound.evaluate(model, ref), parts[0] + parts[1])
