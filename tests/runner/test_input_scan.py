"""Σ|a·b|'s f32 scan taken while the inputs are widened (runner/magnitude.widened_with_scan).

The scan is the f32 path's premises and |inputs| as f32; taken in the widening pass, before the kernel
runs, it must be exactly what a scan of the float64 copy gives, stay tied to that copy (dropped when the
copy changes or dies), and leave every bound as it was.
"""
from __future__ import annotations

import math
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from e2egen import metrics
from e2egen.metrics import fused_numba
from e2egen.runner import BoundModel, ReferenceOptions, make_problem, run
from e2egen.runner import magnitude, narrowing

run_module = sys.modules["e2egen.runner.run"]  # the package's `run` is the function

pytestmark = pytest.mark.skipif(not fused_numba.AVAILABLE, reason="numba is not installed")

NARROW = [(torch.float16, "f16"), (torch.bfloat16, "bf16")]


def fresh_scan(wide: torch.Tensor) -> magnitude.Scan:
    """The scan of a copy of `wide`, which has no record: the float64 pass's own answer."""
    return magnitude._narrowed(wide.clone())


def assert_same_scan(got: magnitude.Scan, expected: magnitude.Scan) -> None:
    nan = expected[0].isnan()
    assert torch.equal(got[0].isnan(), nan)  # a NaN's payload may differ: NaN makes the scan inexact anyway
    assert torch.equal(got[0][~nan].view(torch.int32), expected[0][~nan].view(torch.int32))  # bits: -0 too
    assert got[2] == expected[2] or (math.isnan(got[2]) and math.isnan(expected[2]))
    assert (got[1], got[3]) == (expected[1], expected[3])


@pytest.mark.parametrize("flush", [False, True])
@pytest.mark.parametrize("dtype,name", NARROW)
def test_every_16_bit_pattern_widens_exactly_and_flushes_as_metrics_does(dtype, name, flush):
    patterns = torch.arange(1 << 16, dtype=torch.int32).to(torch.uint16).view(dtype)
    expected = patterns.to(torch.float64)
    if flush:
        expected = metrics.flush_subnormals(expected, name)
    for widened in (narrowing.widen(patterns, flush_subnormals=flush),
                    magnitude.widened_with_scan(patterns, name if flush else None)):
        assert torch.equal(widened.isnan(), expected.isnan())
        finite = ~expected.isnan()
        assert torch.equal(widened[finite].view(torch.int64), expected[finite].view(torch.int64))  # -0 too


@pytest.mark.parametrize("flush", [False, True])
def test_f32_flushes_its_subnormals_as_metrics_does(flush):
    tiny = 2.0 ** -149
    tensor = torch.tensor([tiny, -tiny, 2.0 ** -126, -(2.0 ** -127), 0.0, -0.0, 1.5, math.inf, math.nan])
    expected = tensor.to(torch.float64)
    if flush:
        expected = metrics.flush_subnormals(expected, "f32")
    wide = magnitude.widened_with_scan(tensor, "f32" if flush else None)
    assert torch.equal(wide.nan_to_num(7.0).view(torch.int64), expected.nan_to_num(7.0).view(torch.int64))
    assert magnitude._recorded_scan(wide) is not None
    assert_same_scan(magnitude._narrowed(wide), fresh_scan(wide))


@pytest.mark.parametrize("flush", [False, True])
@pytest.mark.parametrize("dtype,name", NARROW)
def test_the_scan_of_every_16_bit_pattern_is_the_float64_scan(dtype, name, flush):
    patterns = torch.arange(1 << 16, dtype=torch.int32).to(torch.uint16).view(dtype)
    wide = magnitude.widened_with_scan(patterns, name if flush else None)
    assert magnitude._recorded_scan(wide) is not None
    assert_same_scan(magnitude._narrowed(wide), fresh_scan(wide))


special_f32 = st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 2.0 ** -149, -(2.0 ** -126),
                               float(torch.finfo(torch.float32).max)])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.floats(width=32), special_f32), min_size=1, max_size=3000),
       st.sampled_from([torch.float32, torch.float16, torch.bfloat16]))
def test_the_recorded_scan_is_the_float64_scan_for_any_values(values, dtype):
    tensor = torch.tensor(values, dtype=torch.float32).to(dtype)
    wide = magnitude.widened_with_scan(tensor)
    assert torch.equal(wide.isnan(), tensor.isnan())
    assert torch.equal(wide.nan_to_num(7.0).view(torch.int64), tensor.to(torch.float64).nan_to_num(7.0).view(torch.int64))
    assert magnitude._recorded_scan(wide) is not None
    assert_same_scan(magnitude._narrowed(wide), fresh_scan(wide))


