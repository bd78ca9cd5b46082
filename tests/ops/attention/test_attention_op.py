"""The attention op: its float64 reference against an independent loop implementation (every mask feature),
its mask against the definitions, fully masked rows, layouts, GQA, parameter validation, input kinds and
the kernel contract."""
from __future__ import annotations

import importlib
import math
import sys
from dataclasses import replace

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import catalogue_text, line_number, problems_of, run_cli
from e2egen import metrics
from e2egen.generator.loader import parse_catalogue
from e2egen.runner import OPS, KernelFailure, ProblemError, make_problem, run
from e2egen.runner.bound import BoundModel
from e2egen.runner.inputs import generate_inputs
from e2egen.runner.ops.attention.spec import transposed_tensors
from e2egen.runner.ops.attention.attention_math import allowed_keys, attention_float64
from e2egen.runner.ops.attention.params import ALIGNMENTS
from e2egen.runner.ops.attention.kernels import torch_attention

# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = pytest.mark.cpu_paths


def _sibling(name):
    package = __name__.rpartition(".")[0]  # tests/ may or may not be a package
    return importlib.import_module(f"{package}.{name}" if package else name)


naive = _sibling("runner_naive")
HERE = __name__  # kernels below are named "<this module>:<function>" for run(impl=...)
SPEC = OPS["attention"]
CPU = torch.device("cpu")
STRICT = {"bound_ratio": 1.0, "bound_rms": 0.5, "bias_z": 6.0}
QUICK = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def problem(params, dtype="f32", layout="bhsd", seed=3, input_range=(-1.0, 1.0)):
    return make_problem("attention", "fwd", dtype, layout, params, input_range, seed)


def inputs64(prob):
    return {name: t.double() for name, t in generate_inputs(prob).items()}


def assert_same(got, expected, tol=1e-12):
    """Equal to `tol`, with -inf exactly where expected has it; no NaN anywhere."""
    assert got.shape == expected.shape
    assert not torch.isnan(got).any() and not torch.isnan(expected).any()
    assert torch.equal(torch.isneginf(got), torch.isneginf(expected))
    finite = torch.isfinite(expected)
    assert torch.isfinite(got[finite]).all()
    assert ((got[finite] - expected[finite]).abs() <= tol).all(), (got - expected).abs()[finite].max()


def naive_counts(p):
    """Allowed keys per (batch, query row), from runner_naive's mask."""
    return [[sum(naive.attention_allowed(p, b, i, j) for j in range(p.seq_k)) for i in range(p.seq_q)]
            for b in range(p.batch)]


def verdicts(result, tolerances):
    return {name: metrics.compare(o.ref, o.out, dtype=o.dtype, bound=o.bound).check(tolerances)
            for name, o in result.outputs.items()}


