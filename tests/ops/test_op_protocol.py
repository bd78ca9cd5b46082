"""The op protocol: several named outputs, integer outputs, composed bounds; and one bound formula.

A toy op registered for these tests returns two outputs, a float product and
an integer count, so the protocol's multi-output and integer paths run
end to end (runner.run, then the case's verdict) on the CPU.
"""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
import torch

from conftest import REPO
from e2egen import runner
from e2egen.generator.cases import Case
from e2egen.generator.execute import execute
from e2egen.runner.bound import (OutputRounding, ProductSumError, SumOfBounds, compute_bound, error_bounds, magnitude,
                                 magnitude_bound)
from e2egen.runner.inputs import generate_inputs, reference_inputs
from e2egen.runner.ops import GemmOp, register_op, unregister_op
from e2egen.runner.ops.base import TensorSpec
from e2egen.runner.ops.product_sum.numerics import GemmNumerics
from e2egen.runner.options import BoundModel, ReferenceOptions
from e2egen.runner.reference import compute_reference


class GemmWithCounts(GemmOp):
    """c = a·b, and per row of a the number of its nonzero entries (i32)."""

    name = "gemm_counts"

    def output_names(self, params, direction):
        return ("c", "nonzero")

    def outputs(self, params, direction, dtype):
        return {"c": TensorSpec(params.c_shape, "f32" if dtype == "tf32" else dtype),
                "nonzero": TensorSpec((*params.batch_dims, params.m), "i32")}


class GemmWithCountsNumerics(GemmNumerics):
    def default_kernel(self, direction):
        return gemm_and_counts

    def reference(self, problem, inputs64):
        c, counts = gemm_and_counts(inputs64["a"], inputs64["b"])
        return {"c": c, "nonzero": counts.to(torch.float64)}


TOY = GemmWithCounts()
TOY_NUMERICS = GemmWithCountsNumerics(TOY)


@pytest.fixture
def toy_op():
    register_op(TOY, TOY_NUMERICS)
    yield TOY
    unregister_op(TOY.name)


def wrong_count(a, b):
    c, counts = gemm_and_counts(a, b)
    return c, counts + 1


def as_mapping(a, b):
    c, counts = gemm_and_counts(a, b)
    return {"nonzero": counts, "c": c}


def one_output_only(a, b):
    return torch.matmul(a, b)


def gemm_and_counts(a, b):
    counts = (a != 0).sum(-1).to(torch.int32)
    return torch.matmul(a, b), counts


def toy_case(**changes) -> Case:
    case = Case(suite="toy", config="m8", op=TOY.name, direction="fwd", dtype="f16", layout="nn", range="r0",
                lo=-1.0, hi=1.0, params={"m": 8, "n": 5, "k": 16}, seed=3,
                tolerances={"bound_ratio": 1.0, "rms": 1e-2}, reference=ReferenceOptions(), bound=BoundModel(),
                impl=None, markers=(), pr=False, pr_reason="", flops=0, bytes_needed=0, reduction_size=16)
    return dataclasses.replace(case, **changes)


def test_every_output_comes_back_with_its_reference_and_bound(toy_op):
    problem = runner.make_problem(TOY.name, "fwd", "f16", "nn", {"m": 8, "n": 5, "k": 16}, (-1.0, 1.0), 3)
    assert problem.output_names == ("c", "nonzero") and problem.primary_output == "c"
    assert problem.bytes_needed == (8 * 16 + 16 * 5 + 8 * 5) * 2 + 8 * 4
    result = runner.run(problem, device="cpu", bound=BoundModel())
    assert list(result.outputs) == ["c", "nonzero"]
    assert result.outputs["nonzero"].out.dtype == torch.int32 and result.outputs["nonzero"].dtype == "i32"
    assert result.out is result.outputs["c"].out and result.out_dtype == "f16"
    assert result.outputs["c"].bound is not None and result.outputs["nonzero"].bound is None  # only c has a model