def test_a_scan_split_into_many_tasks_is_one_tasks(monkeypatch):
    from e2egen.metrics import threads

    tensor = torch.linspace(-3.0, 3.0, 100_003, dtype=torch.float32)
    tensor[[5, 77_777]] = torch.tensor([2.0 ** -140, 2.0 ** 100])  # the extremes in different tasks
    whole = magnitude._narrowed(magnitude.widened_with_scan(tensor))
    monkeypatch.setattr(threads, "LIGHT_TASK", 4096)
    assert_same_scan(magnitude._narrowed(magnitude.widened_with_scan(tensor)), whole)


def test_the_record_follows_its_tensor():
    wide = magnitude.widened_with_scan(torch.tensor([1.0, -2.0, 0.5], dtype=torch.float16))
    recorded = magnitude._narrowed(wide)
    assert magnitude._narrowed(wide) is recorded  # read from the record, no second pass
    assert magnitude._narrowed(wide.clone()) is not recorded  # equal values, another tensor: scanned anew
    wide.mul_(4.0)  # changed after its scan: the record no longer describes it
    assert magnitude._narrowed(wide)[2] == 8.0
    key = id(wide)
    del wide
    assert key not in magnitude._SCANS


def test_a_view_of_a_changed_input_is_not_served_from_the_record():
    wide = magnitude.widened_with_scan(torch.tensor([[1.0, -2.0], [0.5, 4.0]], dtype=torch.bfloat16))
    view = wide.mT
    assert magnitude.recorded_magnitudes(view) is not None
    wide[0, 0] = 8.0  # the input changed after its scan (through the base: the view's base's version moves)
    assert magnitude.recorded_magnitudes(view) is None
    view.mul_(2.0)  # and through a view
    assert magnitude.recorded_magnitudes(wide) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_flushing_on_the_thread_cannot_make_the_record_hide_a_subnormal(dtype):
    """A kernel library built with fast-math may leave DAZ and FTZ set on the thread. The scan must still
    see an f32 subnormal input (2^-140), so the record is not served as subnormal-free."""
    tensor = torch.ones(200_000, dtype=torch.float32)
    tensor[::7] = 2.0 ** -140 if dtype == torch.float32 else 2.0 ** -130
    tensor = tensor.to(dtype)
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush subnormals")
    try:
        wide = magnitude.widened_with_scan(tensor)
        served = magnitude.recorded_magnitudes(wide)
        scan = magnitude._recorded_scan(wide)
    finally:
        torch.set_flush_denormal(False)
    assert served is None
    assert scan[1] < magnitude.F32_MIN_NORMAL or not scan[3]  # seen as subnormal, or as inexact


def test_an_f32_nan_of_any_payload_makes_the_scan_inexact():
    patterns = torch.tensor([0x7F800001, 0x7FBFFFFF, 0x7FC00000, -0x7FFFFFFF, 0x3F800000], dtype=torch.int32)
    wide = magnitude.widened_with_scan(patterns.view(torch.float32))  # signalling and quiet NaNs, either sign
    assert not magnitude._recorded_scan(wide)[3] and magnitude.recorded_magnitudes(wide) is None


def test_a_run_under_inference_mode_bounds_as_outside_it():
    problem = make_problem("gemm", "fwd", "f16", "nn", {"m": 8, "n": 8, "k": 32}, (-1.0, 1.0), 1)
    outside = run(problem, device="cpu", bound=BoundModel())
    with torch.inference_mode():  # no version counters: the scan is not recorded, the bound scans again
        inside = run(problem, device="cpu", bound=BoundModel())
    assert torch.equal(inside.bound, outside.bound)


def test_tensors_the_pass_does_not_serve_are_left_to_the_other_widenings(monkeypatch):
    assert magnitude.widened_with_scan(torch.ones(4, dtype=torch.float64)) is None
    assert magnitude.widened_with_scan(torch.ones(4, 2, dtype=torch.float16).mT) is None  # not contiguous
    assert magnitude.widened_with_scan(torch.ones(0, dtype=torch.float16)) is None
    from e2egen.metrics.backend import ENV_VAR

    monkeypatch.setenv(ENV_VAR, "torch")  # the numba passes turned off
    assert magnitude.widened_with_scan(torch.ones(4, dtype=torch.float16)) is None


