"""The recorded kernel time comes from a warm call: a JIT kernel's first-call compilation is not timed."""
from __future__ import annotations

import importlib

import pytest

from e2egen.runner import make_problem, run, warm_calls

run_py = importlib.import_module("e2egen.runner.run")  # the module (the package's `run` is the function)
HERE = __name__  # kernels below are named "<this module>:<function>" for run(impl=...)
CALLS: list[str] = []
_compiled: set[tuple] = set()


def jit_like_gemm(a, b):
    """Compiles on the first call of each shape (as XLA or Triton do), and says which call produced the output."""
    key = (tuple(a.shape), tuple(b.shape))
    CALLS.append("compile" if key not in _compiled else "warm")
    _compiled.add(key)
    return a @ b


def problem(m, seed=0, input_range=(-1.0, 1.0), layout="nn"):
    return make_problem("gemm", "fwd", "f32", layout, {"m": m, "n": 8, "k": 8}, input_range, seed)


@pytest.fixture(autouse=True)
def cold_process():
    """Each test starts as a fresh process would: no signature run yet (another test may have run these)."""
    warm_calls.forget()
    CALLS.clear()
    yield
    warm_calls.forget()


def test_a_fast_kernel_is_called_again_and_the_warm_call_is_recorded():
    CALLS.clear()
    result = run(problem(5), impl=f"{HERE}:jit_like_gemm")
    assert CALLS == ["compile", "warm"]
    assert {"kernel", "kernel_first_call"} <= set(result.timings)
    assert result.out.shape == (5, 8)


def test_a_slow_first_call_is_recorded_as_it_is(monkeypatch):
    monkeypatch.setattr(run_py, "WARM_CALL_LIMIT_S", 0.0)  # every first call counts as slow
    CALLS.clear()
    result = run(problem(6), impl=f"{HERE}:jit_like_gemm")
    assert CALLS == ["compile"]
    assert "kernel" in result.timings and "kernel_first_call" not in result.timings


def test_a_signature_already_run_is_not_repeated():
    run(problem(7), impl=f"{HERE}:jit_like_gemm")
    CALLS.clear()
    result = run(problem(7, seed=3, input_range=(-2.0, 2.0)), impl=f"{HERE}:jit_like_gemm")  # another range and seed
    assert CALLS == ["warm"]
    assert "kernel" in result.timings and "kernel_first_call" not in result.timings


@pytest.mark.parametrize("other", [dict(m=9), dict(m=7, layout="tn")], ids=["shape", "strides"])
def test_another_shape_or_layout_is_a_new_signature(other):
    run(problem(7), impl=f"{HERE}:jit_like_gemm")
    CALLS.clear()
    result = run(problem(**other), impl=f"{HERE}:jit_like_gemm")
    assert len(CALLS) == 2 and "kernel_first_call" in result.timings


def test_the_oldest_signature_is_forgotten_past_the_limit(monkeypatch):
    monkeypatch.setattr(warm_calls, "LIMIT", 2)
    for m in (3, 4, 5):
        run(problem(m), impl=f"{HERE}:jit_like_gemm")
    CALLS.clear()
    run(problem(4), impl=f"{HERE}:jit_like_gemm")  # kept
    assert len(CALLS) == 1
    run(problem(3), impl=f"{HERE}:jit_like_gemm")  # dropped: called twice again
    assert len(CALLS) == 3


def test_without_a_warm_time_the_first_call_is_recorded_and_nothing_repeated():
    result = run(problem(11), impl=f"{HERE}:jit_like_gemm", warm_kernel=False)
    assert CALLS == ["compile"]
    assert "kernel" in result.timings and "kernel_first_call" not in result.timings
