"""Attention's alternate and planted-bug kernels (runner/ops/attention/variants.py) under the default verdict: every correct kernel
passes (under its probed arithmetic, as a generated test runs it, and under the assumed one), every wrong kernel
fails where its bug shows (the bound alone: a mutant's own arithmetic must not excuse it; the f16 accumulator is
also caught by [require] acc = "f32"); their algorithms are exact in float64; the evidence study's shared
evaluation is run()'s, and its peer rules behave as their sources say.

Small shapes, fixed seeds: deterministic, so these are plain assertions.
"""
from __future__ import annotations

import math

import pytest
import torch

from e2egen import metrics
from e2egen.runner import BoundModel, make_problem, run
from e2egen.runner.arithmetic.requirements import violations
from e2egen.runner.arithmetic.lookup import probe_problem
from e2egen.runner.inputs import generate_inputs
from e2egen.runner.kernels import case_kernel
from e2egen.runner.options import Requirements
from e2egen.runner.ops.attention import variants as kernels
from e2egen.runner.ops.attention.attention_math import allowed_keys, attention_float64, expand_kv, scores_float64
from e2egen.runner.ops.attention.probes import LONG_ROW, long_row_problem, probe_attention
from e2egen.studies import attention_evidence as study

DEFAULT = {"bound_ratio": 1.0, "bound_rms": 0.5, "bias_z": 6.0}
IMPL = "e2egen.runner.ops.attention.variants:"

# (dtype, layout, params, seed): masks, GQA, lse, offset scores, peaky scores, score scale/bias, cross attention
PASSING = {
    "causal-gqa-lse": ("f16", "bhsd", {"seq_q": 40, "seq_k": 72, "head_dim_qk": 32, "heads_q": 4, "heads_kv": 2,
                                       "causal": True, "return_lse": True}, 3),
    "window-kv-bf16": ("bf16", "bshd-kt", {"seq_q": 24, "seq_k": 150, "head_dim_qk": 48, "batch": 3,
                                           "kv_lengths": [150, 70, 0], "window": [20, 4], "align": "bottom-right",
                                           "return_lse": True}, 5),
    "offset-lse": ("f16", "bhsd-qt", {"seq_q": 16, "seq_k": 96, "head_dim_qk": 64, "score_offset": 1000.0,
                                      "return_lse": True}, 7),
    "peaky": ("f16", "bshd", {"seq_q": 32, "seq_k": 160, "head_dim_qk": 64, "q_gain": 8.0}, 9),
    "cross-scale-bias": ("bf16", "bhsd-vt", {"seq_q": 20, "seq_k": 45, "head_dim_qk": 40, "head_dim_v": 24,
                                             "score_scale": True, "score_bias": True, "causal": True,
                                             "prefix_offset": 10, "return_lse": True}, 11),
}

# (wrong kernel, dtype, layout, params, seed): a case where the bug shows and the default verdict catches it
FAILING = [
    ("no_max_subtraction", "f16", "bhsd", {"seq_q": 16, "seq_k": 48, "head_dim_qk": 32, "score_offset": 1000.0}, 1),
    ("no_max_subtraction", "bf16", "bhsd", {"seq_q": 16, "seq_k": 48, "head_dim_qk": 32, "score_offset": 1000.0}, 1),
    ("mask_off_by_one", "bf16", "bhsd", {"seq_q": 24, "seq_k": 40, "head_dim_qk": 32, "causal": True}, 2),
    ("mask_off_by_one", "f16", "bshd", {"seq_q": 24, "seq_k": 40, "head_dim_qk": 32, "causal": True,
                                        "align": "bottom-right"}, 2),
    ("mask_off_by_one", "f16", "bhsd", {"seq_q": 24, "seq_k": 40, "head_dim_qk": 32, "window": [6, 2]}, 2),
    ("wrong_gqa_mapping", "f16", "bhsd", {"seq_q": 16, "seq_k": 32, "head_dim_qk": 32, "heads_q": 4,
                                          "heads_kv": 2}, 3),
    ("scale_twice", "f16", "bhsd", {"seq_q": 16, "seq_k": 32, "head_dim_qk": 32}, 4),
    ("scale_missing", "bf16", "bhsd", {"seq_q": 16, "seq_k": 32, "head_dim_qk": 32}, 4),
    ("pv_f16_accumulation", "f32", "bhsd", {"seq_q": 16, "seq_k": 64, "head_dim_qk": 32}, 5),
    ("pv_f16_accumulation", "f16", "bhsd", {"seq_q": 64, "seq_k": 128, "head_dim_qk": 64, "q_gain": 8.0}, 7),
    ("row_sum_in_half", "f32", "bhsd", {"seq_q": 64, "seq_k": 256, "head_dim_qk": 64}, 1),  # the bound alone: 3 of 5 seeds
    ("scores_in_half", "f16", "bhsd", {"seq_q": 16, "seq_k": 48, "head_dim_qk": 32, "score_offset": 1000.0}, 6),
    ("last_kv_block_dropped", "f16", "bhsd", {"seq_q": 16, "seq_k": 100, "head_dim_qk": 32}, 6),
    ("last_kv_block_dropped", "bf16", "bhsd", {"seq_q": 16, "seq_k": 40, "head_dim_qk": 32}, 6),
    ("lse_off_by_max", "f16", "bhsd", {"seq_q": 16, "seq_k": 32, "head_dim_qk": 32, "return_lse": True}, 8),
    ("kv_cache_wrong_row", "bf16", "bhsd", {"seq_q": 8, "seq_k": 64, "head_dim_qk": 32, "batch": 3,
                                            "kv_lengths": [40, 17, 64]}, 9),
]

