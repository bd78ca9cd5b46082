"""The recorded kernel time comes from a warm call: a JIT kernel's first-call compilation is not timed."""
from __future__ import annotations

import importlib

from e2egen.runner import make_problem, run

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


def problem(m):
    return make_problem("gemm", "fwd", "f32", "nn", {"m": m, "n": 8, "k": 8}, (-1.0, 1.0), 0)


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
