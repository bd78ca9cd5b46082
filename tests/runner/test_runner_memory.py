"""The pre-run memory check's estimate covers the real peak of every op, and a case beyond free memory skips."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HANG_LIMIT
from e2egen.runner import BoundModel, ReferenceOptions, Skip, make_problem, run
from e2egen.runner.memory import peak_bytes

PROBE = Path(__file__).with_name("memory_probe.py")
# Medium cases (tens to hundreds of MiB at their peak, well above the allocator's noise), every op,
# transposed layouts, 16-bit inputs (rounding) and both attention layouts; each with its tiny warm-up.
CASES = {
    "gemm-f32-tt": (dict(op="gemm", dtype="f32", layout="tt", params=dict(m=64, n=2048, k=4096)), dict(m=4, n=4, k=4)),
    "gemm-f16-nt": (dict(op="gemm", dtype="f16", layout="nt", params=dict(m=256, n=1024, k=2048)), dict(m=4, n=4, k=4)),
    "gemm-bf16-batched": (dict(op="gemm", dtype="bf16", layout="tn", params=dict(m=128, n=512, k=1024, batch=4)),
                          dict(m=4, n=4, k=4, batch=2)),
    "conv2d-fwd": (dict(op="conv2d", dtype="f32", layout="nchw", params=dict(n=4, c=32, k=32, hw=56, kernel=3, pad=1)),
                   dict(n=1, c=2, k=2, hw=4, kernel=3, pad=1)),
    "conv2d-bwd_data": (dict(op="conv2d", direction="bwd_data", dtype="f16", layout="nhwc",
                             params=dict(n=4, c=32, k=32, hw=56, kernel=3, pad=1)), dict(n=1, c=2, k=2, hw=4, kernel=3, pad=1)),
    "conv2d-bwd_weight": (dict(op="conv2d", direction="bwd_weight", dtype="bf16", layout="nhwc",
                               params=dict(n=4, c=32, k=32, hw=56, kernel=3, pad=1)), dict(n=1, c=2, k=2, hw=4, kernel=3, pad=1)),
    "conv3d": (dict(op="conv3d", dtype="f32", layout="nchw", params=dict(n=2, c=8, k=16, dhw=16, kernel=3, pad=1)),
               dict(n=1, c=2, k=2, dhw=4, kernel=3, pad=1)),
    "attention-causal": (dict(op="attention", dtype="f16", layout="bhsd",
                              params=dict(batch=2, heads_q=4, heads_kv=4, seq_q=512, seq_k=512, head_dim_qk=64,
                                          head_dim_v=64, causal=True)),
                         dict(batch=1, heads_q=1, heads_kv=1, seq_q=4, seq_k=4, head_dim_qk=4, head_dim_v=4, causal=True)),
    "attention-gqa-lse": (dict(op="attention", dtype="f32", layout="bshd",
                               params=dict(batch=1, heads_q=8, heads_kv=2, seq_q=256, seq_k=1024, head_dim_qk=64,
                                           head_dim_v=64, return_lse=True)),
                          dict(batch=1, heads_q=2, heads_kv=1, seq_q=4, seq_k=4, head_dim_qk=4, head_dim_v=4, return_lse=True)),
    # 16M scores: the reference and the bound in four chunks of query rows (runner/ops/attention/chunks.py)
    "attention-chunked-gqa-lse": (dict(op="attention", dtype="f16", layout="bhsd",
                                       params=dict(batch=1, heads_q=8, heads_kv=2, seq_q=1024, seq_k=2048,
                                                   head_dim_qk=64, head_dim_v=64, causal=True, return_lse=True)),
                                  dict(batch=1, heads_q=2, heads_kv=1, seq_q=4, seq_k=4, head_dim_qk=4, head_dim_v=4,
                                       causal=True, return_lse=True)),
    # K and V of 5M elements each: streamed over blocks of keys from their input format (key_blocks.py)
    "attention-key-blocks-gqa-lse": (dict(op="attention", dtype="bf16", layout="bhsd",
                                          params=dict(batch=1, heads_q=8, heads_kv=2, seq_q=16, seq_k=20000,
                                                      head_dim_qk=128, head_dim_v=128, return_lse=True)),
                                     dict(batch=1, heads_q=2, heads_kv=1, seq_q=4, seq_k=4, head_dim_qk=4, head_dim_v=4,
                                          return_lse=True)),
    "gemm_gemm": (dict(op="gemm_gemm", dtype="f16", layout="nnn", params=dict(m=256, n=512, k=512, o=256, batch=2)),
                  dict(m=4, n=4, k=4, o=4, batch=1)),
    "conv_gemm": (dict(op="conv_gemm", dtype="f32", layout="nchw-n", params=dict(n=2, c=32, k=32, hw=32, kernel=3, pad=1, o=64)),
                  dict(n=1, c=2, k=2, hw=4, kernel=3, pad=1, o=2)),
}


@pytest.mark.parametrize("name", CASES)
def test_measured_peak_stays_within_the_estimate(name):
    case, tiny = CASES[name]
    case = {"direction": "fwd", **case}
    result = subprocess.run([sys.executable, str(PROBE), json.dumps(case), json.dumps(tiny)], capture_output=True,
                            text=True, timeout=HANG_LIMIT)
    assert result.returncode == 0, result.stderr[-3000:]
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    assert measured["peak"] > 0
    assert measured["peak"] <= measured["estimate"], (
        f"{name}: peak {measured['peak'] / 2**20:.1f} MiB > estimate {measured['estimate'] / 2**20:.1f} MiB")


def gemm(**params):
    return make_problem("gemm", "fwd", "f32", "tt", {"m": 64, "n": 256, "k": 512, **params}, (-1.0, 1.0), 0)


def test_the_estimate_counts_the_bound_and_the_reference_variants():
    plain = peak_bytes(gemm(), ReferenceOptions(), None, same_device=True)
    assert peak_bytes(gemm(), ReferenceOptions(), BoundModel(), same_device=True) > plain
    assert peak_bytes(gemm(), ReferenceOptions(ftz=True), None, same_device=True) > plain
    assert peak_bytes(gemm(), ReferenceOptions(accumulate=8), None, same_device=True) > plain
    assert peak_bytes(gemm(), ReferenceOptions(), None, same_device=False) < plain  # the kernel's share elsewhere


def test_the_case_that_was_killed_at_23_gib_is_estimated_above_that():
    killed = make_problem("gemm", "fwd", "f32", "tt", {"m": 64, "n": 32768, "k": 32768}, (-1.0, 1.0), 0)
    assert peak_bytes(killed, ReferenceOptions(), BoundModel(), same_device=True) > 23 * 2 ** 30


def test_a_case_beyond_free_memory_skips_naming_what_it_needs(monkeypatch):
    from e2egen.runner import device

    needed = peak_bytes(gemm(), ReferenceOptions(), BoundModel(), same_device=True)
    monkeypatch.setattr(device, "free_memory", lambda dev: needed - 1)
    with pytest.raises(Skip, match=r"gemm fwd f32 with its float64 reference needs [0-9.]+ GiB but cpu has"):
        run(gemm(), device="cpu", bound=BoundModel())
    monkeypatch.setattr(device, "free_memory", lambda dev: needed)
    run(gemm(), device="cpu", bound=BoundModel())