@pytest.mark.parametrize("impl, status, reason", [
    (None, "passed", ""),
    (f"{__name__}:as_mapping", "passed", ""),
    (f"{__name__}:wrong_count", "failed", "nonzero: "),
    (f"{__name__}:one_output_only", "failed", "expected a tuple of 2 tensors (c, nonzero)"),
])
def test_a_case_passes_only_when_every_output_does(toy_op, impl, status, reason):
    outcome = execute(toy_case(impl=impl), device="cpu")
    assert outcome.status == status, outcome.reason
    assert reason in outcome.reason
    if status == "passed":
        assert set(outcome.outputs) == {"c", "nonzero"}
        assert outcome.outputs["nonzero"][0].is_integer and outcome.outputs["nonzero"][0].mismatches == 0


def test_an_op_name_cannot_be_registered_twice(toy_op):
    with pytest.raises(ValueError, match="already registered"):
        register_op(TOY)
    with pytest.raises(ValueError, match="built-in"):
        unregister_op("gemm")


# -- one bound formula ------------------------------------------------------------------
def test_the_product_sum_bound_is_its_two_pieces():
    problem = runner.make_problem("conv2d", "bwd_weight", "tf32", "nhwc",
                                  {"n": 2, "c": 3, "k": 4, "hw": 6, "kernel": 3, "pad": 1}, (-1.0, 1.0), 5)
    inputs64 = reference_inputs(generate_inputs(problem), torch.device("cpu"))
    ref = compute_reference(problem, inputs64, ReferenceOptions()).value  # tf32 cannot run on a CPU; its bound can
    [bound] = error_bounds(problem, inputs64).values()
    assert isinstance(bound, SumOfBounds)
    accumulation, rounding = bound.part(ProductSumError), bound.part(OutputRounding)
    model = BoundModel(lam=3.0, acc="bf16", c_out=0.5)
    expected = accumulation.evaluate(model) + rounding.evaluate(model, ref)
    assert torch.equal(bound.evaluate(model, ref), expected)
    assert torch.equal(compute_bound(problem, inputs64, ref, model), expected)
    assert torch.equal(accumulation.magnitude, magnitude_bound(problem, inputs64))
    assert (accumulation.magnitude >= magnitude(problem, inputs64)).all()  # Σ|a·b| widened: never below


def test_explain_and_study_evaluate_the_runners_bound():
    from e2egen.diagnose.explain import Judge
    from e2egen.runner.bound import product_sum_bound

    problem = runner.make_problem("gemm", "fwd", "bf16", "tn", {"m": 6, "n": 7, "k": 40}, (1.0, 5.0), 9)
    inputs64 = reference_inputs(generate_inputs(problem), torch.device("cpu"))
    result = runner.run(problem, device="cpu")
    case = dataclasses.replace(toy_case(), op="gemm", dtype="bf16", layout="tn", bound=BoundModel(acc="bf16"))
    judge = Judge(case, problem, result.out, product_sum_bound(problem, inputs64))
    for model in (BoundModel(), BoundModel(acc="bf16", lam=2.0), BoundModel(strict=True, c_out=0.0)):
        assert torch.equal(judge.bound(result.ref, model), compute_bound(problem, inputs64, result.ref, model))


FORMULA_NAMES = {"unit_roundoff", "input_rounding", "product_sum_factor", "relative_factor"}


def test_the_bound_formula_is_written_in_the_runner_only():
    """Only runner/bound.py may use the formula's pieces; everything else evaluates its objects."""
    offenders = []
    for folder in ("e2egen", "generator", "nightly", "studies", "metrics", "runner", "benchmarks"):
        for path in (REPO / folder).rglob("*.py"):
            if path == REPO / "runner" / "bound.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
                if name in FORMULA_NAMES:
                    offenders.append(f"{Path(path).relative_to(REPO)}:{node.lineno} {name}")
    assert not offenders
