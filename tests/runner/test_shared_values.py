"""runner/ops/shared_values.py: a value the reference and the bound of a case both need is computed once per
set of input tensors, never reused for other or changed inputs, and dropped with the inputs."""
from __future__ import annotations

import gc

import pytest
import torch

from e2egen.runner import make_problem
from e2egen.runner.bound import RoundedIntermediate, error_bounds
from e2egen.runner.inputs import generate_inputs, reference_inputs
from e2egen.runner.ops import shared_values
from e2egen.runner.ops.shared_values import computed_once
from e2egen.runner.reference import compute_reference
from e2egen.runner.options import ReferenceOptions


def counting(calls: list, value):
    def compute():
        calls.append(1)
        return value
    return compute


def test_same_inputs_compute_once_and_changed_or_other_inputs_compute_again():
    a, b = torch.ones(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    calls: list = []
    first = computed_once("kind", 1, {"a": a, "b": b}, counting(calls, object()))
    assert computed_once("kind", 1, {"a": a, "b": b}, counting(calls, object())) is first and len(calls) == 1
    computed_once("kind", 2, {"a": a, "b": b}, counting(calls, object()))  # other parameters
    computed_once("kind", 2, {"a": a.clone(), "b": b}, counting(calls, object()))  # another tensor, same values
    assert len(calls) == 3
    kept = computed_once("kind", 2, {"a": a, "b": b}, counting(calls, object()))
    a.add_(1.0)  # changed in place: its version counter moves
    assert computed_once("kind", 2, {"a": a, "b": b}, counting(calls, object())) is not kept and len(calls) == 5


def test_kinds_are_kept_apart_and_dropped_with_their_inputs():
    a = torch.ones(3, dtype=torch.float64)
    calls: list = []
    computed_once("one", None, {"a": a}, counting(calls, "first"))
    assert computed_once("other", None, {"a": a}, counting(calls, "second")) == "second" and len(calls) == 2
    assert computed_once("one", None, {"a": a}, counting(calls, "again")) == "first"
    del a
    gc.collect()
    assert "one" not in shared_values._last and "other" not in shared_values._last


def test_a_new_value_of_a_kind_detaches_the_old_ones_finalisers():
    a = torch.ones(3, dtype=torch.float64)
    computed_once("kind", 1, {"a": a}, lambda: "first")
    old = list(shared_values._last["kind"].finalizers)
    assert old and all(f.alive for f in old)
    computed_once("kind", 2, {"a": a}, lambda: "second")  # the same long-lived tensor, other parameters
    assert not any(f.alive for f in old)  # one finaliser per input and kind, not one per value ever made
    assert all(f.alive for f in shared_values._last["kind"].finalizers)


@pytest.mark.parametrize("op, params, kind", [
    ("conv_gemm", {"n": 1, "c": 4, "k": 6, "hw": [5, 5], "kernel": [3, 3], "o": 3}, "conv→gemm intermediate"),
    ("gemm_gemm", {"m": 5, "n": 6, "k": 7, "o": 4}, "gemm→gemm A·B"),
])
def test_a_fused_chain_computes_its_first_product_once_for_reference_and_bound(op, params, kind, monkeypatch):
    problem = make_problem(op, "fwd", "f16", problem_layout(op), params, (-1.0, 1.0), 7)
    inputs64 = reference_inputs(generate_inputs(problem), torch.device("cpu"))
    computed: list = []
    real = shared_values.computed_once

    def spy(what, key_params, tensors, compute):
        return real(what, key_params, tensors, lambda: computed.append(what) or compute())

    monkeypatch.setattr(shared_values, "computed_once", spy)
    compute_reference(problem, inputs64, ReferenceOptions())
    bound = error_bounds(problem, inputs64)[problem.primary_output]
    assert computed.count(kind) == 1  # computed for the reference, found again for the bound
    assert bound.part(RoundedIntermediate).exact is shared_values._last[kind].value  # the bound reads that value


def problem_layout(op: str) -> str:
    from e2egen.runner import OPS

    return OPS[op].layouts[0]