# -- 1. the reference against the loop implementation, feature by feature -------------------------------------
# Each case: params and, where a mask is on, the allowed-key count of every (batch, query row), by hand from
# the definitions in runner/ops/attention/params.py.
D = {"head_dim_qk": 4}
MASK_CASES = {
    "no-mask": ({"seq_q": 4, "seq_k": 7, **D}, None),
    "causal-top-left-sq<sk": ({"seq_q": 3, "seq_k": 7, "causal": True, **D}, [[1, 2, 3]]),
    "causal-bottom-right-sq<sk": ({"seq_q": 3, "seq_k": 7, "causal": True, "align": "bottom-right", **D}, [[5, 6, 7]]),
    "causal-top-left-sq>sk": ({"seq_q": 5, "seq_k": 3, "causal": True, **D}, [[1, 2, 3, 3, 3]]),
    # the alignment puts query 0 two keys before key 0: queries 0 and 1 see nothing
    "causal-bottom-right-sq>sk": ({"seq_q": 5, "seq_k": 3, "causal": True, "align": "bottom-right", **D},
                                  [[0, 0, 1, 2, 3]]),
    "window-2-1": ({"seq_q": 5, "seq_k": 5, "window": [2, 1], **D}, [[2, 3, 4, 4, 3]]),
    "window-unbounded-left-0": ({"seq_q": 4, "seq_k": 6, "window": [-1, 0], "align": "bottom-right", **D},
                                [[3, 4, 5, 6]]),
    "window-1-unbounded-right": ({"seq_q": 4, "seq_k": 6, "window": [1, -1], **D}, [[6, 6, 5, 4]]),
    "window-0-0": ({"seq_q": 4, "seq_k": 4, "window": [0, 0], **D}, [[1, 1, 1, 1]]),
    "window-both-unbounded": ({"seq_q": 3, "seq_k": 4, "window": [-1, -1], **D}, None),
    "causal-window-bottom-right": ({"seq_q": 3, "seq_k": 6, "causal": True, "window": [2, -1], "align": "bottom-right", **D},
                                   [[3, 3, 3]]),
    "kv-lengths-with-empty-batch": ({"batch": 3, "seq_q": 2, "seq_k": 7, "kv_lengths": [7, 3, 0], **D},
                                    [[7, 7], [3, 3], [0, 0]]),
    "kv-lengths-one-for-all": ({"batch": 2, "seq_q": 2, "seq_k": 7, "kv_lengths": 5, **D}, [[5, 5], [5, 5]]),
    "kv-lengths-causal-bottom-right": ({"batch": 2, "seq_q": 3, "seq_k": 6, "kv_lengths": [6, 2], "causal": True,
                                        "align": "bottom-right", **D}, [[4, 5, 6], [2, 2, 2]]),
    "prefix-offset-causal": ({"batch": 3, "seq_q": 4, "seq_k": 9, "causal": True, "prefix_offset": [0, 2, 5], **D},
                             [[1, 2, 3, 4], [3, 4, 5, 6], [6, 7, 8, 9]]),
    "prefix-offset-window": ({"batch": 2, "seq_q": 3, "seq_k": 8, "window": [1, 1], "prefix_offset": [0, 3], **D},
                             [[2, 3, 3], [3, 3, 3]]),
    "prefix-offset-bottom-right": ({"seq_q": 3, "seq_k": 6, "causal": True, "align": "bottom-right",
                                    "prefix_offset": 1, **D}, [[5, 6, 6]]),
    "prefix-offset-alone-masks-nothing": ({"batch": 2, "seq_q": 3, "seq_k": 5, "prefix_offset": [1, 2], **D}, None),
    "gqa-6-over-2": ({"heads_q": 6, "heads_kv": 2, "seq_q": 4, "seq_k": 5, **D}, None),
    "gqa-causal": ({"batch": 2, "heads_q": 6, "heads_kv": 2, "seq_q": 4, "seq_k": 5, "causal": True, **D},
                   [[1, 2, 3, 4]] * 2),
    "mqa": ({"heads_q": 4, "heads_kv": 1, "seq_q": 3, "seq_k": 6, **D}, None),
    "scale": ({"seq_q": 3, "seq_k": 5, "scale": 1.7, **D}, None),
    "negative-scale": ({"seq_q": 3, "seq_k": 5, "scale": -0.6, **D}, None),
    "score-scale": ({"heads_q": 2, "seq_q": 3, "seq_k": 5, "score_scale": True, **D}, None),
    "score-bias": ({"heads_q": 2, "seq_q": 3, "seq_k": 5, "score_bias": True, **D}, None),
    "score-scale-and-bias-causal": ({"heads_q": 2, "seq_q": 3, "seq_k": 5, "score_scale": True, "score_bias": True,
                                     "causal": True, **D}, [[1, 2, 3]]),
    "head-dim-v-differs": ({"seq_q": 3, "seq_k": 5, "head_dim_qk": 6, "head_dim_v": 2}, None),
    "everything": ({"batch": 3, "heads_q": 6, "heads_kv": 2, "seq_q": 5, "seq_k": 7, "head_dim_qk": 5, "head_dim_v": 3,
                    "scale": 0.4, "score_scale": True, "score_bias": True, "causal": True, "align": "bottom-right",
                    "window": [2, -1], "kv_lengths": [7, 4, 0], "prefix_offset": [0, 1, 0]},
                   [[3, 3, 3, 3, 3], [3, 2, 1, 0, 0], [0] * 5]),
}


@pytest.mark.parametrize("name", MASK_CASES)
def test_reference_matches_the_loop_implementation(name):
    params, counts = MASK_CASES[name]
    prob = problem({**params, "return_lse": True}, input_range=(-2.0, 3.0), seed=11)
    p = prob.params
    result = run(prob)
    o, lse = naive.attention(p, inputs64(prob))
    assert result.outputs["o"].ref.dtype == torch.float64 and result.outputs["lse"].ref.shape == p.lse_shape
    assert_same(result.outputs["o"].ref, o)
    assert_same(result.outputs["lse"].ref, lse)
    allowed = allowed_keys(p, CPU)
    if counts is None:
        assert allowed is None and torch.isfinite(lse).all()
        return
    assert naive_counts(p) == counts
    assert allowed.shape == (p.batch, 1, p.seq_q, p.seq_k) and allowed.sum(-1)[:, 0].tolist() == counts
    empty = torch.tensor(counts).eq(0)[:, None, :].expand(p.lse_shape)  # fully masked rows
    assert torch.isneginf(lse[empty]).all() and torch.isfinite(lse[~empty]).all()
    assert (result.outputs["o"].ref[empty] == 0).all()


