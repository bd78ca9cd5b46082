"""rocMLIR's sliding window (`look_back`): the mask its CPU verifier builds, lowerBound = max(0, lastValidKVIndex −
look_back), keys below it masked for every query row, on top of the KV-cache bound, causal and prefix offsets."""
from __future__ import annotations

import itertools

import pytest
import torch

import e2egen
from e2egen.runner.ops.attention.attention_math import allowed_keys
from e2egen.runner.ops.attention.kernels import torch_attention
from e2egen.runner.ops.attention.params import AttentionParams


def rocmlir_mask(seq_q, seq_k, last_valid, look_back, causal, prefix):
    """rocMLIR's masks, key by key: KV cache (j > P masked), causal (j > i + offset), sliding window (j < max(0, P - W))."""
    allowed = torch.ones(len(last_valid), seq_q, seq_k, dtype=torch.bool)
    for b, i, j in itertools.product(range(len(last_valid)), range(seq_q), range(seq_k)):
        if j > last_valid[b] or (causal and j > i + prefix[b]) or j < max(0, last_valid[b] - look_back):
            allowed[b, i, j] = False
    return allowed


@pytest.mark.parametrize("look_back", [0, 1, 5, 16, 63])
@pytest.mark.parametrize("causal", [False, True])
def test_the_mask_is_rocmlirs(look_back, causal):
    kv_lengths, prefix = (18, 2, 33), (16, 14, 12)
    params = AttentionParams(seq_q=3, seq_k=64, head_dim_qk=8, head_dim_v=8, batch=3, causal=causal, kv_lengths=kv_lengths,
                             prefix_offset=prefix if causal else None, look_back=look_back)
    expected = rocmlir_mask(3, 64, [n - 1 for n in kv_lengths], look_back, causal, prefix if causal else (0, 0, 0))
    assert torch.equal(allowed_keys(params, torch.device("cpu")).squeeze(1), expected)


def test_without_kv_lengths_the_last_valid_key_is_the_last_key():
    params = AttentionParams(seq_q=1, seq_k=10, head_dim_qk=4, head_dim_v=4, look_back=3)
    assert allowed_keys(params, torch.device("cpu")).flatten().tolist() == [False] * 6 + [True] * 4


def _ignores_the_window(q, k, v, *, look_back=None, **keywords):
    return torch_attention(q, k, v, **keywords)


SHAPE = {"seq_q": 1, "seq_k": 96, "head_dim_qk": 16, "batch": 3, "heads_q": 4, "heads_kv": 2, "kv_lengths": [18, 2, 33]}


def test_a_kernel_that_ignores_the_window_fails_and_torchs_passes():
    window = {**SHAPE, "look_back": 4}
    assert e2egen.judge(None, "attention", window, "f16").passed
    ignored = e2egen.judge(_ignores_the_window, "attention", window, "f16")
    assert ignored.status == "failed" and "bound_ratio" in ignored.reason


def test_the_keyword_is_passed_only_to_cases_that_have_a_window():
    def no_window_keyword(q, k, v, *, scale, causal, align, window, kv_lengths, prefix_offset, score_scale,
                          score_bias, return_lse):
        return torch_attention(q, k, v, scale=scale, causal=causal, align=align, window=window, kv_lengths=kv_lengths,
                               prefix_offset=prefix_offset, score_scale=score_scale, score_bias=score_bias,
                               return_lse=return_lse)

    assert e2egen.judge(no_window_keyword, "attention", SHAPE, "f16").passed


def test_the_bound_has_room_for_an_exp_that_returns_0_for_a_subnormal_weight():
    """rocMLIR's PrAttentionF32 on its integer data: where the keys that dominate a row have v = 0, the output is
    the sum of weights exp(s - m) so small they are subnormal in f32, and torch's vectorised exp returns 0 for
    them. The reference here is e^-95 (5.5e-42); 0 must be within the bound (require.subnormals = "any")."""
    from e2egen.runner import make_problem
    from e2egen.runner.ops.attention.attention_math import attention_float64
    from e2egen.runner.ops.attention.bound import attention_bound
    from e2egen.runner.options import BoundModel

    problem = make_problem("attention", "fwd", "f32", "bhsd", {"seq_q": 1, "seq_k": 2, "head_dim_qk": 1, "scale": 1.0},
                           (-1.0, 1.0), 0)
    inputs64 = {"q": torch.tensor([[[[1.0]]]], dtype=torch.float64),
                "k": torch.tensor([[[[0.0], [-95.0]]]], dtype=torch.float64),
                "v": torch.tensor([[[[0.0], [1.0]]]], dtype=torch.float64)}
    reference = attention_float64(problem.params, inputs64).o
    assert 0 < float(reference.flatten()[0]) < 2.0 ** -126  # subnormal in f32
    bound = attention_bound(problem, inputs64)["o"].evaluate(BoundModel(), reference)
    assert float(bound.flatten()[0]) >= float(reference.flatten()[0])  # a 0 from exp's underflow is inside it
