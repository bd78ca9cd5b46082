"""gemm_gemm with an element-wise step between the products: out = R_T(f(s·A·B))·C."""
from __future__ import annotations

import sys
import types

import pytest
import torch

from e2egen import metrics
from e2egen.runner.errors import ProblemError
from e2egen.runner.ops.math_functions import FUNCTIONS
from e2egen.runner.options import BoundModel
from e2egen.runner.problem import make_problem
from e2egen.runner import run  # the package's function: importing the submodule first would bind the name `run` to it


def problem(dtype, between, scale=1.0, layout="ntn", seed=5):
    return make_problem("gemm_gemm", "fwd", dtype, layout,
                        {"m": 24, "n": 48, "k": 96, "o": 16, "between": between, "scale": scale}, (-1.0, 1.0), seed)


def ratio(result):
    return metrics.compare(result.ref, result.out, dtype=result.out_dtype, bound=result.bound).bound_ratio


def fused_f32(a, b, c, *, scale=1.0, between="identity"):
    """Keeps A·B in f32 into the step (no rounding before f): the contract allows it."""
    stepped = torch.matmul(a.float(), b.float()) * scale
    if between != "identity":
        stepped = FUNCTIONS[between].kernel(stepped)
    return torch.matmul(stepped.to(a.dtype), c)


def step_after_second_product(a, b, c, *, scale=1.0, between="identity"):
    out = torch.matmul(torch.matmul(a, b), c).float() * scale
    return (FUNCTIONS[between].kernel(out) if between != "identity" else out).to(a.dtype)


def scale_forgotten(a, b, c, *, scale=1.0, between="identity"):
    return fused_f32(a, b, c, scale=1.0, between=between)


def tanh_form(a, b, c, *, scale=1.0, between="identity"):
    return fused_f32(a, b, c, scale=scale, between="gelu_tanh" if between == "gelu" else between)


def step_left_in_f32(a, b, c, *, scale=1.0, between="identity"):
    """The intermediate never rounded to the dtype: another function than the case's, within half a step
    of T per intermediate element, which the bound's rounding flips already allow (as for the identity)."""
    stepped = FUNCTIONS[between].kernel(torch.matmul(a.float(), b.float()) * scale)
    return torch.matmul(stepped, c.float()).to(a.dtype)


@pytest.fixture(scope="module", autouse=True)
def kernels():
    module = types.ModuleType("gemm_gemm_step_kernels")
    for kernel in (fused_f32, step_after_second_product, scale_forgotten, tanh_form, step_left_in_f32):
        setattr(module, kernel.__name__, kernel)
    sys.modules[module.__name__] = module
    yield
    del sys.modules[module.__name__]


# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = [pytest.mark.usefixtures("fresh_profiles"), pytest.mark.cpu_paths]  # tests/conftest.py


@pytest.mark.parametrize("between", ["relu", "gelu", "silu", "tanh", "exp"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_torch_and_a_fused_kernel_pass(between, dtype):
    for impl in (None, "gemm_gemm_step_kernels:fused_f32"):
        for scale in (1.0, 0.125):
            assert ratio(run(problem(dtype, between, scale), impl=impl, bound=BoundModel())) <= 1.0, (impl, scale)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("kernel, between, scale", [
    ("step_after_second_product", "gelu", 1.0),
    ("scale_forgotten", "silu", 0.125),
])
def test_wrong_kernels_fail(dtype, kernel, between, scale):
    caught = [ratio(run(problem(dtype, between, scale, seed=seed), impl=f"gemm_gemm_step_kernels:{kernel}",
                        bound=BoundModel())) > 1.0 for seed in (5, 6)]
    assert any(caught)


def test_an_intermediate_kept_in_f32_passes_within_the_bound():
    """The contract's direction: rounding the intermediate is the case's function, but keeping it in f32
    differs by less than the rounding flips the bound allows, so it passes (see gemm_gemm's docstring)."""
    for dtype in ("f16", "bf16"):
        assert ratio(run(problem(dtype, "silu"), impl="gemm_gemm_step_kernels:step_left_in_f32", bound=BoundModel())) <= 1.0


def test_gelu_in_its_tanh_form_fails_in_f32():
    assert ratio(run(problem("f32", "gelu"), impl="gemm_gemm_step_kernels:tanh_form", bound=BoundModel())) > 1.0


def test_the_step_reaches_the_kernel_only_when_the_case_has_one():
    seen = []

    def plain(a, b, c, **keywords):
        seen.append(keywords)
        return torch.matmul(torch.matmul(a, b), c)

    sys.modules["gemm_gemm_step_kernels"].plain = plain
    run(problem("f32", "identity"), impl="gemm_gemm_step_kernels:plain", bound=None, measure=False)
    run(problem("f32", "relu", 0.5), impl="gemm_gemm_step_kernels:plain", bound=None, measure=False)
    plain_calls = len(seen) // 2  # every call of a run (a warm-up included) gets the same keywords
    assert seen[:plain_calls] == [{}] * plain_calls
    assert seen[plain_calls:] == [{"scale": 0.5, "between": "relu"}] * plain_calls


def test_bad_step_parameters_name_the_key():
    with pytest.raises(ProblemError, match="between"):
        problem("f16", "gelu_erf")
    with pytest.raises(ProblemError, match="scale"):
        problem("f16", "relu", 0.0)
