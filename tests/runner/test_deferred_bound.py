"""A product-sum bound formed inside the comparison's pass (metrics.ulp_terms.ScaledPlusUlps): the same
comparison, bit for bit, as with the bound written out first."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from e2egen import metrics
from e2egen.metrics import fused_numba
from e2egen.metrics.ulp_terms import ScaledPlusUlps
from e2egen.runner import BoundModel, make_problem, run
from e2egen.runner.bound import compute_bound

needs_numba = pytest.mark.skipif(not fused_numba.AVAILABLE, reason="the pass that forms the bound is numba's")


def _one_element_off(n: int, seed: int, terms_dtype: torch.dtype):
    """ref, its f16 rounding with one element moved (at an index where (t·W)·F and t·(W·F) differ), the
    terms, W, F and that index: bound_ratio is then d/B of that element alone, so it shows B's last bit."""
    generator = torch.Generator().manual_seed(seed)
    sensitive = torch.empty(0)
    while sensitive.numel() == 0:  # about a third of the elements are, for random values
        ref = torch.randn(n, dtype=torch.float64, generator=generator) * 4
        terms = (ref.abs() * 3 + torch.rand(n, dtype=torch.float64, generator=generator)).to(terms_dtype)
        widening = 1.0 + float(torch.rand((), dtype=torch.float64, generator=generator)) * 2.0 ** -10
        scale = float(torch.rand((), dtype=torch.float64, generator=generator)) * 0.1 + 1e-3
        wide = terms.to(torch.float64)
        sensitive = ((wide * widening) * scale != wide * (widening * scale)).nonzero().flatten()
    at = int(sensitive[seed % sensitive.numel()])
    out = ref.half()
    out[at] = out[at] + 0.25
    return ref, out, terms, widening, scale, at


@needs_numba
@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 700), seed=st.integers(0, 2 ** 16), chunk=st.sampled_from([None, 7, 64]),
       terms_dtype=st.sampled_from([torch.float32, torch.float64]), count=st.sampled_from([0.0, 0.5, 1.0]))
def test_formed_in_the_pass_equals_formed_first(n, seed, chunk, terms_dtype, count):
    """Every field of the comparison, worst elements included, where the kernel's reassociation would
    change the bound's last bit (the element judged is one where it does)."""
    ref, out, terms, widening, scale, at = _one_element_off(n, seed, terms_dtype)
    deferred = ScaledPlusUlps(terms, scale, ref, "f16", count, widening=widening)
    in_pass = metrics.compare(ref, out, "f16", bound=deferred, chunk=chunk)
    formed = metrics.compare(ref, out, "f16", bound=deferred.values, chunk=chunk)
    assert in_pass == formed
    definition = (float(terms[at]) * widening) * scale + count * float(metrics.ulp(ref[at:at + 1], "f16"))
    assert in_pass.worst["bound_ratio"].index == at and in_pass.worst["bound_ratio"].bound == definition


@needs_numba
def test_a_large_output_on_every_thread_agrees():
    ref, out, terms, widening, scale, _ = _one_element_off(3 * (1 << 17) + 5, 11, torch.float32)
    out = (ref + torch.randn(ref.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) * 1e-3).half()
    deferred = ScaledPlusUlps(terms, scale, ref, "f16", 1.0, widening=widening)
    assert metrics.compare(ref, out, "f16", bound=deferred) == metrics.compare(ref, out, "f16", bound=deferred.values)


def test_every_other_path_forms_the_values_first():
    """The torch pass, a ref that is not the bound's own, and a reshaped ref: the same comparison."""
    ref, out, terms, widening, scale, _ = _one_element_off(300, 5, torch.float32)
    deferred = ScaledPlusUlps(terms, scale, ref, "bf16", 1.0, widening=widening)
    formed = metrics.compare(ref, out, "f16", bound=deferred.values)
    torch_pass = metrics.compare(ref, out, "f16", bound=deferred, backend="torch")
    assert torch_pass == metrics.compare(ref, out, "f16", bound=deferred.values, backend="torch")
    assert torch_pass.bound_ratio == formed.bound_ratio and torch_pass.worst == formed.worst
    assert metrics.compare(ref.clone(), out, "f16", bound=deferred) == formed  # another ref: formed from its own
    other = ref * 3.0  # one of other values: still the bound's own ref's B, not one formed from this ref
    assert metrics.compare(other, out, "f16", bound=deferred) == metrics.compare(other, out, "f16",
                                                                                bound=deferred.values)
    fresh = ScaledPlusUlps(terms, scale, ref, "bf16", 1.0, widening=widening)
    metrics.compare(other, out, "f16", bound=fresh)
    assert "values" not in fresh.__dict__  # compare's fallback does not keep a tensor with the caller's object


def test_the_bound_is_checked_as_a_written_one():
    """A NaN reference makes the bound NaN: refused alike; a shape that does not fit is refused."""
    ref = torch.tensor([1.0, math.nan, 2.0], dtype=torch.float64)
    deferred = ScaledPlusUlps(ref.abs().float(), 0.1, ref, "f16", 1.0)
    for bound in (deferred, deferred.values):
        with pytest.raises(ValueError, match="bound must be >= 0"):
            metrics.compare(ref, ref.half(), "f16", bound=bound)
    with pytest.raises(ValueError, match="shape mismatch: bound"):
        metrics.compare(ref[:2], ref[:2].half(), "f16", bound=deferred)


def test_values_at_indices_are_the_values():
    ref, _, terms, widening, scale, _ = _one_element_off(500, 3, torch.float32)
    deferred = ScaledPlusUlps(terms.view(20, 25), scale, ref.view(20, 25), "f8e4m3fn", 2.0, widening=widening)
    where = torch.tensor([0, 7, 499, 250])
    assert torch.equal(deferred.at(where), deferred.values.view(-1)[where])


def test_the_runner_hands_compare_the_unformed_bound():
    """A gemm's bound reaches compare unformed; its values are the runner's bound, and the verdict the
    same as with them written out."""
    problem = make_problem("gemm", "fwd", "f16", "nn", {"m": 40, "n": 24, "k": 16}, (-1.0, 1.0), seed=4)
    result = run(problem, device="cpu", bound=BoundModel())
    assert isinstance(result.primary.compare_bound, ScaledPlusUlps)
    assert result.primary.compare_bound.ref is result.ref
    from e2egen.runner.inputs import generate_inputs

    inputs64 = {name: t.double() for name, t in generate_inputs(problem).items()}
    assert torch.equal(result.bound, compute_bound(problem, inputs64, result.ref, BoundModel()))
    in_pass = metrics.compare(result.ref, result.out, "f16", bound=result.primary.compare_bound)
    assert in_pass == metrics.compare(result.ref, result.out, "f16", bound=result.bound)
