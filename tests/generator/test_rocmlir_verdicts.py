"""Imported rocMLIR catalogues run under both verdicts, rocMLIR's (emulated) and e2egen's: green with torch's kernels
on the CPU, except where rocMLIR's own gate would fail torch's kernel, and then the reason names that gate."""
from __future__ import annotations

from pathlib import Path

import pytest

from e2egen.cli import main
from e2egen.generator.cases import expand
from e2egen.generator.execute import execute
from e2egen.generator.loader import load_catalogue

ROCMLIR_E2E = Path("/work/shared/rocmlir-e2e")

SMALL = '''
directory = "Nightly"
prefix = "rocmlir-gen"
suffix = "--arch %arch %pv %random_data -RMS_threshold 0.003 | rocmlir-driver -c"
[[axis]]
name = "data type"
values = ["f32", "f16", "bf16"]
prefix = "-t "
[[suite]]
name = "s"
[[suite.test]]
config = "--operation gemm -g 2 -m 8 -n 12 -k 40"
[[suite.test]]
config = "--operation conv2d -batchsize=1 -in_channels=4 -out_channels=8 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3 -padding_h=1 -padding_w=1"
[[suite.test]]
config = "--operation attention -seq_len_q 8 -seq_len_k 24 -head_dim_qk 16 -head_dim_v 16 -last_valid_kv_index=20 -sliding_window_look_back=6"
'''


def _import(tmp_path: Path, text: str, *extra: str) -> list:
    source, out = tmp_path / "S.toml", tmp_path / "s.e2e.toml"
    source.write_text(text)
    assert main(["import-rocmlir", str(source), "-o", str(out), *extra]) == 0
    return expand(load_catalogue(str(out)))


@pytest.mark.parametrize("verdict", ["both", "rocmlir", "e2egen"])
def test_a_small_import_runs_green_under_each_verdict(tmp_path, verdict):
    cases = _import(tmp_path, SMALL, "--verdict", verdict)
    assert {c.op for c in cases} == {"gemm", "conv2d", "attention"} and {c.dtype for c in cases} == {"f32", "f16", "bf16"}
    assert {c.verifier.decides for c in cases} == {{"rocmlir": "verifier"}.get(verdict, verdict)}
    for case in cases:
        outcome = execute(case, device="cpu")
        assert outcome.passed, (case.id, outcome.reason)
        assert "rocMLIR's verifier (rocmlir-gen's legacy comparator): [1 1 1]" in outcome.report


def test_a_bad_verdict_choice_is_a_usage_error(tmp_path, capsys):
    source = tmp_path / "S.toml"
    source.write_text(SMALL)
    with pytest.raises(SystemExit) as exited:
        main(["import-rocmlir", str(source), "--verdict", "rocMLIR"])
    assert exited.value.code == 2 and "invalid choice: 'rocMLIR'" in capsys.readouterr().err


# The cheapest case of each family in rocMLIR's own catalogues (a sample: every op family, every dtype kind).
SAMPLE = [("MixedConvLayouts", "conv2d", "f32"), ("conv2d_host_validation_f16_fwd", "conv2d", "f16"),
          ("PaddedGemmConfig", "conv2d", "bf16"), ("GemmVariants", "gemm", "i8"), ("GemmVariantsF4", "gemm", "f4e2m1"),
          ("GemmElementwiseGemmF32", "gemm_gemm", "f32"), ("AttentionDirectToLDS", "attention", "i8"),
          ("PrAttentionSchedule", "attention", "f16"), ("PrAttentionF32", "attention", "f32")]


@pytest.mark.skipif(not ROCMLIR_E2E.is_dir(), reason="rocMLIR's catalogues are not on this machine")
@pytest.mark.parametrize(("name", "op", "dtype"), SAMPLE, ids=lambda value: str(value))
def test_real_catalogues_run_green_or_fail_on_rocmlirs_own_gate(tmp_path, name, op, dtype):
    cases = [c for c in _import(tmp_path, (ROCMLIR_E2E / f"{name}.toml").read_text()) if (c.op, c.dtype) == (op, dtype)]
    case = min(cases, key=lambda c: (c.flops, c.id))
    outcome = execute(case, device="cpu")
    if outcome.status == "failed":  # only where rocMLIR's own verifier fails torch's kernel, naming its gate
        assert outcome.reason.startswith("rocMLIR's verifier fails ("), (case.id, outcome.reason)
    else:
        assert outcome.passed, (case.id, outcome.reason)


BWD_WEIGHT_BF16 = '''
directory = "Nightly"
prefix = "rocmlir-gen"
suffix = "--arch %arch %pv %random_data | rocmlir-driver -c"
[[suite]]
name = "s"
[[suite.test]]
config = "--operation conv2d_bwd_weight -t bf16 -batchsize=64 -in_channels=7 -out_channels=64 -in_h=11 -in_w=11 -fil_h=3 -fil_w=3 -conv_stride_h=2 -conv_stride_w=2 -padding_h=1 -padding_w=1"
'''


@pytest.mark.cpu_paths
def test_torchs_bf16_accumulating_bwd_weight_fails_on_rocmlirs_rms_gate(tmp_path):
    """rocMLIR's PaddedGemmConfig n64-c7-k64-11x11 bwd_weight bf16: where torch's CPU kernel accumulates in bf16
    (ATen's AVX2 path), rocMLIR's own verifier fails it on RMS (its bf16 default 1e-3), while e2egen's verdict
    accepts that arithmetic for torch's own kernel; where it accumulates in f32 both pass."""
    (case,) = [c for c in _import(tmp_path, BWD_WEIGHT_BF16) if c.layout == "nchw"]
    outcome = execute(case, device="cpu")
    if outcome.arithmetic.arithmetic.acc_bits < 24:
        assert outcome.status == "failed" and outcome.reason.startswith("rocMLIR's verifier fails ([0 1 1]): RMS")
    else:
        assert outcome.passed, outcome.reason


GROUPED_NHWC = '''
directory = "Nightly"
prefix = "rocmlir-gen"
suffix = "--arch %arch %pv %random_data -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk | rocmlir-driver -c"
[[suite]]
name = "s"
[[suite.test]]
config = "-t f32 -groupsize=2 -batchsize=1 -in_channels=4 -out_channels=8 -in_h=5 -in_w=5 -fil_h=3 -fil_w=3"
[[suite.test]]
config = "-t f32 -groupsize=1 -batchsize=1 -in_channels=4 -out_channels=8 -in_h=5 -in_w=5 -fil_h=3 -fil_w=3"
'''


def test_a_grouped_nhwc_conv_takes_g_after_n_as_todays_rocmlir_gen(tmp_path, capsys):
    cases = _import(tmp_path, GROUPED_NHWC)
    assert {(c.params.get("groups", 1), c.layout) for c in cases} == {(2, "nghwc-gkyxc-nghwk"), (1, "nhwc")}
    assert "puts g after n (addGToLayout)" in capsys.readouterr().err
    for case in cases:
        assert execute(case, device="cpu").passed
