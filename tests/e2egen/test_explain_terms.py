"""`e2egen explain` on an op with a composed bound (attention): the verdict per output, each term's share
of the bound at the worst elements, and the requirements held against the measured arithmetic."""
from __future__ import annotations

import pytest

from e2egen.cli import main

CATALOGUE = """
seed = 1
[ranges]
r0 = [-1.0, 1.0]
[tolerances]
bound_ratio = 1.0
bound_rms = 0.5
bias_z = 6.0
[require]
acc = "f32"
[[suite]]
name = "attn"
op = "attention"
impl = "{impl}"
dtypes = ["f16"]
layouts = ["bhsd"]
ranges = ["r0"]
[[suite.config]]
name = "s64"
heads_q = 2
seq_q = 64
seq_k = 96
head_dim_qk = 32
causal = true
"""
CASE = "attn/attention/s64/fwd/f16/bhsd/r0"


def explain(tmp_path, capsys, impl):
    path = tmp_path / "cat.toml"
    path.write_text(CATALOGUE.format(impl=impl))
    status = main(["explain", CASE, "-c", str(path)])
    return status, capsys.readouterr().out


def test_a_correct_kernel_passes_and_every_term_is_listed(tmp_path, capsys):
    status, out = explain(tmp_path, capsys, "torch")
    assert status == 0 and "output o: passed" in out and out.rstrip().endswith("verdict: passed")
    for term in ("Q·Kᵀ product sum", "scores, exp", "online rescaling", "P rounded before P·V", "P·V product sum",
                 "row sum", "division by the row sum", "output rounding"):
        assert term in out


@pytest.mark.parametrize("impl,expected", [
    ("e2egen.runner.ops.attention.variants:mask_off_by_one", "output o: FAILED"),
    ("e2egen.runner.ops.attention.variants:pv_f16_accumulation", "REQUIREMENT BROKEN: partial sums pass through f16"),
])
def test_a_wrong_kernel_fails_and_says_where(tmp_path, capsys, impl, expected):
    status, out = explain(tmp_path, capsys, impl)
    assert status == 1 and expected in out and out.rstrip().endswith("verdict: FAILED")