# The masks' matrix and the property run under the assumed arithmetic (measure=False): probing every geometry
# would take most of this file's time. test_torch_kernel_is_within_the_measured_bound runs the probes.
@pytest.mark.parametrize("return_lse", [True, False], ids=["lse", "o-only"])  # o-only: torch's SDPA path
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("name", MASK_CASES)
def test_torch_kernel_is_within_the_bound(name, dtype, return_lse):
    params, _ = MASK_CASES[name]
    result = run(problem({**params, "return_lse": return_lse}, dtype=dtype, seed=2), bound=BoundModel(), measure=False)
    for output, verdict in verdicts(result, {"bound_ratio": 1.0}).items():
        assert verdict.passed, f"{output}: {verdict}"


@pytest.mark.parametrize("name, return_lse, dtype", [
    (name, return_lse, dtype)
    for name in ("no-mask", "causal-top-left-sq<sk", "everything") for dtype in ("f32", "f16", "bf16")
    for return_lse in (True, False)])
def test_torch_kernel_is_within_the_measured_bound(name, return_lse, dtype):
    params, _ = MASK_CASES[name]
    result = run(problem({**params, "return_lse": return_lse}, dtype=dtype, seed=2), bound=BoundModel())
    assert result.arithmetic is not None
    for output, verdict in verdicts(result, {"bound_ratio": 1.0}).items():
        assert verdict.passed, f"{output}: {verdict}"


def test_features_change_the_result():
    """The feature cases above are not vacuous: each changes the reference against the plain problem."""
    base = {"heads_q": 2, "seq_q": 4, "seq_k": 6, "head_dim_qk": 4}

    def ref(**extra):
        prob = problem({**base, **extra}, seed=5)
        return attention_float64(prob.params, inputs64(prob))

    plain = ref()
    for extra in ({"causal": True}, {"causal": True, "align": "bottom-right"}, {"window": [1, 1]},
                  {"kv_lengths": 3}, {"causal": True, "prefix_offset": 2}, {"scale": 2.0}):
        assert (ref(**extra).o - plain.o).abs().max() > 1e-3, extra
    # The score tensors are extra inputs drawn after q, k, v: same q, k, v, different scores.
    assert (ref(score_bias=True).scores - plain.scores).abs().max() > 1e-3
    assert (ref(score_scale=True).scores - plain.scores).abs().max() > 1e-3


@st.composite
def attention_params(draw, score_tensors=True):
    batch = draw(st.integers(1, 3))
    heads_kv = draw(st.integers(1, 2))
    seq_k = draw(st.integers(1, 9))
    params = {"batch": batch, "heads_kv": heads_kv, "heads_q": heads_kv * draw(st.integers(1, 3)),
              "seq_q": draw(st.integers(1, 9)), "seq_k": seq_k, "head_dim_qk": draw(st.integers(1, 5)),
              "head_dim_v": draw(st.integers(1, 5)), "causal": draw(st.booleans()),
              "align": draw(st.sampled_from(ALIGNMENTS))}
    window = draw(st.none() | st.tuples(st.integers(-1, 4), st.integers(-1, 4)))
    if window is not None:
        params["window"] = list(window)
    kv_lengths = draw(st.none() | st.integers(0, seq_k) | st.lists(st.integers(0, seq_k), min_size=batch, max_size=batch))
    if kv_lengths is not None:
        params["kv_lengths"] = kv_lengths
    prefix = draw(st.none() | st.integers(0, 4) | st.lists(st.integers(0, 4), min_size=batch, max_size=batch))
    if prefix is not None:
        params["prefix_offset"] = prefix
    if draw(st.booleans()):
        params["scale"] = draw(st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False).filter(lambda s: s != 0))  # 0 is refused
    if score_tensors:
        params["score_scale"] = draw(st.booleans())
        params["score_bias"] = draw(st.booleans())
    return params


@QUICK
@given(attention_params(), st.integers(0, 2 ** 32))
def test_reference_matches_the_loop_implementation_property(params, seed):
    prob = problem(params, seed=seed, input_range=(-2.0, 2.0))
    x = inputs64(prob)
    rows = attention_float64(prob.params, x)
    o, lse = naive.attention(prob.params, x)
    assert_same(rows.o, o)
    assert_same(rows.lse, lse)
    assert (rows.o[torch.isneginf(lse)] == 0).all()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(attention_params(), st.sampled_from(["f32", "f16", "bf16"]), st.booleans(), st.integers(0, 2 ** 32))
