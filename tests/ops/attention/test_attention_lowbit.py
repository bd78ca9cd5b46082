"""Attention in i8 (rocMLIR's quantized attention) and fp8: inputs, reference, default kernel, bound, verdicts.

The contract (docs/concepts/lowbit-attention.md): i8 Q and K, Q·Kᵀ exact in i32, minus an i8 quant bias, converted to
f16, times an f16 quant scale, then the f16 score scale and bias; softmax in f32; P in f16; P·V with f32 sums;
o (and lse) in f16.
"""
from __future__ import annotations

import pytest
import torch

from e2egen import metrics
from e2egen.runner import run
from e2egen.runner.errors import ProblemError
from e2egen.runner.inputs import generate_inputs, input_formats
from e2egen.runner.ops.attention.attention_math import OVERFLOWED, quantized_scores
from e2egen.runner.options import BoundModel
from e2egen.runner.problem import make_problem

DEFAULT_TOLERANCES = {"bound_ratio": 1.0, "bound_rms": 0.5, "bias_z": 6.0}  # configs.toml's [tolerances]
INT = (-5.0, 4.0)  # rocMLIR's seeded data
BASE = {"seq_q": 24, "seq_k": 40, "head_dim_qk": 32, "quantized": True}
SCALED = {**BASE, "quant_scale": 2.0 ** -6}  # moderate scores: a softmax that is not one-hot


# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = [pytest.mark.usefixtures("fresh_profiles"), pytest.mark.cpu_paths]  # tests/conftest.py


def problem(params, dtype="i8", layout="bhsd", input_range=INT, seed=3, data="integers"):
    return make_problem("attention", "fwd", dtype, layout, params, input_range, seed, data)


def verdicts(result):
    """{output: (comparison, verdict)} under configs.toml's default tolerances."""
    judged = {}
    for name, output in result.outputs.items():
        comparison = metrics.compare(output.ref, output.out, dtype=output.dtype, bound=output.bound)
        judged[name] = (comparison, comparison.check(DEFAULT_TOLERANCES))
    return judged


def passes(result) -> bool:
    return all(verdict.passed for _, verdict in verdicts(result).values())


# -- kernels under test: rocMLIR's arithmetic with one step changed (variants.QUANTIZED), fp8 K misread ---------
def impl(name: str) -> str:
    return f"e2egen.runner.ops.attention.variants:{name}"


# -- parameters, formats, inputs -------------------------------------------------------------------------
def test_i8_needs_quantized_and_quantized_needs_i8():
    with pytest.raises(ProblemError, match="quantized = true"):
        problem({"seq_q": 4, "seq_k": 4, "head_dim_qk": 8})
    with pytest.raises(ProblemError, match="runs in i8"):
        problem(BASE, dtype="f16", input_range=(-1.0, 1.0), data="uniform")
    with pytest.raises(ProblemError, match="quantized = true"):
        problem({"seq_q": 4, "seq_k": 4, "head_dim_qk": 8, "quant_scale": 0.5}, dtype="f16", input_range=(-1.0, 1.0),
                data="uniform")


@pytest.mark.parametrize("key, value, message", [("quant_scale", 0.1, "value of f16"), ("quant_bias", 300, "i8 value"),
                                                 ("scale", 0.125, "no scale of its own"), ("q_gain", 2.0, "i8")])
def test_quantized_parameters_are_checked(key, value, message):
    with pytest.raises(ProblemError, match=message):
        problem({**BASE, key: value})


def test_inputs_take_rocmlirs_formats_and_fixed_values():
    case = problem({**BASE, "score_scale": True, "score_bias": True, "quant_bias": -3, "quant_scale": 0.25})
    assert list(case.input_shapes) == ["q", "k", "v", "quant_bias", "quant_scale", "score_scale", "score_bias"]
    assert input_formats(case) == {"q": "i8", "k": "i8", "v": "f16", "quant_bias": "i8", "quant_scale": "f16",
                                   "score_scale": "f16", "score_bias": "f16"}
    inputs = generate_inputs(case)
    assert inputs["q"].dtype == inputs["k"].dtype == torch.int8 and inputs["v"].dtype == torch.float16
    assert inputs["quant_bias"].shape == (1, 1, 1, 1) and int(inputs["quant_bias"]) == -3
    assert float(inputs["quant_scale"]) == 0.25 and inputs["quant_scale"].dtype == torch.float16
    assert {spec.dtype for spec in problem({**BASE, "return_lse": True}).outputs.values()} == {"f16"}