def test_which_inputs_are_scanned():
    gemm = make_problem("gemm", "fwd", "f16", "nt", {"m": 8, "n": 8, "k": 16}, (-1.0, 1.0), 1)
    conv = make_problem("conv2d", "bwd_data", "bf16", "nhwc", {"n": 1, "c": 4, "k": 4, "hw": [6, 6], "kernel": 3},
                        (-1.0, 1.0), 1)
    assert magnitude.scanned_inputs(gemm) == set(gemm.input_shapes) and len(gemm.input_shapes) == 2
    assert magnitude.scanned_inputs(conv) == set(conv.input_shapes) and len(conv.input_shapes) == 2
    long = make_problem("gemm", "fwd", "f32", "nn", {"m": 1, "n": 1, "k": 1 << 21}, (-1.0, 1.0), 1)
    assert not magnitude.scanned_inputs(long)  # K·u too large: the bound sums in float64
    attention = make_problem("attention", "fwd", "f16", "bhsd",
                             {"seq_q": 8, "seq_k": 16, "head_dim_qk": 8, "score_scale": True, "score_bias": True},
                             (-1.0, 1.0), 1)
    assert magnitude.scanned_inputs(attention) == {"q", "k", "v"}  # not the score tensors its bound never scans
    assert {"score_scale", "score_bias"} <= set(attention.input_shapes)
    chain = make_problem("gemm_gemm", "fwd", "bf16", "nnn", {"m": 8, "n": 8, "k": 8, "o": 8}, (-1.0, 1.0), 1)
    assert magnitude.scanned_inputs(chain) == {"a", "b", "c"}
    softmax = make_problem("softmax", "fwd", "f32", "contiguous", {"shape": [16, 64]}, (-1.0, 1.0), 3)
    scaled = make_problem("scaled_gemm", "fwd", "f8e4m3fn", "nt", {"m": 24, "n": 40, "k": 70}, (-50.0, 50.0), 3)
    assert not magnitude.scanned_inputs(softmax)  # no product of input magnitudes in its bound
    assert not magnitude.scanned_inputs(scaled)  # its bound multiplies decoded products, not its codes
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        assert not magnitude.scanned_inputs(gemm)  # torch may sum f32 in bf16: float64 instead
    finally:
        torch.set_float32_matmul_precision(before)
    assert magnitude.scanned_inputs(gemm)


def test_a_run_records_scans_of_the_named_inputs_only(monkeypatch):
    recorded = []
    widen = magnitude.widened_with_scan

    def noting(tensor, flush_subnormals=False):
        wide = widen(tensor, flush_subnormals)
        recorded.append(tuple(tensor.shape))
        return wide

    monkeypatch.setattr(magnitude, "widened_with_scan", noting)
    problem = make_problem("attention", "fwd", "f16", "bhsd",
                           {"seq_q": 8, "seq_k": 16, "head_dim_qk": 8, "head_dim_v": 4, "score_bias": True},
                           (-1.0, 1.0), 1)
    run(problem, device="cpu", bound=BoundModel())
    shapes = problem.input_shapes
    assert sorted(recorded) == sorted(tuple(shapes[name]) for name in ("q", "k", "v"))


CASES = [
    ("gemm", "fwd", "f16", "nt", {"m": 24, "n": 20, "k": 96}),
    ("gemm", "fwd", "bf16", "tn", {"m": 17, "n": 9, "k": 300}),
    ("gemm", "fwd", "f32", "nn", {"m": 16, "n": 12, "k": 64}),
    ("conv2d", "bwd_weight", "f16", "nhwc", {"n": 2, "c": 8, "k": 6, "hw": [9, 8], "kernel": 3, "pad": 1}),
    ("attention", "fwd", "f16", "bhsd", {"seq_q": 32, "seq_k": 48, "head_dim_qk": 16, "heads_q": 4,
                                         "heads_kv": 2, "batch": 2}),
    ("attention", "fwd", "bf16", "bshd", {"seq_q": 1, "seq_k": 64, "head_dim_qk": 8, "heads_q": 8,
                                          "heads_kv": 2}),
    ("gemm_gemm", "fwd", "f16", "ntn", {"m": 16, "n": 24, "k": 32, "o": 8, "between": "gelu"}),
    ("conv_gemm", "fwd", "bf16", "nhwc-t", {"n": 1, "c": 8, "k": 8, "hw": [6, 6], "kernel": 3, "o": 4}),
]