def test_torch_kernel_is_within_the_bound_property(params, dtype, return_lse, seed):
    result = run(problem({**params, "return_lse": return_lse}, dtype=dtype, seed=seed), bound=BoundModel(), measure=False)
    for output, verdict in verdicts(result, {"bound_ratio": 1.0}).items():
        assert verdict.passed, f"{output}: {verdict}"
        assert not torch.isnan(result.outputs[output].out).any()


# -- 2. the mask against its definition ------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(attention_params(score_tensors=False))
def test_allowed_keys_match_the_definition(params):
    p = problem(params).params
    allowed = allowed_keys(p, CPU)
    expected = torch.tensor([[[naive.attention_allowed(p, b, i, j) for j in range(p.seq_k)] for i in range(p.seq_q)]
                             for b in range(p.batch)])
    if allowed is None:  # None: every key allowed
        assert expected.all()
        return
    assert allowed.dtype == torch.bool and allowed.shape == (p.batch, 1, p.seq_q, p.seq_k)
    assert torch.equal(allowed[:, 0], expected)


# -- 3. fully masked rows -----------------------------------------------------------------------------------------
# batch 0: bottom-right alignment with seq_q > seq_k leaves queries 0, 1 without keys; batch 1: kv_lengths 0.
FULLY_MASKED = {"batch": 2, "heads_q": 2, "seq_q": 5, "seq_k": 3, "head_dim_qk": 4, "causal": True,
                "align": "bottom-right", "kv_lengths": [3, 0]}
EMPTY_ROWS = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)[:, None, :].expand(2, 2, 5)


def test_fully_masked_rows_in_the_reference():
    prob = problem({**FULLY_MASKED, "return_lse": True})
    rows = attention_float64(prob.params, inputs64(prob))
    assert torch.equal(rows.o[EMPTY_ROWS], torch.zeros_like(rows.o[EMPTY_ROWS]))
    assert torch.isneginf(rows.lse[EMPTY_ROWS]).all() and torch.isfinite(rows.lse[~EMPTY_ROWS]).all()
    assert not torch.isnan(rows.o).any() and not torch.isnan(rows.p).any()
    assert (rows.o[~EMPTY_ROWS] != 0).all()


VARIANTS = {"lse": {"return_lse": True}, "sdpa": {}, "sdpa-bias": {"score_bias": True},
            "score-scale": {"score_scale": True}, "all": {"score_scale": True, "score_bias": True, "return_lse": True}}


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_fully_masked_rows_in_torch_kernel(variant, dtype):
    prob = problem({**FULLY_MASKED, **VARIANTS[variant]}, dtype=dtype)
    result = run(prob, bound=BoundModel())
    o = result.outputs["o"].out.cpu()  # the kernel ran on run()'s device
    assert not torch.isnan(o).any()
    assert (o[EMPTY_ROWS] == 0).all() and (result.outputs["o"].ref[EMPTY_ROWS] == 0).all()
    if prob.params.return_lse:
        lse = result.outputs["lse"].out.cpu()
        assert lse.dtype == torch.float32 and not torch.isnan(lse).any()
        assert torch.isneginf(lse[EMPTY_ROWS]).all() and torch.isfinite(lse[~EMPTY_ROWS]).all()
    else:
        assert set(result.outputs) == {"o"}
    for output in result.outputs.values():  # the bound of a fully masked row is 0: exact there
        assert (output.bound.cpu()[EMPTY_ROWS] == 0).all()


@pytest.mark.parametrize("variant, dtype", [
    (variant, dtype)
    for variant in VARIANTS for dtype in ("f32", "f16", "bf16")])
def test_fully_masked_rows_pass_the_measured_bound(variant, dtype):
    result = run(problem({**FULLY_MASKED, **VARIANTS[variant]}, dtype=dtype), bound=BoundModel())
    for output, verdict in verdicts(result, STRICT).items():
        assert verdict.passed, f"{output}: {verdict}"


# -- 4. layouts -----------------------------------------------------------------------------------------------------
LAYOUT_PARAMS = {"batch": 2, "heads_q": 4, "heads_kv": 2, "seq_q": 5, "seq_k": 7, "head_dim_qk": 3, "head_dim_v": 6,
                 "causal": True, "align": "bottom-right", "score_scale": True, "score_bias": True, "return_lse": True}
