"""metrics/fused_compiled.py (the torch path's chunks under torch.compile) against the eager torch path.

Every value, count, index and histogram bucket must equal fused_torch's;
the sums only to rounding (another summation order). The first test of each
format compiles (tens of seconds; inductor's cache serves later runs).
Speed is benchmarks/bench_metrics.py's business (--torch-compile), not here.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from e2egen.metrics import compare, fused_compiled, fused_torch, get_format  # noqa: F401 -- compare first:
from e2egen.metrics.compare import _kernel_view  # loading the submodule by name first would shadow the function
from e2egen.metrics.partials import combine
from e2egen.notices import Notice

from test_metrics_torch_path import awkward_pair

REASON = fused_compiled.unavailable(torch.device("cpu"))
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"torch.compile cannot run here: {REASON}")

SUMS = ("sum_sq_diff", "sum_sq_ref", "sum_sq_bound", "sum_s", "sum_sq_s", "sum_t", "sum_sq_t")


def totals(module, ref, out, name, bound=None, ftz=False, rel_floor=1e-3, chunk=1 << 15, mode=0):
    fmt, values, bits = _kernel_view(get_format(name), out)
    return combine(*module.partials(ref, values, bits, bound, fmt, ftz, rel_floor, chunk, mode))


def assert_same(ref, out, name, **kwargs) -> None:
    compiled, eager = totals(fused_compiled, ref, out, name, **kwargs), totals(fused_torch, ref, out, name, **kwargs)
    for field in SUMS:
        assert getattr(compiled, field) == pytest.approx(getattr(eager, field), rel=1e-12, abs=1e-300), field
    exact = {k: v for k, v in vars(compiled).items() if k not in SUMS}
    assert exact == {k: v for k, v in vars(eager).items() if k not in SUMS}  # NaN never reaches a maximum here


@pytest.mark.parametrize("name", ["f32", "f16", "bf16", "f8e4m3fn", "f8e5m2"])
def test_every_format_matches_the_eager_path(name):
    ref, out = awkward_pair(name, 20_000, seed=7)
    for ftz in (False, True):
        for chunk in (1 << 15, 3000, 777):
            assert_same(ref, out, name, ftz=ftz, chunk=chunk)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_bound_ftz_and_every_rounding(mode):
    ref, out = awkward_pair("f16", 30_000, seed=5)
    bound = ref.abs() * 2.0 ** -9
    bound[::89] = 0  # 0/0 = 0 and d/0 = inf
    for ftz in (False, True):
        assert_same(ref, out, "f16", bound=bound, ftz=ftz, mode=mode, chunk=4096, rel_floor=0.25)


def test_special_elements_take_the_general_kernel(monkeypatch):
    general = []
    original = fused_torch._chunk_general
    monkeypatch.setattr(fused_torch, "_chunk_general", lambda *args: general.append(args[7]) or original(*args))
    fmt = get_format("f16")
    ref, out = awkward_pair("f16", 40_000, seed=11)
    out[2 * 4096 + 17] = float("nan")
    ref[5 * 4096 + 3] = fmt.max * 4
    ref[7 * 4096 + 4000] = float("nan")
    out[9 * 4096 + 1] = float("inf")
    bound = torch.full_like(ref, 1e-2)
    for kwargs in ({}, {"bound": bound, "ftz": True}):
        assert_same(ref, out, "f16", chunk=4096, **kwargs)
        general.clear()
        compiled = totals(fused_compiled, ref, out, "f16", chunk=4096, **kwargs)
        assert compiled.counts["nan_mismatch"] == (2, 2 * 4096 + 17) and compiled.counts["overflow"][0] == 1
        assert sorted(general) == [2 * 4096, 5 * 4096, 7 * 4096, 9 * 4096]  # the others: compiled


@pytest.mark.parametrize("n", [1, 2, 3, 4095, 4096, 4097, 3 * 4096 + 5])
def test_sizes_and_padding(n):
    ref, out = awkward_pair("f16", max(n, 64), seed=n)
    ref, out = ref[:n].contiguous(), out[:n].contiguous()
    ref[n // 2] = 0.0  # a real ref == 0 next to the padding's zeros
    assert_same(ref, out, "f16", chunk=4096, ftz=True)
    assert_same(ref, out, "f16", chunk=1 if n < 100 else 3)  # chunks of 1 become rows of 2


def test_ties_keep_the_first_element_across_chunks():
    ref = torch.linspace(1, 2, 10_000, dtype=torch.float64)
    out = ref.to(torch.float16)
    out[5000] = out[5000] * 1.5
    out[9000] = out[9000] * 1.5
    compiled = totals(fused_compiled, ref, out, "f16", chunk=1000)
    assert compiled.maxima["max_ulp_diff"][1] == 5000
    assert_same(ref, out, "f16", chunk=1000)


def test_zero_and_float64_subnormal_references():
    ref = torch.tensor([5e-324, -1e-310, 1.0, 0.0, -0.0, 0.0], dtype=torch.float64)
    out = torch.tensor([1.0, 1e-3, 1.0, 0.0, 0.0, 1e-3], dtype=torch.float16)
    compiled = totals(fused_compiled, ref, out, "f16")
    assert compiled.maxima["max_rel_diff"][0] == math.inf and compiled.histogram[-1] == 3
    assert_same(ref, out, "f16")


def test_a_bad_bound_is_refused():
    ref = torch.randn(5000, dtype=torch.float64)
    bound = ref.abs()
    bound[4321] = float("nan")
    with pytest.raises(ValueError, match="bound"):
        totals(fused_compiled, ref, ref.to(torch.float16), "f16", bound=bound, chunk=1000)


def test_one_graph_serves_every_size_and_chunk():
    from torch._dynamo.utils import counters

    ref, out = awkward_pair("f16", 70_000, seed=1)
    totals(fused_compiled, ref, out, "f16")  # compiled (or loaded) here
    graphs = counters["stats"]["unique_graphs"]
    for n, chunk in ((70_000, 1 << 15), (50_001, 1000), (9, 4), (65_536, 1 << 15), (3, 1 << 15)):
        totals(fused_compiled, ref[:n].contiguous(), out[:n].contiguous(), "f16", chunk=chunk, ftz=True, mode=2,
               rel_floor=0.5)
    assert counters["stats"]["unique_graphs"] == graphs


def test_without_a_compiler_it_says_why_once_and_runs_eager(monkeypatch):
    monkeypatch.setattr(fused_compiled, "unavailable", lambda device: "no C++ compiler (test)")
    ref, out = awkward_pair("bf16", 5000, seed=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = totals(fused_compiled, ref, out, "bf16", chunk=1000)
        totals(fused_compiled, ref, out, "bf16", chunk=1000)
    notes = [w for w in caught if issubclass(w.category, Notice)]
    assert len(notes) == 1 and "no C++ compiler (test)" in str(notes[0].message)
    assert "eager torch path" in str(notes[0].message)
    eager = totals(fused_torch, ref, out, "bf16", chunk=1000)
    assert vars(compiled) == vars(eager)  # it was the eager path: bit for bit


def test_a_compile_failure_falls_back_to_eager(monkeypatch):
    def failing(constants, has_bound):
        def function(*args):
            raise RuntimeError("inductor broke (test)")
        return function

    monkeypatch.setattr(fused_compiled, "compiled", failing)
    monkeypatch.setattr(fused_compiled, "_failed", {})
    ref, out = awkward_pair("f32", 5000, seed=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = totals(fused_compiled, ref, out, "f32", chunk=1000)
    assert any("RuntimeError: inductor broke (test)" in str(w.message) for w in caught)
    assert vars(result) == vars(totals(fused_torch, ref, out, "f32", chunk=1000))
    assert list(fused_compiled._failed.values()) == ["RuntimeError: inductor broke (test)"]


def test_formats_it_does_not_compile_take_the_eager_path():
    ref = torch.linspace(-3, 3, 1001, dtype=torch.float64)
    out = ref.to(torch.float8_e4m3fnuz)
    fmt, values, bits = _kernel_view(get_format("f8e4m3fnuz"), out)
    compiled = fused_compiled.partials(ref, values, bits, None, fmt, False, 1e-3, 256)
    eager = fused_torch.partials(ref, values, bits, None, fmt, False, 1e-3, 256)
    assert all(np.array_equal(a, b) for a, b in zip(compiled, eager))
