"""Attention's reference over chunks of query rows (runner/ops/attention/chunks.py) is the whole case's to the last
bit, and its bound the whole case's to its magnitude sums' own rounding, with masks, GQA and score tensors; streamed
over blocks of keys (key_blocks.py), from K and V in their input format, to float64's rounding."""
from __future__ import annotations

import pytest
import torch

from e2egen.runner import BoundModel, make_problem
from e2egen.runner.inputs import generate_inputs
from e2egen.runner.ops.attention import params as attention_params
from e2egen.runner.ops.attention.attention_math import attention_rows
from e2egen.runner.ops.attention.bound import rows_bound

SHAPES = {
    "plain": {"batch": 2, "heads_q": 2, "heads_kv": 2, "seq_q": 37, "seq_k": 53, "head_dim_qk": 16, "head_dim_v": 8},
    "causal bottom-right, lse": {"batch": 2, "heads_q": 2, "heads_kv": 2, "seq_q": 37, "seq_k": 53, "head_dim_qk": 16,
                                 "head_dim_v": 8, "causal": True, "align": "bottom-right", "return_lse": True},
    "gqa, window, kv lengths": {"batch": 2, "heads_q": 4, "heads_kv": 2, "seq_q": 29, "seq_k": 41, "head_dim_qk": 8,
                                "head_dim_v": 8, "window": [5, 3], "kv_lengths": [41, 17], "return_lse": True},
    "score tensors": {"batch": 1, "heads_q": 2, "heads_kv": 1, "seq_q": 21, "seq_k": 30, "head_dim_qk": 8,
                      "head_dim_v": 8, "score_scale": True, "score_bias": True},
    "a batch without keys, lse": {"batch": 2, "heads_q": 2, "heads_kv": 1, "seq_q": 23, "seq_k": 30, "head_dim_qk": 8,
                                  "head_dim_v": 8, "kv_lengths": [30, 0], "return_lse": True},
    "quantized i8, causal": {"batch": 1, "heads_q": 2, "heads_kv": 2, "seq_q": 19, "seq_k": 19, "head_dim_qk": 8,
                             "head_dim_v": 8, "quantized": True, "quant_bias": 3, "quant_scale": 0.0625,
                             "causal": True, "return_lse": True},
}
DTYPE = {"quantized i8, causal": "i8"}


def _problem(shape: dict, dtype: str = "f16"):
    return make_problem("attention", "fwd", dtype, "bhsd", shape, (-1.0, 1.0), 3)


@pytest.mark.parametrize("name", list(SHAPES))
def test_chunked_reference_and_bound_equal_the_whole_case_s(name, monkeypatch):
    problem = _problem(SHAPES[name], DTYPE.get(name, "f16"))
    inputs64 = {k: v.to(torch.float64) for k, v in generate_inputs(problem).items()}
    whole = attention_rows(problem.params, inputs64)
    whole_bounds = rows_bound(problem, inputs64, whole)
    params = problem.params
    # as small as keeps every key in one block: 4 to 16 rows per chunk
    monkeypatch.setattr(attention_params, "CHUNK_SCORES", attention_params.elements_per_key(params) * params.seq_k)
    assert len(attention_params.query_chunks(params)) > 1 and not attention_params.blocks_keys(params)
    numerics = problem.numerics
    chunked = numerics.reference(problem, inputs64)
    bounds = numerics.error_bound(problem, inputs64)
    model = BoundModel()
    for output in chunked:
        expected = getattr(whole, output)
        assert torch.equal(chunked[output], expected)
        got, want = bounds[output].evaluate(model, expected), whole_bounds[output].evaluate(model, expected)
        # the same terms; their magnitude sums take f32 (proven, widened) or float64 by the rows a product has
        assert torch.allclose(got, want, rtol=1e-5, atol=0)


def test_a_long_context_case_is_cut_into_chunks_that_fit():
    params = _problem({"batch": 1, "heads_q": 8, "heads_kv": 1, "seq_q": 4096, "seq_k": 32768, "head_dim_qk": 128,
                       "head_dim_v": 128}).params
    chunks = attention_params.query_chunks(params)
    assert chunks[0] == (0, 16) and chunks[-1][1] == 4096 and len(chunks) == 256
    assert attention_params.chunk_rows(params) * params.heads_q * params.seq_k <= attention_params.CHUNK_SCORES


@pytest.mark.parametrize("name", [name for name in SHAPES if name != "quantized i8, causal"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_streamed_key_blocks_give_the_whole_case_s_reference_and_bound(name, dtype, monkeypatch):
    problem = _problem(SHAPES[name], dtype)
    drawn = generate_inputs(problem)
    inputs64 = {k: v.to(torch.float64) for k, v in drawn.items()}
    whole = attention_rows(problem.params, inputs64)
    whole_bounds = rows_bound(problem, inputs64, whole)
    params = problem.params
    # blocks of 7 keys, the last shorter
    monkeypatch.setattr(attention_params, "CHUNK_SCORES", 7 * attention_params.elements_per_key(params))
    assert attention_params.key_block_size(params) == 7 and attention_params.blocks_keys(params)
    assert len(attention_params.query_chunks(params)) > 1
    # K and V as the runner passes them to a streaming case: in their input format (AttentionOp.streamed_inputs)
    streamed = dict(inputs64, **{name: drawn[name] for name in problem.spec.streamed_inputs(params, "fwd")})
    assert streamed["k"].dtype != torch.float64
    numerics = problem.numerics
    reference, bounds = numerics.reference(problem, streamed), numerics.error_bound(problem, streamed)
    model = BoundModel()
    for output in reference:
        expected = getattr(whole, output)
        # another summation order of the same float64 sums: |o| <= Σ p|v| <= 1 apart from cancellation
        assert torch.allclose(reference[output], expected, rtol=1e-13, atol=1e-15, equal_nan=True)  # |v| <= 1
        got, want = bounds[output].evaluate(model, expected), whole_bounds[output].evaluate(model, expected)
        assert torch.allclose(got, want, rtol=1e-5, atol=0)


def test_a_decode_step_over_a_long_cache_streams_its_keys():
    params = _problem({"batch": 1, "heads_q": 32, "heads_kv": 8, "seq_q": 1, "seq_k": 131072, "head_dim_qk": 128,
                       "head_dim_v": 128, "return_lse": True}).params
    blocks = attention_params.key_blocks(params)
    assert len(blocks) == 32 and blocks[0] == (0, 4096) and blocks[-1][1] == 131072
    assert params.heads_kv * 4096 * params.head_dim_qk <= attention_params.CHUNK_SCORES


def _scaled_output(q, k, v, **options):
    """torch's kernel with o off by 2^-7 relative: a bug of a few f16 ulps in every output."""
    from e2egen.runner.ops.attention.kernels import torch_attention

    result = torch_attention(q, k, v, **options)
    o, rest = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
    scaled = (o.float() * (1 + 2 ** -7)).to(o.dtype)
    return (scaled, *rest) if rest else scaled


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_a_streamed_case_passes_torch_s_kernel_and_fails_a_scaled_output(dtype, monkeypatch):
    import e2egen

    shape = SHAPES["gqa, window, kv lengths"]
    params = _problem(shape, dtype).params
    monkeypatch.setattr(attention_params, "CHUNK_SCORES", 7 * attention_params.elements_per_key(params))
    assert attention_params.blocks_keys(params)
    correct = e2egen.judge(None, "attention", shape, dtype, layout="bhsd")
    assert correct.passed, correct.reason
    wrong = e2egen.judge(_scaled_output, "attention", shape, dtype, layout="bhsd")
    assert not wrong.passed