# (wrong kernel, params): cases its bug cannot show in (the mask, head map or lse it gets wrong is the same)
NOT_SHOWN = [
    ("mask_off_by_one", {"seq_q": 16, "seq_k": 32, "head_dim_qk": 32, "kv_lengths": 20}),
    ("wrong_gqa_mapping", {"seq_q": 16, "seq_k": 32, "head_dim_qk": 32, "heads_q": 4, "heads_kv": 1}),
    ("wrong_gqa_mapping", {"seq_q": 16, "seq_k": 32, "head_dim_qk": 32, "heads_q": 3}),
    ("last_kv_block_dropped", {"seq_q": 16, "seq_k": 64, "head_dim_qk": 32, "causal": True}),
    ("lse_off_by_max", {"seq_q": 16, "seq_k": 32, "head_dim_qk": 32}),
    ("kv_cache_wrong_row", {"seq_q": 8, "seq_k": 64, "head_dim_qk": 32, "batch": 2, "kv_lengths": [30, 30]}),
]


REQUIRE = Requirements(acc="f32")  # configs.toml [require]


def execute(kernel: str, dtype: str, layout: str, params: dict, seed: int, measure: bool):
    """(each output's verdict, the requirements the probed arithmetic breaks) as generator/execute.py judges a
    case (measure=True), or the verdict under the assumed arithmetic (measure=False, nothing probed)."""
    problem = make_problem("attention", "fwd", dtype, layout, params, (-1.0, 1.0), seed)
    result = run(problem, impl=None if kernel == "torch" else IMPL + kernel, device="cpu", bound=BoundModel(),
                 measure=measure)
    rounding = result.arithmetic.arithmetic.rounding if result.arithmetic else "nearest-even"
    verdicts = {name: metrics.compare(o.ref, o.out, dtype=o.dtype, bound=o.bound, rounding=rounding).check(DEFAULT)
                for name, o in result.outputs.items()}
    broken = violations(REQUIRE, result.arithmetic.arithmetic, dtype) if measure else []
    return verdicts, broken


def verdicts(kernel: str, dtype: str, layout: str, params: dict, seed: int) -> dict[str, object]:
    return execute(kernel, dtype, layout, params, seed, measure=False)[0]