RECORDED: list[dict] = []


def recording_kernel(q, k, v, **kwargs):
    """torch's kernel, keeping what it was given."""
    RECORDED.append({"q": q, "k": k, "v": v, **kwargs})
    return torch_attention(q, k, v, **kwargs)


@pytest.fixture
def recorded():
    RECORDED.clear()
    yield RECORDED
    RECORDED.clear()


def received(prob):
    RECORDED.clear()
    run(prob, impl=f"{HERE}:recording_kernel")
    call = RECORDED[-1]  # a fast kernel is called twice (the warm call is timed); both get the same tensors
    return {name: call[name] for name in prob.input_shapes}


def is_dense(t):
    """Strides of some permutation of a contiguous tensor: no gaps, no overlap."""
    expected = 1
    for size, stride in sorted(zip(t.shape, t.stride()), key=lambda pair: pair[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def test_layouts_are_every_combination():
    assert len(SPEC.layouts) == 16 and len(set(SPEC.layouts)) == 16
    assert {layout.split("-")[0] for layout in SPEC.layouts} == {"bhsd", "bshd"}
    assert transposed_tensors("bshd-qt-kt-vt") == {"q", "k", "v"} and transposed_tensors("bhsd-kt") == {"k"}
    assert transposed_tensors("bhsd") == set()


@pytest.mark.parametrize("layout", SPEC.layouts)
def test_kernel_receives_logical_shapes_and_values(layout, recorded):
    prob = problem(LAYOUT_PARAMS, layout=layout)
    logical = generate_inputs(prob)
    assert all(torch.equal(logical[n], t) for n, t in generate_inputs(problem(LAYOUT_PARAMS)).items())
    got = received(prob)
    assert set(got) == {"q", "k", "v", "score_scale", "score_bias"}
    for name, tensor in got.items():
        assert tuple(tensor.shape) == prob.input_shapes[name], name
        assert tensor.dtype == torch.float32 and torch.equal(tensor.cpu(), logical[name]), name
        assert is_dense(tensor) and tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size(), name
        if name.startswith("score"):
            assert tensor.is_contiguous(), name  # untouched by the layout


@pytest.mark.parametrize("layout", SPEC.layouts)
def test_memory_order_is_as_documented(layout, recorded):
    prob = problem(LAYOUT_PARAMS, layout=layout)
    got = received(prob)
    base = layout.split("-")[0]
    for name in ("q", "k", "v"):
        t = got[name]
        assert t.stride(0) == t[0].numel(), name  # batch outermost
        # documented order, outermost first: bhsd / bshd, with seq and dim exchanged for a transposed tensor
        order = list("bhsd" if base == "bhsd" else "bshd")
        if name in transposed_tensors(layout):
            order = ["d" if dim == "s" else "s" if dim == "d" else dim for dim in order]
        strides = [t.stride("bhsd".index(dim)) for dim in order]
        assert strides == sorted(strides, reverse=True) and strides[-1] == 1, f"{name} {layout} {t.stride()}: {order}"


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_results_do_not_depend_on_the_layout(dtype):
    results = {layout: run(problem(LAYOUT_PARAMS, dtype=dtype, layout=layout), bound=BoundModel(), measure=False)
               for layout in SPEC.layouts}
    first = results["bhsd"]
    for layout, result in results.items():
        for name in ("o", "lse"):
            one, base = result.outputs[name], first.outputs[name]
            assert torch.equal(one.ref, base.ref) and torch.equal(one.bound, base.bound), (layout, name)
            finite = torch.isfinite(base.ref)
            out, base_out = one.out.cpu().double(), base.out.cpu().double()
            assert torch.equal(torch.isneginf(out), torch.isneginf(base_out))
            diff = (out - base_out)[finite].abs()
            assert (diff <= 2 * base.bound[finite]).all(), (layout, name, diff.max())
        for output, verdict in verdicts(result, {"bound_ratio": 1.0}).items():
            assert verdict.passed, f"{layout} {output}: {verdict}"


# -- 5. GQA semantics ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("heads_kv", [2, 1])
def test_gqa_reads_kv_head_h_over_group(heads_kv):
    params = {"batch": 2, "heads_q": 6, "heads_kv": heads_kv, "seq_q": 4, "seq_k": 5, "head_dim_qk": 3,
              "head_dim_v": 2, "causal": True, "return_lse": True}
    prob = problem(params, seed=9)
    x = inputs64(prob)
    gqa = attention_float64(prob.params, x)
    group = 6 // heads_kv
    mha = replace(prob.params, heads_kv=6)
    right = {"q": x["q"], "k": x["k"].repeat_interleave(group, dim=1), "v": x["v"].repeat_interleave(group, dim=1)}
    assert torch.equal(right["k"][:, 5], x["k"][:, 5 // group])
    expected = attention_float64(mha, right)
    assert_same(gqa.o, expected.o, tol=0.0)
    assert_same(gqa.lse, expected.lse, tol=0.0)
    assert_same(expected.o, naive.attention(mha, right)[0])
    if heads_kv > 1:  # with one kv head every mapping is the same
        wrong_heads = [h % heads_kv for h in range(6)]
        wrong = {"q": x["q"], "k": x["k"][:, wrong_heads], "v": x["v"][:, wrong_heads]}
        assert (attention_float64(mha, wrong).o - gqa.o).abs().max() > 1e-2


# -- 6. parameter validation -----------------------------------------------------------------------------------------
SMALL = {"batch": 2, "seq_q": 3, "seq_k": 4, "head_dim_qk": 4}
BAD_PARAMS = [
    ({"heads_q": 6, "heads_kv": 4}, "heads_kv", ["heads_q = 6", "multiple of heads_kv"]),
    ({"align": "center"}, "align", ["'center'", "top-left", "bottom-right"]),
    ({"window": [1]}, "window", ["[left, right]", "-1"]),
    ({"window": [-2, 3]}, "window", ["[left, right]", ">= 0", "-1"]),
    ({"window": "x"}, "window", ["[left, right]"]),
    ({"kv_lengths": [1, 2, 3]}, "kv_lengths", ["batch = 2", "got 3"]),
    ({"kv_lengths": [2, 5]}, "kv_lengths", ["seq_k = 4"]),
    ({"kv_lengths": 5}, "kv_lengths", ["seq_k = 4"]),
    ({"kv_lengths": [2, -1]}, "kv_lengths", [">= 0"]),
    ({"prefix_offset": -1}, "prefix_offset", [">= 0", "-1"]),
    ({"prefix_offset": [0, -3]}, "prefix_offset", [">= 0", "-3"]),
    ({"causal": "yes"}, "causal", ["true or false", "'yes'"]),
    ({"return_lse": 1}, "return_lse", ["true or false"]),
    ({"q_gain": 0}, "q_gain", ["positive"]),
    ({"q_gain": float("inf")}, "q_gain", ["finite"]),
    ({"score_offset": -5.0}, "score_offset", [">= 0"]),
    ({"scale": "big"}, "scale", ["finite number"]),
    ({"seqq": 3}, "seqq", ["did you mean 'seq_q'", "seq_k", "head_dim_qk", "kv_lengths", "window"]),
]


@pytest.mark.parametrize("bad, key, fragments", BAD_PARAMS, ids=[f"{k}-{i}" for i, (_, k, _) in enumerate(BAD_PARAMS)])
def test_bad_parameters_name_the_key_and_what_is_valid(bad, key, fragments):
    params = {**SMALL, **bad}
    with pytest.raises(ProblemError) as info:
        problem(params)
    error = info.value
    assert error.key == key and str(error).startswith(f"{key}: ")
    for fragment in fragments:
        assert fragment in str(error), (fragment, str(error))
    if key in ("align", "seqq"):
        assert error.choices and ("top-left" in error.choices or "seq_q" in error.choices)


def test_missing_required_parameter():
    with pytest.raises(ProblemError) as info:
        problem({"seq_q": 3, "head_dim_qk": 4})
    assert info.value.key == "seq_k" and "seq_q, seq_k, head_dim_qk" in str(info.value)


def test_zero_scale_is_rejected():
    with pytest.raises(ProblemError) as info:
        problem({**SMALL, "scale": 0.0, "score_offset": 1000.0})
    assert info.value.key == "scale" and "nonzero" in str(info.value)


ATTENTION_SUITE = """
[[suite]]
name = "att"
op = "attention"
dtypes = ["f32"]
layouts = ["bhsd", "bshd-kt"]
ranges = ["r0"]

[[suite.config]]
name = "gqa-causal"
heads_q = 4
heads_kv = 2
seq_q = 4
seq_k = 6
head_dim_qk = 8
causal = true
window = [2, -1]
kv_lengths = 5
"""


def test_attention_catalogue_loads_and_validates(write_catalogue):
    text = catalogue_text(ATTENTION_SUITE)
    [suite] = parse_catalogue(text, "configs.toml").suites
    assert suite.op == "attention"
    result = run_cli("validate", str(write_catalogue(text)))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("change, key, fragments", [
    (("causal = true", "causel = true"), "causel", ["did you mean 'causal'", "valid:", "kv_lengths", "prefix_offset",
                                                    "seq_q", "window"]),
    (("window = [2, -1]", "window = [-2, 3]"), "window", ["[left, right]", "-1"]),
    (("heads_kv = 2", "heads_kv = 3"), "heads_kv", ["multiple"]),
    (("causal = true", 'align = "center"'), "align", ["'center'", "top-left", "bottom-right"]),
    (("kv_lengths = 5", "kv_lengths = 7"), "kv_lengths", ["seq_k = 6"]),
])
def test_bad_attention_config_in_a_catalogue(write_catalogue, change, key, fragments):
    text = catalogue_text(ATTENTION_SUITE.replace(*change))
    path = write_catalogue(text)
    line = line_number(text, change[1])
    result = run_cli("validate", str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    [message] = [m for m in result.stderr.splitlines() if m.strip()]
    assert f"{path}:{line}:" in message and f"suite[0].config[0].{key}" in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert any(f"configs.toml:{line}:" in m and key in m for m in problems_of(text))


# -- 7. input kinds --------------------------------------------------------------------------------------------------
KINDS = {"batch": 2, "heads_q": 2, "seq_q": 8, "seq_k": 16, "head_dim_qk": 16}


def test_q_gain_makes_the_softmax_peaky():
    plain, peaky = problem(KINDS, seed=5), problem({**KINDS, "q_gain": 8.0}, seed=5)
    x1, x8 = generate_inputs(plain), generate_inputs(peaky)
    assert torch.equal(x8["q"], 8 * x1["q"]) and torch.equal(x8["k"], x1["k"]) and torch.equal(x8["v"], x1["v"])
    top1 = attention_float64(plain.params, inputs64(plain)).p.amax(-1)
    top8 = attention_float64(peaky.params, inputs64(peaky)).p.amax(-1)
    assert (top8 > top1).float().mean() >= 0.9
    assert top8.mean() > 3 * top1.mean() and top8.median() > 0.4 > 0.2 > top1.median()


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("scale", [None, -0.5])
def test_score_offset_shifts_every_allowed_score(dtype, scale):
    params = {**KINDS, "score_offset": 1000.0, "causal": True, "align": "bottom-right", "kv_lengths": [16, 9]}
    if scale is not None:
        params["scale"] = scale
    prob = problem(params, dtype=dtype, seed=4)
    x = inputs64(prob)
    scores = torch.matmul(x["q"], x["k"].mT) * prob.params.softmax_scale
    allowed = allowed_keys(prob.params, CPU).expand_as(scores)
    assert allowed.any(-1).all()
    assert scores[allowed].min() >= 1000 * 0.95 - 20 and scores[allowed].max() <= 1000 * 1.05 + 20
    # the common term varies between rows (its rounding is not one and the same error in every row)
    row_min = scores.masked_fill(~allowed, math.inf).amin(-1)
    assert row_min.max() - row_min.min() > 5


def no_max_subtraction_kernel(q, k, v, *, scale, causal, align, window, kv_lengths, prefix_offset, score_scale,
                              score_bias, return_lse):
    """softmax as exp(s) / Σ exp(s) in f32, without subtracting the row maximum (no masks, no score tensors)."""
    assert not causal and window is None and kv_lengths is None and score_scale is None and score_bias is None
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    weights = torch.exp(torch.matmul(q.float(), k.float().mT) * scale)
    total = weights.sum(-1, keepdim=True)
    o = (torch.matmul(weights, v.float()) / total).to(q.dtype)
    return (o, torch.log(total).squeeze(-1)) if return_lse else o


def test_kernel_without_max_subtraction_fails_offset_scores():
    params = {**KINDS, "return_lse": True}
    impl = f"{HERE}:no_max_subtraction_kernel"
    # a valid kernel on ordinary scores ...
    ordinary = run(problem(params, seed=4), impl=impl, bound=BoundModel(), measure=False)
    assert all(v.passed for v in verdicts(ordinary, {"bound_ratio": 1.0}).values())
    # ... that overflows in exp once every score is near 1000
    offset = problem({**params, "score_offset": 1000.0}, seed=4)
    broken = run(offset, impl=impl, bound=BoundModel(), measure=False)
    assert not torch.isfinite(broken.outputs["o"].out).any() and not torch.isfinite(broken.outputs["lse"].out).any()
    assert torch.isfinite(broken.outputs["o"].ref).all() and (broken.outputs["lse"].ref > 900).all()
    for output, verdict in verdicts(broken, {"bound_ratio": 1.0}).items():
        assert not verdict.passed, output
        assert {f.metric for f in verdict.failures} & {"nan_mismatch", "inf_mismatch"}, str(verdict)
    good = run(offset, bound=BoundModel())
    for output, verdict in verdicts(good, STRICT).items():
        assert verdict.passed, f"{output}: {verdict}"


# -- 8. the kernel contract ------------------------------------------------------------------------------------------
CONTRACT_KEYS = {"scale", "causal", "align", "window", "kv_lengths", "prefix_offset", "score_scale", "score_bias",
                 "return_lse"}


def test_kernel_receives_the_defaults(recorded):
    result = run(problem({"seq_q": 3, "seq_k": 5, "head_dim_qk": 16}), impl=f"{HERE}:recording_kernel")
    call = recorded[-1]  # the warm repeat (run._call_warm) gets the same arguments
    assert set(call) - {"q", "k", "v"} == CONTRACT_KEYS
    assert type(call["scale"]) is float and call["scale"] == 0.25
    assert call["causal"] is False and call["return_lse"] is False and call["align"] == "top-left"
    for key in ("window", "kv_lengths", "prefix_offset", "score_scale", "score_bias"):
        assert call[key] is None, key
    assert set(result.outputs) == {"o"}


def test_kernel_receives_every_option(recorded):
    params = {"batch": 2, "heads_q": 4, "heads_kv": 2, "seq_q": 3, "seq_k": 5, "head_dim_qk": 8, "head_dim_v": 2,
              "scale": 0.5, "causal": True, "align": "bottom-right", "window": [3, -1], "kv_lengths": [5, 2],
              "prefix_offset": 1, "score_scale": True, "score_bias": True, "return_lse": True}
    prob = problem(params, dtype="f16")
    result = run(prob, impl=f"{HERE}:recording_kernel")
    call = recorded[-1]
    assert set(call) - {"q", "k", "v"} == CONTRACT_KEYS
    assert [call[n].shape for n in "qkv"] == [(2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 2)]
    assert all(call[n].dtype == torch.float16 for n in "qkv")
    assert type(call["scale"]) is float and call["scale"] == 0.5
    assert call["causal"] is True and call["align"] == "bottom-right" and call["return_lse"] is True
    assert isinstance(call["window"], tuple) and call["window"] == (3, -1)
    for key, values in (("kv_lengths", [5, 2]), ("prefix_offset", [1, 1])):
        t = call[key]
        assert isinstance(t, torch.Tensor) and t.dtype == torch.int64 and t.device == call["q"].device and t.tolist() == values, key
    for key in ("score_scale", "score_bias"):
        t = call[key]
        assert isinstance(t, torch.Tensor) and t.dtype == torch.float16 and t.shape == (2, 4, 3, 5), key
    assert set(result.outputs) == {"o", "lse"} and result.outputs["lse"].out.dtype == torch.float32


def test_unbounded_window_reaches_the_kernel_as_none(recorded):
    run(problem({"seq_q": 3, "seq_k": 5, "head_dim_qk": 4, "window": [-1, -1]}), impl=f"{HERE}:recording_kernel")
    call = recorded[-1]
    assert call["window"] is None


def only_o_kernel(q, k, v, **kwargs):
    return torch_attention(q, k, v, **kwargs)[0]


def o_mapping_kernel(q, k, v, **kwargs):
    return {"o": torch_attention(q, k, v, **kwargs)[0]}


def f16_lse_kernel(q, k, v, **kwargs):
    o, lse = torch_attention(q, k, v, **kwargs)
    return o, lse.half()


@pytest.mark.parametrize("kernel, fragments", [
    ("only_o_kernel", ["only_o_kernel", "expected a tuple of 2 tensors (o, lse)"]),
    ("o_mapping_kernel", ["o_mapping_kernel", "['o']", "expected ['o', 'lse']"]),
    ("f16_lse_kernel", ["f16_lse_kernel", "lse", "torch.float32"]),
])
def test_kernel_breaking_the_lse_contract_fails_the_case(kernel, fragments):
    prob = problem({"seq_q": 3, "seq_k": 5, "head_dim_qk": 4, "return_lse": True}, dtype="f16")
    with pytest.raises(KernelFailure) as info:
        run(prob, impl=f"{HERE}:{kernel}")
    for fragment in fragments:
        assert fragment in info.value.reason, (fragment, info.value.reason)


def test_module_is_importable_for_impl():
    assert sys.modules[HERE].recording_kernel is recording_kernel