@pytest.mark.parametrize("reference", [ReferenceOptions(), ReferenceOptions(ftz=True)], ids=["plain", "ftz"])
@pytest.mark.parametrize("op,direction,dtype,layout,params", CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in CASES])
def test_the_bound_is_the_same_whether_the_inputs_widening_scanned_or_not(op, direction, dtype, layout, params,
                                                                          reference, monkeypatch):
    problem = make_problem(op, direction, dtype, layout, params, (-2.0, 2.0), 3)
    scanned = run(problem, device="cpu", bound=BoundModel(), reference=reference)
    monkeypatch.setattr(run_module, "scanned_inputs", lambda problem: frozenset())
    plain = run(problem, device="cpu", bound=BoundModel(), reference=reference)
    for name, output in scanned.outputs.items():
        assert torch.equal(output.bound, plain.outputs[name].bound), name
        assert torch.equal(output.ref, plain.outputs[name].ref), name


@pytest.mark.parametrize("op,direction,dtype,layout,params", CASES[:4], ids=[f"{c[0]}-{c[2]}" for c in CASES[:4]])
def test_a_product_sum_bound_reads_no_input_again(op, direction, dtype, layout, params, monkeypatch):
    problem = make_problem(op, direction, dtype, layout, params, (-2.0, 2.0), 3)

    def no_second_scan(*args):
        raise AssertionError("the float64 copy was scanned again")

    monkeypatch.setattr(magnitude, "_narrow_chunk", no_second_scan)
    assert run(problem, device="cpu", bound=BoundModel()).bound is not None


def test_input_magnitudes_come_from_the_record_for_the_input_and_its_views(monkeypatch):
    from e2egen.runner import upper_matmul

    tensor = (torch.linspace(-3.0, 3.0, 6 * 8, dtype=torch.float32) ** 3).reshape(6, 8).to(torch.bfloat16)
    wide = magnitude.widened_with_scan(tensor)
    views = (wide, wide.mT, wide[1:4, 2:], wide[::2], wide[None].expand(3, 6, 8), wide.reshape(2, 3, 8)[:, 1])
    fresh = [upper_matmul.rounded_up(view.clone()) for view in views]  # clones have no record: their own pass

    def no_pass(*args):
        raise AssertionError("an input's magnitudes were rounded up again")

    monkeypatch.setattr(upper_matmul, "_round_up_chunk", no_pass)
    for view, (expected, expected_largest) in zip(views, fresh):
        got, largest = upper_matmul.rounded_up(view)
        assert got.shape == view.shape and torch.equal(got, expected)
        assert largest >= expected_largest and largest == float(wide.abs().max())  # the whole input's


def test_an_input_with_f32_subnormals_is_rounded_up_as_before():
    from e2egen.runner import upper_matmul

    tensor = torch.tensor([1.0, 2.0 ** -130, -3.0, 0.0], dtype=torch.bfloat16)  # 2^-130: an f32 subnormal
    wide = magnitude.widened_with_scan(tensor)
    assert magnitude.recorded_magnitudes(wide) is None
    up, _ = upper_matmul.rounded_up(wide)
    assert up[1].item() == 2.0 ** -126  # raised to f32's smallest normal, which the scan's copy is not


def test_no_scan_without_a_bound(monkeypatch):
    def no_scan(*args, **kwargs):
        raise AssertionError("scanned for a run with no bound")

    monkeypatch.setattr(magnitude, "widened_with_scan", no_scan)
    problem = make_problem("gemm", "fwd", "f16", "nn", {"m": 8, "n": 8, "k": 16}, (-1.0, 1.0), 1)
    assert run(problem, device="cpu").bound is None


def test_the_torch_backend_scans_nothing_early_and_bounds_alike(monkeypatch):
    from e2egen.metrics.backend import ENV_VAR

    problem = make_problem("gemm", "fwd", "bf16", "tn", {"m": 12, "n": 10, "k": 200}, (-1.0, 1.0), 2)
    numba_run = run(problem, device="cpu", bound=BoundModel())
    monkeypatch.setenv(ENV_VAR, "torch")
    recorded = []
    monkeypatch.setattr(magnitude, "_record_scan", lambda wide, scan: recorded.append(wide))
    torch_run = run(problem, device="cpu", bound=BoundModel())
    assert not recorded  # nothing scanned early: the bound scanned the float64 copies in torch's ops
    assert torch.equal(torch_run.bound, numba_run.bound)