@pytest.mark.parametrize("measure", [True, False], ids=["probed", "assumed"])
@pytest.mark.parametrize("case", list(PASSING))
@pytest.mark.parametrize("kernel", ["torch", *kernels.CORRECT])
def test_correct_kernel_passes_the_default_verdict(kernel, case, measure):
    results, broken = execute(kernel, *PASSING[case], measure=measure)
    for name, verdict in results.items():
        assert verdict.passed, f"{kernel} on {case}, {name}: {verdict.summary}"
    assert not broken, [v.message for v in broken]


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_a_half_precision_accumulator_breaks_the_accumulator_requirement(dtype):
    """Where the bound alone lets pv_f16_accumulation through (short rows, rounding errors near P's own), the
    probes find its accumulator and [require] acc = "f32" fails the case."""
    _, broken = execute("pv_f16_accumulation", dtype, "bhsd", {"seq_q": 16, "seq_k": 40, "head_dim_qk": 32}, 3,
                        measure=True)
    assert [v.key for v in broken] == ["acc"]


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_a_row_sum_kept_in_half_precision_breaks_the_accumulator_requirement(dtype):
    """The running l stored in f16 (bf16) after every block of 64 keys: the bound alone passes it in f16 and bf16;
    the row-sum probe, through the lse, finds it and [require] acc = "f32" fails the case."""
    params = {"seq_q": 16, "seq_k": 256, "head_dim_qk": 32, "return_lse": True}
    _, broken = execute("row_sum_in_half", dtype, "bhsd", params, 3, measure=True)
    assert [v.key for v in broken] == ["acc"]
    problem = make_problem("attention", "fwd", dtype, "bhsd", params, (-1.0, 1.0), 3)
    found = run(problem, impl=IMPL + "row_sum_in_half", device="cpu", bound=BoundModel()).arithmetic.arithmetic
    assert found.acc_bits == (8 if dtype == "bf16" else 11)
    assert any(note.startswith("row sum: 1 + 255·2^-20 came back 1") for note in found.notes)
    _, kept = execute("flash_b64", dtype, "bhsd", params, 3, measure=True)
    assert not kept


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_a_row_sum_rounded_between_tiles_breaks_the_accumulator_requirement_without_lse(dtype):
    """Without lse a row of 64 keys cannot show l rounded once per block (one rounding, within o's own); the
    long-row probe (8,192 keys, weights below half an ulp of l per tile of 256) finds it in every dtype, and the
    correct flash kernels and torch's, summing l in f32, keep acc_bits 24."""
    params = {"seq_q": 16, "seq_k": 64, "head_dim_qk": 32}
    _, broken = execute("row_sum_in_half", dtype, "bhsd", params, 3, measure=True)
    assert [v.key for v in broken] == ["acc"]
    problem = probe_problem(make_problem("attention", "fwd", dtype, "bhsd", params, (-1.0, 1.0), 3))
    found = probe_attention(problem, kernels.row_sum_in_half, torch.device("cpu"), "row_sum_in_half")
    assert found.acc_bits == (8 if dtype == "bf16" else 11)
    assert any(note.startswith("row sum over 8192 keys: 2 + 8190·2^-") and note.endswith("between tiles of keys")
               for note in found.notes), found.notes
    for name in ("flash_b16", "flash_b128", "split_kv4", "p_rounded"):
        assert probe_attention(problem, getattr(kernels, name), torch.device("cpu"), name).acc_bits == 24, name
    assert probe_attention(problem, case_kernel(problem), torch.device("cpu"), "torch").acc_bits == 24


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_scores_rounded_to_the_input_format_break_the_compute_requirement(dtype):
    """S rounded to f16 (bf16) before the softmax, as ONNX Runtime's f16 Attention does: on [-1, 1] data the bound
    passes it; the scores' format probe (scores near 4,000, where an f16 score's ulp is 2) finds it, and the
    default require.compute = "f32" fails the case, named; the correct kernels and torch's keep f32 scores."""
    params = {"seq_q": 16, "seq_k": 64, "head_dim_qk": 64}
    _, broken = execute("scores_in_half", dtype, "bhsd", params, 3, measure=True)
    assert [v.key for v in broken] == ["compute"] and f"computes its math in {dtype}" in broken[0].message
    problem = probe_problem(make_problem("attention", "fwd", dtype, "bhsd", params, (-1.0, 1.0), 3))
    found = probe_attention(problem, kernels.scores_in_half, torch.device("cpu"), "scores_in_half")
    assert found.compute == dtype
    assert any(note.startswith(f"the scores are rounded to {dtype} before the softmax") for note in found.notes)
    for name, kernel in [("torch", case_kernel(problem)), *kernels.CORRECT.items()]:
        assert probe_attention(problem, kernel, torch.device("cpu"), name).compute == "", name


def _short_rows_only(q, k, v, **options):
    """row_sum_in_half for up to 1,024 keys; longer rows declined as a kernel of fixed tiles would."""
    if k.shape[-2] > 1024:
        raise NotImplementedError("seq_k > 1024 is not supported")
    return kernels.row_sum_in_half(q, k, v, **options)


def test_a_kernel_declining_long_rows_keeps_the_short_rows_reading():
    problem = probe_problem(make_problem("attention", "fwd", "f16", "bhsd", {"seq_q": 16, "seq_k": 64,
                                                                          "head_dim_qk": 32}, (-1.0, 1.0), 3))
    found = probe_attention(problem, _short_rows_only, torch.device("cpu"), "short rows only")
    assert found.acc_bits == 24
    assert any(note.startswith("row sum over 8192 keys not probed:") and "not supported" in note
               for note in found.notes), found.notes


