"""Pluggable kernels: resolution, the contract, and clear failures."""
from __future__ import annotations

import importlib
import math

import pytest
import torch

from e2egen import metrics
from e2egen.runner import ImplError, KernelFailure, ProblemError, Skip, make_problem, resolve_impl, run
from e2egen.runner.kernels import call_kernel, check_output
from e2egen.runner.ops.product_sum.kernels import torch_conv_fwd


def _sibling(name):
    package = __name__.rpartition(".")[0]  # tests/ may or may not be a package
    return importlib.import_module(f"{package}.{name}" if package else name)


kernels = _sibling("kernels_for_tests")
K = kernels.__name__
BROKEN = K.replace("kernels_for_tests", "broken_kernels_for_tests")

CONV = {
    "conv1d": {"n": 2, "c": 4, "k": 2, "w": 9, "kernel": 3, "stride": 2, "pad": 1, "groups": 2},
    "conv2d": {"n": 1, "c": 2, "k": 4, "hw": [6, 5], "kernel": [3, 2], "dilation": [2, 1], "pad": 1},
    "conv3d": {"n": 1, "c": 2, "k": 2, "dhw": 4, "kernel": 2, "stride": 2},
}
GEMM = {"m": 4, "n": 5, "k": 6}


def gemm_problem(batch=0, dtype="f16"):
    return make_problem("gemm", "fwd", dtype, "nt", {**GEMM, "batch": batch}, (-1.0, 1.0), 1)


def test_default_impl_is_torch():
    # torch's conv, wrapped to honour an fp8 case's out_dtype (ConvOp.default_kernel)
    assert resolve_impl("conv2d", "fwd").__wrapped__ is torch_conv_fwd
    assert resolve_impl("conv2d", "fwd", "torch").__wrapped__ is torch_conv_fwd
    assert resolve_impl("gemm", "fwd", f"{K}:gemm") is kernels.gemm


@pytest.mark.parametrize("op", list(CONV))
@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_well_behaved_plugins_receive_the_contract_arguments(op, direction):
    problem = make_problem(op, direction, "f32", "nhwc", CONV[op], (-1.0, 1.0), 4)
    plugged = run(problem, impl=f"{K}:conv_{direction}")
    assert plugged.impl == f"{K}:conv_{direction}"
    torch.testing.assert_close(plugged.out, run(problem).out, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("batch", [0, 3])
def test_gemm_plugin_batched_and_plain(batch):
    result = run(gemm_problem(batch), impl=f"{K}:gemm")
    assert result.out.shape == gemm_problem(batch).output_shape


@pytest.mark.parametrize("impl,expected", [
    ("wrong_shape_conv_fwd", "returned shape {shape[0]}, expected {problem.output_shape}"),
    ("wrong_dtype_conv_fwd", "returned dtype torch.float64, expected torch.float16"),
])
def test_contract_breaches_are_kernel_failures(impl, expected):
    problem = make_problem("conv2d", "fwd", "f16", "nchw", CONV["conv2d"], (-1.0, 1.0), 1)
    shape = [(*problem.output_shape[:-1], problem.output_shape[-1] - 1)]
    with pytest.raises(KernelFailure) as info:
        run(problem, impl=f"{K}:{impl}")
    assert expected.format(shape=shape, problem=problem) in info.value.reason
    assert f"{K}:{impl}" in info.value.reason


@pytest.mark.parametrize("impl,expected", [
    ("wrong_device_gemm", "on meta, expected cpu"),
    ("returns_list_gemm", "returned list, expected a torch.Tensor"),
    ("raises_gemm", "raised RuntimeError: boom: tile size 0 is not a valid configuration"),
    ("out_of_memory_gemm", "ran out of memory"),
])
def test_failing_plugins_are_kernel_failures(impl, expected):
    with pytest.raises(KernelFailure) as info:
        run(gemm_problem(), impl=f"{K}:{impl}", device="cpu")
    assert expected in info.value.reason
    assert "second line" not in info.value.reason


def test_tf32_output_must_be_f32():
    problem = gemm_problem(dtype="tf32")
    check_output(problem, torch.zeros(problem.output_shape), torch.device("cpu"), "k")
    with pytest.raises(KernelFailure, match="expected torch.float32 .f32."):
        check_output(problem, torch.zeros(problem.output_shape, dtype=torch.float16), torch.device("cpu"), "k")


def test_nan_output_is_not_a_kernel_failure():
    result = run(gemm_problem(), impl=f"{K}:nan_gemm")
    assert torch.isnan(result.out).all()
    comparison = metrics.compare(result.ref, result.out, dtype=result.out_dtype)
    assert comparison.nan_mismatch == math.prod(result.out.shape)
    assert not comparison.check({"rms": 1.0}).passed


def test_torch_lacking_a_kernel_is_a_skip():
    def missing(x, w, **geometry):
        raise RuntimeError('"slow_conv2d_cpu" not implemented for \'Half\'')

    problem = make_problem("conv2d", "fwd", "f16", "nchw", CONV["conv2d"], (-1.0, 1.0), 1)
    tensors = {"x": torch.zeros(problem.input_shapes["x"], dtype=torch.float16),
               "w": torch.zeros(problem.input_shapes["w"], dtype=torch.float16)}
    with pytest.raises(Skip, match="torch has no cpu kernel for conv2d fwd in f16"):
        call_kernel(problem, missing, tensors, torch.device("cpu"), label="torch")
    # The same error from a team's kernel is that kernel's failure.
    with pytest.raises(KernelFailure):
        call_kernel(problem, missing, tensors, torch.device("cpu"), label="mine")


@pytest.mark.parametrize("impl,expected", [
    ("no_such_package_e2e.kernels:f", "cannot import module 'no_such_package_e2e.kernels'"),
    (f"{K}:no_such_function", f"module '{K}' has no attribute 'no_such_function'"),
    (f"{K}:NOT_CALLABLE", "'NOT_CALLABLE' is an int, not a callable"),
    (f"{BROKEN}:f", "raised ImportError: libmykernels.so: cannot open shared object file"),
    ("just_a_name", "expected 'package.module:function'"),
    ("a.b:c:d", "expected 'package.module:function'"),
])
def test_unresolvable_impls_are_impl_errors(impl, expected):
    with pytest.raises(ImplError) as info:
        resolve_impl("conv2d", "fwd", impl)
    assert expected in str(info.value) and info.value.impl == impl
    with pytest.raises(ImplError):  # run() resolves before doing any work
        run(make_problem("conv2d", "fwd", "f16", "nchw", CONV["conv2d"], (-1.0, 1.0), 1), impl=impl)


def test_resolve_impl_checks_op_and_direction():
    with pytest.raises(ProblemError) as info:
        resolve_impl("gemm", "bwd_data", f"{K}:gemm")
    assert info.value.key == "direction"
    with pytest.raises(ProblemError):
        resolve_impl("conv5d", "fwd")
