"""No numba pass is handed two arguments that share memory where the pass writes one of them.

LLVM vectorises a loop that reads one array and writes another behind a run-time check that the two do
not overlap; where they do, it runs its scalar copy of the loop instead, with the same results and several
times slower. metrics.ulp_terms.add_ulps passed its total as both the output and the terms of
fused_numba.scaled_plus_ulps_into and took 3.5× the time of a pass on two arrays (issue 20, eleventh round;
benchmarks/bench_bound_passes.py); tests/test_numba_vectorised.py cannot see that, since the vector loop is
there in the IR. Here every numba
kernel called from Python is wrapped while the warm-up and a small case of every op family run, and each
call's array arguments are checked: no two of them may share memory where the call changed either. The
same cases may use no argument types the warm-up leaves out (which the vectorisation check never sees).
"""
from __future__ import annotations

import importlib
import itertools

import numpy as np
import pytest
import torch

from e2egen.metrics import fused_numba
from small_cases import smallest_cases

# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = [pytest.mark.skipif(not fused_numba.AVAILABLE, reason="numba is not installed"), pytest.mark.cpu_paths]

KERNEL_MODULES = ["e2egen.metrics.fused_numba", "e2egen.metrics.rounding_numba", "e2egen.runner.draws",
                  "e2egen.runner.interval_passes", "e2egen.runner.magnitude", "e2egen.runner.narrowing",
                  "e2egen.runner.partial_passes", "e2egen.runner.softmax_passes",
                  "e2egen.runner.upper_matmul"]


def _dispatchers(module) -> dict[str, object]:
    from numba.core.registry import CPUDispatcher

    return {name: value for name, value in vars(module).items() if isinstance(value, CPUDispatcher)}


def _watched(name: str, kernel, overlaps: list) -> object:
    def call(*args, **keywords):
        arrays = [(index, value) for index, value in enumerate(itertools.chain(args, keywords.values()))
                  if isinstance(value, np.ndarray)]
        before = {index: value.tobytes() for index, value in arrays}
        result = kernel(*args, **keywords)
        written = {index for index, value in arrays if value.tobytes() != before[index]}
        for (i, a), (j, b) in itertools.combinations(arrays, 2):
            if (i in written or j in written) and np.shares_memory(a, b):
                overlaps.append(f"{name}: arguments {i} and {j}")
        return result
    return call


def _called_from_numba() -> set[str]:
    """Names the kernels' own code refers to: kernels another kernel calls, which numba must find as they
    are when it compiles that one (a wrapper there fails its typing)."""
    return {name for module_name in KERNEL_MODULES
            for kernel in _dispatchers(importlib.import_module(module_name)).values()
            for name in kernel.py_func.__code__.co_names}


@pytest.fixture
def overlaps(monkeypatch) -> list[str]:
    """Every numba kernel of the project that Python calls wrapped for the test (on one thread, so that a
    call's changes are its own); the list collects the overlapping calls."""
    found: list[str] = []
    inner = _called_from_numba()
    for module_name in KERNEL_MODULES:
        module = importlib.import_module(module_name)
        for name, kernel in _dispatchers(module).items():
            if name not in inner:
                monkeypatch.setattr(module, name, _watched(f"{module_name}.{name}", kernel, found))
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield found
    torch.set_num_threads(previous)


def test_the_check_tells_an_output_given_as_an_input(overlaps) -> None:
    """The old add_ulps call: one array as scaled_plus_ulps_into's output and its terms."""
    from e2egen.metrics.ulp_terms import ulp_args as _ulp_args

    total, ref = np.ones(64), np.linspace(-3.0, 3.0, 64)
    fused_numba.scaled_plus_ulps_into(total, total, 1.0, 1.0, ref, 0, 64, 1.0, *_ulp_args("f16"))
    fused_numba.scaled_plus_ulps_into(np.empty(64), total, 1.0, 1.0, ref, 0, 64, 1.0, *_ulp_args("f16"))
    assert overlaps == ["e2egen.metrics.fused_numba.scaled_plus_ulps_into: arguments 0 and 1"]


def test_the_warm_up_hands_no_pass_overlapping_arrays(overlaps) -> None:
    from e2egen.runner.warmup import warm

    warm()
    assert not overlaps


def test_a_small_case_of_every_op_hands_no_pass_overlapping_arrays(overlaps) -> None:
    from e2egen.generator.execute import execute

    cases = smallest_cases()
    assert len({case.op for case in cases}) >= 10
    for case in cases:
        outcome = execute(case, device="cpu")
        assert outcome.status == "passed", (case.id, outcome.reason)
    assert not overlaps, sorted(set(overlaps))


def test_every_signature_a_run_uses_is_one_the_warm_up_compiles() -> None:
    """The small cases above call no kernel with argument types the warm-up left out: such a call would
    compile in every fresh test process, and tests/test_numba_vectorised.py (which checks the warm-up's
    signatures) would not have looked at its loop."""
    from e2egen.generator.execute import execute
    from e2egen.runner.warmup import warm

    warm()
    kernels = {f"{name}.{kernel}": dispatcher for name in KERNEL_MODULES
               for kernel, dispatcher in _dispatchers(importlib.import_module(name)).items()}
    warmed = {name: set(dispatcher.signatures) for name, dispatcher in kernels.items()}
    for case in smallest_cases():
        execute(case, device="cpu")
    added = {name: set(dispatcher.signatures) - warmed[name] for name, dispatcher in kernels.items()}
    assert not {name: signatures for name, signatures in added.items() if signatures}
