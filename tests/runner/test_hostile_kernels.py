"""Kernels that break the contract in ways that used to poison the run (issue 46): global state left changed for
later cases, inputs written into or returned, sparse results, NaN payloads, exception text that cannot be encoded.
Each case ends with a reason naming what the kernel did, and the next case starts from the run's initial state.
The kernels are tests/hostile_kernels.py."""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
import torch

from conftest import catalogue_text, square_gemm_suite
from e2egen.generator.cases import expand
from e2egen.generator.execute import describe, execute
from e2egen.generator.loader import load_catalogue

IMPL = "hostile_kernels:"
SQUARE = square_gemm_suite()


def _state():
    import sys

    return (torch.get_default_dtype(), str(torch.get_default_device()), torch.are_deterministic_algorithms_enabled(),
            os.getcwd(), np.geterr(), torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32,
            torch.full((1,), 1e-39).mul(1.0).item() != 0.0, sys.getrecursionlimit(), torch.is_autocast_enabled("cpu"),
            torch.matmul, vars(torch.Tensor).get("__matmul__"), sys.modules.get("e2egen.metrics"))


@pytest.fixture
def case(tmp_path, fresh_profiles, monkeypatch):
    """The square f32 gemm case, with a kernel of hostile_kernels; the process's state put back after the test
    whatever the code under test did (so that a failure here cannot poison other tests)."""
    path = tmp_path / "hostile.toml"
    path.write_text(catalogue_text(SQUARE), encoding="utf-8")
    (base,) = expand(load_catalogue(str(path)))
    cwd, err = os.getcwd(), np.geterr()
    yield lambda kernel: dataclasses.replace(base, impl=IMPL + kernel)
    torch.set_flush_denormal(False)
    torch.set_default_dtype(torch.float32)
    torch.set_default_device(None)
    torch.use_deterministic_algorithms(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.chdir(cwd)
    np.seterr(**err)


@pytest.mark.parametrize("kernel,named", [
    ("gemm_lowers_recursion_limit", ["recursion limit "]),
    ("gemm_sets_autocast", ["autocast cpu on (bfloat16)"]),
    ("gemm_patches_matmul", ["torch or numpy functions torch.Tensor.__matmul__, torch.matmul"]),
    ("gemm_deletes_harness_modules", ["harness modules removed or replaced: e2egen.metrics"]),
    ("gemm_sets_flush_to_zero", ["flush-to-zero on"]),
    ("gemm_sets_default_dtype", ["default dtype float64"]),
    ("gemm_sets_meta_device", ["default device meta"]),
    ("gemm_sets_many", ["deterministic algorithms on", "working directory '/'", "numpy error handling",
                        "float32 matmul precision", "float32_matmul_precision=medium",
                        "cuda.matmul.fp32_precision=tf32"]),
])
def test_global_state_a_kernel_changes_is_put_back_and_named(case, kernel, named):
    before = _state()
    outcome = execute(case(kernel), device="cpu")
    assert _state() == before
    assert outcome.passed, describe(outcome)  # its product is right: changing state is named, not failed
    assert "the kernel changed global state: " in outcome.report and "; restored" in outcome.report
    for text in named:
        assert text in outcome.report
    clean = execute(case("gemm"), device="cpu")  # the next case starts from the run's state, and says nothing
    assert clean.passed and "global state" not in clean.report
    assert _state() == before


def test_a_case_starts_from_the_runs_initial_state_whatever_was_left(case):
    execute(case("gemm"), device="cpu")  # the run's state is taken
    before = _state()
    torch.set_default_dtype(torch.float64)  # left by something outside a kernel call (a kernel module, say)
    torch.set_flush_denormal(True)
    outcome = execute(case("gemm"), device="cpu")
    assert outcome.passed, describe(outcome)
    assert _state() == before


@pytest.mark.parametrize("kernel,reason", [
    ("gemm_writes_input", "kernel hostile_kernels:gemm_writes_input wrote into its input a"),
    ("gemm_returns_view", "kernel hostile_kernels:gemm_returns_view returned a view of input a"),
    ("gemm_returns_sparse", "returned a sparse (sparse_coo) tensor"),
    ("gemm_returns_nan_payload", "returned NaN where the reference is a number"),
])
@pytest.mark.parametrize("warm", [True, False])
def test_aliasing_mutation_and_odd_results_are_named_in_every_timing_mode(case, kernel, reason, warm):
    outcome = execute(case(kernel), device="cpu", warm_kernel=warm)
    assert outcome.status == "failed"
    assert reason in outcome.reason


def test_the_kernel_gets_its_own_copies_so_the_reference_never_sees_a_write(case):
    from e2egen.runner import make_problem
    from e2egen.runner.kernels import call_kernel, case_kernel
    from e2egen.runner.errors import KernelFailure

    problem = make_problem("gemm", "fwd", "f32", "nn", {"m": 4, "n": 4, "k": 4}, (-1.0, 1.0), 1)
    a, b = torch.rand(4, 4), torch.rand(4, 4)
    saved = a.clone()
    with pytest.raises(KernelFailure, match="wrote into its input a"):
        call_kernel(problem, case_kernel(problem, IMPL + "gemm_writes_input"), {"a": a, "b": b}, torch.device("cpu"),
                    label="w")
    assert torch.equal(a, saved)


def test_an_undecodable_exception_message_becomes_safe_text(case):
    outcome = execute(case("gemm_raises_undecodable"), device="cpu")
    assert outcome.status == "failed"
    assert "cannot open /tmp/weights-\\udcff.bin" in outcome.reason
    for text in (outcome.reason, outcome.report, describe(outcome)):
        text.encode("utf-8")  # no lone surrogate left


def test_a_kernel_cannot_close_the_harness_streams(case, capsys):
    import sys

    outcome = execute(case("gemm_closes_stdout"), device="cpu")
    assert outcome.passed, describe(outcome)
    assert not sys.stdout.closed and not sys.stderr.closed
    print("still writable")
    assert "still writable" in capsys.readouterr().out


@pytest.mark.parametrize("kernel,reason", [
    ("gemm_raises_unprintable", "kernel hostile_kernels:gemm_raises_unprintable raised UnprintableError: "
                                "<unprintable UnprintableError: its str() raised RuntimeError>"),
    ("gemm_raises_base_exception", "kernel hostile_kernels:gemm_raises_base_exception raised KernelBaseException: "
                                   "not an Exception (a BaseException that is not an Exception)"),
    ("gemm_raises_generator_exit", "kernel hostile_kernels:gemm_raises_generator_exit raised GeneratorExit: from the "
                                   "kernel (a BaseException that is not an Exception)"),
    ("gemm_returns_poisoned_subclass", None),
])
def test_what_a_kernel_raises_or_returns_is_its_failure_never_the_harness_error(case, kernel, reason):
    """These used to end as "error while running the case" / "error outside the case runner", the kernel unnamed."""
    outcome = execute(case(kernel), device="cpu")
    if reason is None:  # the subclass is read as the plain tensor it holds: its values are right
        assert outcome.passed, describe(outcome)
        return
    assert outcome.status == "failed" and outcome.reason == f"kernel failed: {reason}", outcome.reason
    assert "error while running the case" not in outcome.report


def test_a_ten_megabyte_message_is_cut_in_the_reason_and_report(case):
    outcome = execute(case("gemm_raises_ten_megabytes"), device="cpu")
    assert outcome.status == "failed" and outcome.reason.startswith("kernel failed: kernel hostile_kernels:")
    assert len(outcome.reason) < 2_100 and "more characters cut" in outcome.reason
    assert len(outcome.report) < 201_000


def test_a_kernel_module_raising_a_base_exception_on_import_is_an_impl_error():
    from e2egen.runner.errors import ImplError
    from e2egen.runner.kernels import resolve_impl

    with pytest.raises(ImplError, match="importing module 'hostile_module_raises_base' raised ImportBaseException: "
                                        "raised while importing"):
        resolve_impl("gemm", "fwd", "hostile_module_raises_base:gemm")


@pytest.mark.parametrize("outcome", [pytest.fail, pytest.skip])
def test_pytests_own_outcomes_raised_inside_a_kernel_go_on_up(outcome):
    """pytest-timeout ends a case by pytest.fail() from inside the kernel's frame; caught as the kernel's
    BaseException, the probes went on and the case ran into its hard limit instead (pytest's outcomes say they
    live in builtins)."""
    from e2egen.runner import make_problem
    from e2egen.runner.kernels import call_kernel

    problem = make_problem("gemm", "fwd", "f32", "nn", {"m": 4, "n": 4, "k": 4}, (-1.0, 1.0), 1)

    def kernel(a, b):
        outcome("from inside the kernel")

    with pytest.raises(BaseException, match="from inside the kernel") as raised:
        call_kernel(problem, kernel, {"a": torch.rand(4, 4), "b": torch.rand(4, 4)}, torch.device("cpu"), label="k")
    assert not isinstance(raised.value, Exception)  # pytest's own, not a KernelFailure


def test_what_torch_does_to_its_own_namespace_is_no_kernels_patch(case):
    """torch._dynamo wraps torch.manual_seed when torch.compile first loads it: putting that back, and blaming the
    kernel, would be wrong."""
    original = torch.manual_seed
    try:
        outcome = execute(case("gemm_under_torch_dynamo"), device="cpu")
        assert outcome.passed, describe(outcome)
        assert "global state" not in outcome.report
        assert torch.manual_seed is not original  # torch's wrapper stays
    finally:
        torch.manual_seed = original