def test_drawn_quant_values_come_from_the_case_data_as_rocmlir_draws_them():
    inputs = generate_inputs(problem(BASE, seed=11))
    assert -5 <= int(inputs["quant_bias"]) <= 4 and float(inputs["quant_scale"]).is_integer()


# -- the reference ------------------------------------------------------------------------------------
def test_the_reference_scores_are_rocmlirs_f16_chain_on_exact_integers():
    q = torch.tensor([[[[100.0, 100.0, 30.0]]]], dtype=torch.float64)
    k = torch.tensor([[[[100.0, 100.0, 30.0], [2.0, -3.0, 4.0]]]], dtype=torch.float64)
    params = problem({"seq_q": 1, "seq_k": 2, "head_dim_qk": 3, "quantized": True, "score_bias": True}).params
    inputs = {"q": q, "k": k, "quant_bias": torch.full((1, 1, 1, 1), 5.0, dtype=torch.float64),
              "quant_scale": torch.full((1, 1, 1, 1), 0.0625, dtype=torch.float64),
              "score_bias": metrics.round_to(torch.tensor([[[[0.001, 0.5]]]], dtype=torch.float64), "f16")}
    scores = quantized_scores(params, inputs)
    # key 0: 20900 - 5 = 20895 -> f16 20896 (spacing 16) -> / 16 = 1306 -> + 0.001 -> 1306 (spacing 1)
    # key 1: 200 - 300 + 120 - 5 = 15 -> 15 / 16 = 0.9375 -> + 0.5 = 1.4375
    assert scores.chain.flatten().tolist() == [1306.0, 1.4375]
    assert not scores.overflow.any()


# -- torch's default kernel passes -----------------------------------------------------------------------
@pytest.mark.parametrize("extra, layout", [
    ({}, "bhsd"), ({"score_scale": True, "score_bias": True}, "bhsd-kt"),
    ({"causal": True, "return_lse": True}, "bshd"),
    ({"batch": 2, "heads_q": 4, "heads_kv": 2, "kv_lengths": [40, 17], "score_bias": True}, "bhsd-qt-vt"),
    ({"seq_q": 7, "seq_k": 130, "prefix_offset": [3], "causal": True, "return_lse": True, "score_scale": True}, "bhsd"),
])
@pytest.mark.parametrize("params", [BASE, SCALED], ids=["rocmlir-data", "scaled"])
def test_torchs_default_kernel_passes(params, extra, layout):
    result = run(problem({**params, **extra}, layout=layout), bound=BoundModel())
    assert result.out.dtype == torch.float16
    assert passes(result), {name: str(verdict) for name, (_, verdict) in verdicts(result).items()}


@pytest.mark.parametrize("name", ["like_rocmlir", "fma_scale_bias"])
def test_kernels_that_round_the_chain_differently_pass(name):
    for params in (SCALED, BASE):
        result = run(problem({**params, "score_scale": True, "score_bias": True}), impl=impl(name), bound=BoundModel())
        assert passes(result), str(verdicts(result)["o"][1])


# -- wrong kernels fail ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["quant_scale_twice", "quant_scale_missing", "bias_missing"])
def test_wrong_kernels_fail(name):
    result = run(problem({**SCALED, "score_scale": True, "score_bias": True}), impl=impl(name), bound=BoundModel())
    comparison, verdict = verdicts(result)["o"]
    assert not verdict.passed and comparison.overflow == 0


def test_a_softmax_in_f16_fails_where_rocmlir_keeps_f32():
    """exp's argument, exp, the running row sum and the division in f16: the row sum of a long row drifts. (On
    short rows the f16 steps stay within what P's own rounding to f16, which the contract has, allows.)"""
    params = {**BASE, "seq_q": 8, "seq_k": 1024, "quant_scale": 2.0 ** -8}
    assert passes(run(problem(params), impl=impl("like_rocmlir"), bound=BoundModel()))
    assert not passes(run(problem(params), impl=impl("softmax_in_f16"), bound=BoundModel()))