def test_the_long_row_problem_keeps_the_case_s_heads_and_options_and_drops_its_masks():
    problem = make_problem("attention", "fwd", "bf16", "bshd-kt", {"seq_q": 300, "seq_k": 150, "head_dim_qk": 48,
                                                                   "head_dim_v": 24, "batch": 3, "heads_q": 4,
                                                                   "heads_kv": 2, "kv_lengths": [150, 70, 0],
                                                                   "window": [20, 4], "causal": True, "scale": 0.5,
                                                                   "score_bias": True}, (-1.0, 1.0), 5)
    long = long_row_problem(problem).params
    assert (long.batch, long.seq_q, long.seq_k) == (1, 16, LONG_ROW)
    assert (long.heads_q, long.heads_kv, long.head_dim_qk, long.head_dim_v, long.scale, long.score_bias) == \
        (4, 2, 48, 24, 0.5, True)
    assert allowed_keys(long, torch.device("cpu")) is None
    assert long_row_problem(problem).layout == "bshd-kt"


@pytest.mark.parametrize("kernel, dtype, layout, params, seed", FAILING,
                         ids=[f"{k}-{d}-{i}" for i, (k, d, *_) in enumerate(FAILING)])
def test_wrong_kernel_fails_where_its_bug_shows(kernel, dtype, layout, params, seed):
    problem = make_problem("attention", "fwd", dtype, layout, params, (-1.0, 1.0), seed)
    inputs64 = {name: t.double() for name, t in generate_inputs(problem).items()}
    assert kernels.WRONG[kernel].shows(problem, inputs64)
    results = verdicts(kernel, dtype, layout, params, seed)
    assert not all(v.passed for v in results.values()), f"{kernel} passed: {[v.summary for v in results.values()]}"


def test_every_wrong_kernel_has_a_failing_case():
    assert {kernel for kernel, *_ in FAILING} == set(kernels.WRONG)


@pytest.mark.parametrize("kernel, params", NOT_SHOWN, ids=[k for k, _ in NOT_SHOWN])
def test_a_bug_the_case_cannot_show_leaves_the_output_unchanged(kernel, params):
    problem = make_problem("attention", "fwd", "f16", "bhsd", {**params, "return_lse": True}
                           if kernel != "lse_off_by_max" else params, (-1.0, 1.0), 5)
    inputs = generate_inputs(problem)
    assert not kernels.WRONG[kernel].shows(problem, {name: t.double() for name, t in inputs.items()})
    call = problem.numerics.call
    wrong = call(kernels.WRONG[kernel].kernel, "fwd", problem.params, inputs)
    right = call(kernels.flash_b64, "fwd", problem.params, inputs)
    for got, expected in zip(wrong if isinstance(wrong, tuple) else (wrong,),
                             right if isinstance(right, tuple) else (right,)):
        assert torch.equal(got, expected)


def test_the_algorithms_are_exact_in_float64():
    """Blocked online softmax, split-KV with the LSE merge and the one-pass kernel, with float64 arithmetic and
    no rounding of P, give the reference: masks, fully masked rows (o = 0, lse = -inf) and GQA included."""
    params = {"seq_q": 20, "seq_k": 150, "head_dim_qk": 24, "head_dim_v": 16, "batch": 3, "heads_q": 4,
              "heads_kv": 2, "kv_lengths": [150, 90, 0], "causal": True, "align": "bottom-right",
              "window": [70, 10], "return_lse": True}
    problem = make_problem("attention", "fwd", "f32", "bhsd", params, (-1.0, 1.0), 13)
    p = problem.params
    inputs64 = {name: t.double() for name, t in generate_inputs(problem).items()}
    exact = attention_float64(p, inputs64)
    s = scores_float64(p, inputs64).masked_fill(~allowed_keys(p, torch.device("cpu")), -math.inf)
    v = expand_kv(inputs64["v"], p.group)
    assert torch.isneginf(exact.lse).any()  # the case has fully masked rows
    runs = {f"flash_b{b}": kernels.normalise(*kernels.flash(s, v, torch.float64, b)) for b in (1, 16, 64, 128, 256)}
    runs.update({f"split_kv{n}": kernels.split_kv(s, v, torch.float64, n, block=32) for n in (2, 3, 4)})
    runs["one_pass"] = kernels.one_pass(s, v, torch.float64)
    for name, (o, lse) in runs.items():
        torch.testing.assert_close(o, exact.o, rtol=1e-12, atol=1e-14, msg=name)
        torch.testing.assert_close(lse, exact.lse, rtol=1e-12, atol=1e-14, msg=name)


def test_the_study_evaluates_a_case_as_run_does():
    """The evidence study draws each case's inputs, reference and bound once (prepare) and calls every kernel on
    them: the same numbers as runner.run gives for each kernel."""
    problem = make_problem("attention", "fwd", "bf16", "bshd-qt", PASSING["cross-scale-bias"][2], (-1.0, 1.0), 11)
    case = study.prepare(problem, BoundModel())
    result = run(problem, impl=IMPL + "split_kv4", device="cpu", bound=BoundModel())
    outs = study.kernel_outputs(case, "split_kv4", kernels.split_kv4)
    for name, o in result.outputs.items():
        assert torch.equal(o.ref, case.refs[name])
        assert torch.equal(o.bound, case.bounds[name])
        assert torch.equal(o.out, outs[name])


def test_one_study_case_judges_every_kernel():
    records = study.run_case("kv_lengths", "tiny", {"seq_q": 16, "seq_k": 200, "head_dim_qk": 32, "batch": 2,
                                                    "heads_q": 4, "heads_kv": 2, "kv_lengths": [200, 90],
                                                    "return_lse": True}, "f16", "bhsd", 0, 21, BoundModel())
    by_kernel = {r.kernel: r for r in records}
    assert set(by_kernel) == {"torch", *kernels.CORRECT, *kernels.WRONG}
    for name in ("torch", *kernels.CORRECT):
        record = by_kernel[name]
        assert record.judged and not record.fails["composed bound"] and not record.fails["bound alone"], record.detail
    assert not by_kernel["mask_off_by_one"].judged and not by_kernel["no_max_subtraction"].judged
    for name in ("wrong_gqa_mapping", "scale_twice", "lse_off_by_max", "kv_cache_wrong_row", "last_kv_block_dropped"):
        assert by_kernel[name].judged and by_kernel[name].fails["composed bound"], name


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_the_probes_find_a_normalised_p_in_the_dtype_on_few_query_rows(dtype):
    """Decode shapes (2-3 query rows): the study found a normalised P taken for bf16 in an f16 case (require.inputs
    broken) and for f16 in a bf16 case (a bound too small, bound_ratio up to 2)."""
    params = {"seq_q": 3, "seq_k": 300, "head_dim_qk": 32, "batch": 2, "heads_q": 4, "heads_kv": 2,
              "kv_lengths": [17, 290], "causal": True, "align": "bottom-right", "return_lse": True}
    for kernel in ("p_rounded", "torch"):
        results, broken = execute(kernel, dtype, "bhsd-qt", params, 3, measure=True)
        assert not broken, [v.message for v in broken]
        assert all(v.passed for v in results.values()), [v.summary for v in results.values()]
    _, broken = execute("p_rounded", dtype, "bhsd", {"seq_q": 2, "seq_k": 300, "head_dim_qk": 32}, 3, measure=True)
    assert not broken, [v.message for v in broken]


def test_peer_rules():
    ref = torch.linspace(0.25, 1, 101, dtype=torch.float64)  # away from 0: get_rtol divides by the reference
    exact = ref.to(torch.float16)
    pt = (ref * (1 + 2 ** -9)).to(torch.float16)  # the same-precision path, a few ulps off
    # FlashAttention: within 2x the same-precision error (+ fwd_atol); PyTorch: within 4x (atol and rtol)
    assert not study.flash_attention_rule(exact, ref, pt, "f16")
    assert study.flash_attention_rule((ref * 1.01).to(torch.float16), ref, pt, "f16")
    assert not study.pytorch_rule(exact, ref, pt, "f16")
    assert study.pytorch_rule((ref * 1.05).to(torch.float16), ref, pt, "f16")
    # rocMLIR: the f16 catalogue's absDiff 0.02 and RMS 0.015; relDiff is off for an f16 output
    assert study.rocmlir_rule(exact, ref, "f16", "f16") == ()
    assert study.rocmlir_rule((ref + 0.03).to(torch.float16), ref, "f16", "f16") == ("RMS", "absDiff")
    # PyTorch's rtol comes from the largest relative deviation: one tiny reference the same-precision path
    # flushes to 0 makes it 4 (every |out - ref| <= 4·|ref| passes)
    tiny = torch.cat([ref, torch.tensor([1e-9], dtype=torch.float64)])
    assert not study.pytorch_rule((tiny * 1.05).to(torch.float16), tiny, (tiny * (1 + 2 ** -9)).to(torch.float16), "f16")
    nan = exact.clone()
    nan[3] = math.nan
    assert "RMS" in study.rocmlir_rule(nan, ref, "f16", "f16")
    # an f32 lse: the same -inf on both sides is exact, relDiff applies
    lse = torch.tensor([-math.inf, 0.1, 0.2], dtype=torch.float64)
    assert study.rocmlir_rule(lse.float(), lse, "f16", "f32") == ()
    assert study.rocmlir_rule((lse * 1.05).float(), lse, "f16", "f32") == ("relDiff",)  # |d| 0.01, |d|/|val| 0.05