def test_a_missing_zero_point_fails_where_the_score_scale_makes_it_matter():
    params = {**SCALED, "quant_bias": 4}
    # without a score scale the zero point shifts a whole row's scores alike: softmax cannot see it
    assert passes(run(problem(params), impl=impl("zero_point_missing"), bound=BoundModel()))
    assert not passes(run(problem({**params, "score_scale": True}), impl=impl("zero_point_missing"), bound=BoundModel()))


def test_an_i16_accumulator_wraps_and_fails():
    # Q·Kᵀ of 6 products of 60..100 lies in 21600..60000: beyond i16, inside f16
    params = {**BASE, "head_dim_qk": 6, "quant_bias": 0, "quant_scale": 2.0 ** -12}
    assert passes(run(problem(params, input_range=(60.0, 100.0)), bound=BoundModel()))
    result = run(problem(params, input_range=(60.0, 100.0)), impl=impl("i16_accumulator"), bound=BoundModel())
    comparison, verdict = verdicts(result)["o"]
    assert not verdict.passed and comparison.overflow == 0


# -- overflow is reported, never wrapped silently ------------------------------------------------------
def test_scores_beyond_i32_are_reported_as_overflow():
    # 140000 products of 127·127: Q·Kᵀ = 2.26e9 > 2^31 - 1, where the default kernel's i32 wraps
    params = {"seq_q": 1, "seq_k": 2, "head_dim_qk": 140_000, "head_dim_v": 4, "quantized": True, "quant_bias": 0,
              "quant_scale": 2.0 ** -24}
    case = problem(params, input_range=(126.0, 127.0))  # Q·Kᵀ >= 126² · 140000 = 2.22e9
    result = run(case, bound=BoundModel())
    comparison, verdict = verdicts(result)["o"]
    assert bool((result.ref == OVERFLOWED).all())
    assert comparison.overflow == 4 and not verdict.passed
    assert "overflow" in verdict.summary and "narrow the input range" in str(verdict)


def test_f16_score_overflow_is_reported_row_by_row():
    # 8 products of 100..127: Q·Kᵀ from 80000, beyond f16's 65504 once converted, as rocMLIR converts it
    params = {**BASE, "seq_q": 3, "head_dim_qk": 8, "quant_bias": 0, "quant_scale": 2.0 ** -10}
    result = run(problem(params, input_range=(100.0, 127.0)), bound=BoundModel())
    comparison, verdict = verdicts(result)["o"]
    assert comparison.overflow == 3 * 8 and not verdict.passed
    assert passes(run(problem({**params, "head_dim_qk": 2}, input_range=(100.0, 127.0)), bound=BoundModel()))


# -- fp8 Q, K, V ----------------------------------------------------------------------------------------
FP8 = {"seq_q": 24, "seq_k": 40, "head_dim_qk": 32}


@pytest.mark.parametrize("dtype", ["f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz"])
@pytest.mark.parametrize("extra", [{}, {"causal": True, "score_scale": True, "score_bias": True, "return_lse": True}])
def test_fp8_attention_passes_with_torchs_widened_kernel(dtype, extra):
    case = problem({**FP8, **extra}, dtype=dtype, input_range=(-2.0, 2.0), data="uniform")
    assert input_formats(case)["v"] == dtype and input_formats(case).get("score_bias", "f32") == "f32"
    result = run(case, bound=BoundModel())
    assert result.out.dtype == torch.float32 and "probes could not run" in result.arithmetic.origin
    assert passes(result)


def test_an_fp8_kernel_that_misreads_k_fails():
    """The bound assumes P rounded to the input format before P·V (what fp8 flash attention does; the probes
    cannot run in fp8), so it is as loose as e4m3's u = 2^-4 there: it catches gross errors such as this."""
    case = problem(FP8, dtype="f8e4m3fn", input_range=(-2.0, 2.0), data="uniform")
    assert not passes(run(case, impl=impl("fp8_k_read_as_e5m2"), bound=BoundModel()))
